"""Checking a webhook delivery before acting on it: both signatures, the timestamp's
age and the event id, then the typed event.

A delivery is a ``POST`` of the JSON event with three headers (docs/api.md, Webhooks):

* ``Qday-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>``, one
  ``v1`` per endpoint secret in use (two for 24 h after a rotation; any one may match);
* ``Qday-Signature-MLDSA: <hex ML-DSA-65 signature of "<t>." + body, empty context>``
  under the service's key from ``GET /v1/webhooks/signing-key``;
* ``Qday-Event-Id``, the body's ``id``.

``verify_webhook`` accepts a delivery only when both signatures hold, so it stays
authentic if either HMAC-SHA256 or ML-DSA-65 is broken (or the endpoint secret leaks).
The HMAC is checked first: it is cheap, so forged deliveries never cost an ML-DSA
verification. Signatures are compared as bytes (hex case does not matter). Nothing
here talks to the network.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from typing import Any, Final

import msgspec

import pqc
from qday_client.errors import LocalError, WebhookVerificationError

SIGNATURE_HEADER: Final = "Qday-Signature"
MLDSA_HEADER: Final = "Qday-Signature-MLDSA"
EVENT_ID_HEADER: Final = "Qday-Event-Id"
SECRET_PREFIX: Final = "whsec_"
DEFAULT_TOLERANCE: Final = 300

_ALGORITHM: Final = pqc.Algorithm.ML_DSA_65
_SPEC: Final = pqc.SPECS[_ALGORITHM]
_TIMESTAMP: Final = re.compile(r"[0-9]{1,15}")
_HMAC_HEX: Final = re.compile(r"[0-9a-fA-F]{64}")


class WebhookEvent(msgspec.Struct, frozen=True, rename="camel", kw_only=True):
    """One verified event: ``id`` (``evt_…``, the key to drop repeats by), ``type``
    (``key.exposed``, ``risk.changed``, ``balance.changed``, ``ping``; a plain string so a
    newer server's types do not break this client), ``created_at`` (ISO 8601 UTC) and
    ``data``. Unknown body fields are ignored."""

    id: str
    type: str
    created_at: str
    data: dict[str, Any]


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """The one value of ``name`` in any letter case; refused when it appears with different values."""
    values = {value for key, value in headers.items() if key.lower() == name.lower()}
    if len(values) > 1:
        raise WebhookVerificationError(
            f"header {name} appears more than once with different values", "duplicate_header"
        )
    return values.pop() if values else None


def _required_headers(headers: Mapping[str, str]) -> tuple[str, str, str]:
    """The signature, ML-DSA signature and event id headers; all are needed."""
    names = (SIGNATURE_HEADER, MLDSA_HEADER, EVENT_ID_HEADER)
    found = {name: value for name in names if (value := _header(headers, name)) is not None}
    missing = [name for name in names if name not in found]
    if missing:
        raise WebhookVerificationError(
            f"missing header {', '.join(missing)}: not a signed qday delivery (were the headers passed on?)",
            "missing_header",
        )
    return found[SIGNATURE_HEADER], found[MLDSA_HEADER], found[EVENT_ID_HEADER]


def _malformed(reason: str) -> WebhookVerificationError:
    return WebhookVerificationError(
        f"malformed {SIGNATURE_HEADER} header: {reason} (expected t=<unix seconds>,v1=<64 hex digits>[,v1=…])",
        "malformed_signature",
    )


def _parse_signature_header(value: str) -> tuple[str, list[bytes]]:
    """The timestamp exactly as sent (it is part of what was signed) and every ``v1`` MAC;
    other schemes are skipped so a later server can add one."""
    timestamps: list[str] = []
    macs: list[bytes] = []
    for item in value.split(","):
        key, sep, text = item.strip().partition("=")
        if not sep:
            raise _malformed(f"item {item.strip()[:20]!r} is not key=value")
        if key == "t":
            if not _TIMESTAMP.fullmatch(text):
                raise _malformed("t is not a Unix time in seconds")
            timestamps.append(text)
        elif key == "v1":
            if not _HMAC_HEX.fullmatch(text):
                raise _malformed("a v1 entry is not 64 hex digits (HMAC-SHA256)")
            macs.append(bytes.fromhex(text))
    if len(timestamps) != 1:
        raise _malformed("it must hold exactly one t")
    if not macs:
        raise _malformed("it holds no v1 entry")
    return timestamps[0], macs


def _public_key_bytes(public_key: bytes | str) -> bytes:
    """The signing key as bytes; ``LocalError`` when it cannot be the published key (a
    receiver's configuration problem, not a bad delivery)."""
    if isinstance(public_key, str):
        try:
            public_key = pqc.decode_hex(public_key, field="public_key")
        except pqc.InvalidHex as exc:
            raise LocalError(f"the webhook signing key is not hex: {exc.message}") from None
    if len(public_key) != _SPEC.public_key_size:
        raise LocalError(
            f"the webhook signing key must be the {_SPEC.public_key_size}-byte {_ALGORITHM} key of "
            f"GET /v1/webhooks/signing-key, got {len(public_key)} bytes"
        )
    return public_key


def _mldsa_signature(value: str) -> bytes:
    """The ML-DSA-65 signature from its header, of the right length."""
    try:
        signature = pqc.decode_hex(value, field=MLDSA_HEADER)
    except pqc.InvalidHex as exc:
        raise WebhookVerificationError(
            f"malformed {MLDSA_HEADER} header: {exc.details.get('reason', 'not hex')}", "malformed_signature"
        ) from None
    if len(signature) != _SPEC.signature_size:
        raise WebhookVerificationError(
            f"malformed {MLDSA_HEADER} header: an {_ALGORITHM} signature is {_SPEC.signature_size} bytes, "
            f"got {len(signature)}",
            "malformed_signature",
        )
    return signature


def _check_hmac(secret: str, signed: bytes, macs: list[bytes]) -> None:
    """Some ``v1`` is the HMAC under ``secret``; every entry is compared, in constant time."""
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).digest()
    if not any([hmac.compare_digest(expected, mac) for mac in macs]):
        raise WebhookVerificationError(
            f"no v1 in {SIGNATURE_HEADER} matches the HMAC-SHA256 under this secret: the body or t was altered, "
            "or the secret is not this endpoint's (after a rotation, use the new one)",
            "hmac_mismatch",
        )


def _check_mldsa(public_key: bytes, signed: bytes, signature: bytes) -> None:
    """The ML-DSA-65 signature holds under the service's key."""
    try:
        pqc.verify(_ALGORITHM, public_key, signed, signature, b"")
    except pqc.InvalidSignature:
        raise WebhookVerificationError(
            f"the {MLDSA_HEADER} signature is not valid under the webhook signing key: the body or t was altered, "
            "or the key is not the one of GET /v1/webhooks/signing-key",
            "mldsa_invalid",
        ) from None


def _check_age(t: int, now: float, tolerance: int) -> None:
    """``t`` is within ``tolerance`` seconds of ``now``, either way (replays of old deliveries fail)."""
    age = now - t
    if age > tolerance:
        raise WebhookVerificationError(
            f"the delivery's timestamp is {age:.0f} s old, more than the {tolerance} s allowed: "
            "a replay, or this machine's clock is off",
            "timestamp_too_old",
        )
    if -age > tolerance:
        raise WebhookVerificationError(
            f"the delivery's timestamp is {-age:.0f} s in the future, more than the {tolerance} s allowed: "
            "this machine's clock is off",
            "timestamp_in_future",
        )


def _event(body: bytes) -> WebhookEvent:
    """The body decoded as an event."""
    try:
        return msgspec.json.decode(body, type=WebhookEvent)
    except msgspec.ValidationError as exc:
        raise WebhookVerificationError(f"the body is JSON but not a qday event: {exc}", "body_not_event") from None
    except msgspec.DecodeError as exc:
        raise WebhookVerificationError(f"the body is not valid JSON: {exc}", "body_not_json") from None


def verify_webhook(
    body: bytes,
    headers: Mapping[str, str],
    secret: str,
    public_key: bytes | str,
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> WebhookEvent:
    """The event of a delivery whose HMAC (any ``v1`` under ``secret``, the endpoint's
    ``whsec_…``) and ML-DSA-65 signature (under ``public_key``, bytes or hex, from
    ``GET /v1/webhooks/signing-key``) both hold, whose timestamp is within ``tolerance``
    seconds of ``now`` (default: this machine's clock) and whose ``Qday-Event-Id`` is the
    body's id; so a receiver acts only on authentic, fresh events.

    ``body`` must be the raw bytes received (not re-serialised JSON); header names match in
    any case. Raises ``WebhookVerificationError`` (``reason`` says which check failed) for
    a delivery to refuse, ``LocalError`` when ``secret`` or ``public_key`` cannot be right."""
    if not secret.startswith(SECRET_PREFIX) or secret == SECRET_PREFIX:
        raise LocalError(f"the webhook secret must be the endpoint's {SECRET_PREFIX}… secret")
    key = _public_key_bytes(public_key)
    signature_header, mldsa_header, event_id = _required_headers(headers)
    t, macs = _parse_signature_header(signature_header)
    mldsa_signature = _mldsa_signature(mldsa_header)
    signed = t.encode() + b"." + body
    _check_hmac(secret, signed, macs)
    _check_mldsa(key, signed, mldsa_signature)
    _check_age(int(t), time.time() if now is None else now, tolerance)
    event = _event(body)
    if event.id != event_id:
        raise WebhookVerificationError(
            f"header {EVENT_ID_HEADER} {event_id[:40]!r} is not the body's id {event.id[:40]!r}", "event_id_mismatch"
        )
    return event
