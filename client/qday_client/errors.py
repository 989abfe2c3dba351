"""Exceptions the client raises: one class per family of the API's error codes.

Every server error arrives in the spec's envelope ``{error: {code, message,
details}, meta: {requestId}}``; ``error_from_response`` turns it into the class
of its code's family (``AUTH_*`` -> ``AuthError`` ...), carrying ``code``,
``status``, ``message``, ``request_id`` and ``details``. Errors raised before a
request is answered (bad key file, unreachable server) are ``LocalError`` or
``ConnectionFailed``; a webhook delivery that fails its checks is
``WebhookVerificationError``. No message ever holds key material.
"""

from __future__ import annotations

from typing import Any


class QdayError(Exception):
    """Base of every client error; ``code`` is the API's error code (or a local one)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.request_id = request_id
        self.details = details or {}


class ApiError(QdayError):
    """An error answered by the API (any code without a more specific family)."""


class AuthError(ApiError):
    """AUTH_*: missing, unknown, revoked or not-allowed credential."""


class ScanError(ApiError):
    """SCAN_*: invalid address, unsupported chain, no activity, chain data unavailable."""


class CryptoError(ApiError):
    """PQC_*: unsupported algorithm, malformed key/signature, unregistered key, failed verification."""


class AttestationError(ApiError):
    """ATT_*: strict-mode statement not issued for these keys, already used or expired."""


class KeyGenerationError(ApiError):
    """GEN_*: bad algorithm/chain combination or a server-side generation failure."""


class RateLimitError(ApiError):
    """RATE_001 after the client's bounded retries; ``retry_after`` is the server's last hint (s)."""

    def __init__(self, *args: Any, retry_after: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class AccountError(ApiError):
    """ACC_*: duplicate email, bad login, password policy, unknown account."""


class ApiKeyError(ApiError):
    """KEY_*: API-key lifecycle conflicts (rotating a key twice)."""


class CustodyError(ApiError):
    """CUS_*: managed-custody plan, state and backend errors."""


class PlanCapError(ApiError):
    """LIM_*: the account's plan allows no more (watched addresses, API keys); ``details``
    holds ``cap``, ``limit`` and ``plan``."""


class RequestError(ApiError):
    """REQ_*: validation, JSON, content type, size, unknown resource, method."""


class ServerError(ApiError):
    """SRV_* and answers that are not the spec's envelope."""


class ConnectionFailed(QdayError):
    """The server could not be reached or did not answer (code ``NET``)."""


class LocalError(QdayError):
    """A problem found on this machine before any request: key file, keystore, input file (code ``LOCAL``)."""

    def __init__(self, message: str) -> None:
        super().__init__("LOCAL", message)


class WebhookVerificationError(QdayError):
    """A webhook delivery to refuse (code ``WEBHOOK``): a header missing or malformed, a
    signature that does not hold, a timestamp too far from now, or a body that is not the
    event it claims; ``reason`` names the check (``missing_header``, ``hmac_mismatch``,
    ``mldsa_invalid``, ``timestamp_too_old`` ...). Found on this machine, with no request
    made, like ``LocalError``; but a bad delivery, not a problem of this machine."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__("WEBHOOK", message, details={"reason": reason})
        self.reason = reason


_FAMILIES: dict[str, type[ApiError]] = {
    "AUTH": AuthError,
    "SCAN": ScanError,
    "PQC": CryptoError,
    "ATT": AttestationError,
    "GEN": KeyGenerationError,
    "RATE": RateLimitError,
    "ACC": AccountError,
    "KEY": ApiKeyError,
    "CUS": CustodyError,
    "LIM": PlanCapError,
    "REQ": RequestError,
    "SRV": ServerError,
}


def error_class(code: str) -> type[ApiError]:
    """The exception class for an API error code (by its family prefix)."""
    return _FAMILIES.get(code.split("_", 1)[0], ApiError)


def error_from_response(status: int, body: Any, request_id: str | None, retry_after: float = 0.0) -> ApiError:
    """The typed exception for an error answer; a body that is not the spec's
    envelope becomes ``ServerError`` ``SRV_001`` naming the HTTP status."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return ServerError(
            "SRV_001",
            f"unexpected HTTP {status} answer without an error envelope",
            status=status,
            request_id=request_id,
        )
    meta = body.get("meta") if isinstance(body.get("meta"), dict) else {}
    code = error["code"]
    kwargs: dict[str, Any] = {
        "status": status,
        "request_id": meta.get("requestId", request_id),
        "details": error.get("details") if isinstance(error.get("details"), dict) else {},
    }
    cls = error_class(code)
    if cls is RateLimitError:
        kwargs["retry_after"] = retry_after
    return cls(code, str(error.get("message", "")), **kwargs)
