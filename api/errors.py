"""Every error code the API can return, with its HTTP status, and the one table that
maps domain exceptions to them.

Domain code raises ``core.errors.DomainError`` subclasses that name no code or status;
``DOMAIN_ERRORS`` below says which code each class is answered with (the most specific
class of an exception's MRO wins). ``ApiError`` is for what only HTTP knows: bodies,
headers, content types, rate limits. ``docs/api.md`` is checked against ``ERROR_CODES``
by a test, and a test checks every domain error class has a code.
"""

from __future__ import annotations

from typing import Any

from chains import errors as chain_errors
from chains.bitcoin import bip32, descriptors
from core.errors import DomainError
from pqc import errors as pqc_errors
from services import errors as service_errors
from services import outbound
from services.custody import errors as custody_errors
from storage import errors as storage_errors

#: code -> (HTTP status, meaning). The spec's codes first, then the ones we add.
ERROR_CODES: dict[str, tuple[int, str]] = {
    "AUTH_001": (401, "API key or session token missing, malformed, unknown or expired"),
    "AUTH_002": (401, "API key has been deleted, or its rotation grace period has ended"),
    "AUTH_003": (403, "Credential not allowed here (publishable key, session token or other environment)"),
    "SCAN_001": (400, "Invalid address format"),
    "SCAN_002": (400, "Unsupported chain"),
    "SCAN_003": (404, "Address not found: no on-chain activity"),
    "SCAN_004": (503, "Chain data temporarily unavailable"),
    "SCAN_005": (400, "Invalid output descriptor or extended public key"),
    "SCAN_006": (400, "Private key material refused: only public keys and descriptors of public keys are accepted"),
    "PQC_001": (400, "Unsupported algorithm"),
    "PQC_002": (400, "Invalid key, signature or hex format"),
    "PQC_003": (400, "Post-quantum public key is not registered to this account and environment"),
    "PQC_004": (422, "Signature verification failed (ECDSA or PQC)"),
    "PQC_005": (400, "Key-registration challenge invalid, not issued for this key, or expired"),
    "ATT_001": (400, "Strict mode: message is not a statement issued to this account for these keys"),
    "ATT_002": (409, "Strict mode: statement already used or expired"),
    "GEN_001": (400, "Invalid algorithm/chain combination"),
    "GEN_002": (500, "Internal key-generation error"),
    "RATE_001": (429, "Rate limit exceeded"),
    "ACC_001": (409, "An account with this email already exists"),
    "ACC_002": (401, "Invalid email or password"),
    "ACC_003": (400, "Password does not meet the policy (12 to 1024 characters)"),
    "ACC_004": (404, "Account not found"),
    "KEY_001": (409, "API key was already rotated; rotate its replacement instead"),
    "CUS_001": (403, "Managed custody requires the Pro or Enterprise plan"),
    "CUS_002": (409, "Managed key is pending deletion: signing is refused until the deletion is cancelled"),
    "CUS_003": (400, "Algorithm cannot be held in managed custody (ML-DSA only)"),
    "CUS_004": (503, "Managed-custody backend unavailable"),
    "CUS_005": (410, "Managed key was destroyed; its private key no longer exists"),
    "CUS_006": (409, "Managed key is not in a state that allows this change"),
    "CUS_007": (500, "Stored managed-key material failed its integrity check"),
    "LIM_001": (403, "Plan cap reached"),
    "REQ_001": (400, "Request body or parameter failed validation"),
    "REQ_002": (400, "Request body is not valid JSON"),
    "REQ_003": (415, "Content-Type must be application/json"),
    "REQ_004": (413, "Request body too large"),
    "REQ_005": (404, "No such endpoint or resource"),
    "REQ_006": (405, "Method not allowed on this endpoint"),
    "REQ_007": (400, "Conflicting or repeated credentials"),
    "REQ_008": (408, "Request headers and body not received in time"),
    "SRV_001": (500, "Internal server error"),
    "SRV_002": (503, "Service temporarily unavailable (storage cannot take writes)"),
}


#: Domain exception class -> error code. Lookup walks the exception's MRO, so a
#: subclass listed here overrides its base (MalformedSignature is PQC_002, not PQC_004).
DOMAIN_ERRORS: dict[type[DomainError], str] = {
    pqc_errors.UnsupportedAlgorithm: "PQC_001",
    pqc_errors.InvalidKeyFormat: "PQC_002",
    pqc_errors.InvalidHex: "PQC_002",
    pqc_errors.MalformedSignature: "PQC_002",
    pqc_errors.InvalidSignature: "PQC_004",
    pqc_errors.InvalidInput: "REQ_001",
    chain_errors.InvalidAddress: "SCAN_001",
    chain_errors.UnsupportedChain: "SCAN_002",
    bip32.InvalidExtendedKey: "SCAN_005",
    descriptors.InvalidDescriptor: "SCAN_005",
    bip32.PrivateKeyRefused: "SCAN_006",
    chain_errors.AddressNotFound: "SCAN_003",
    chain_errors.ChainUnavailable: "SCAN_004",
    storage_errors.DuplicateEmail: "ACC_001",
    storage_errors.AccountNotFound: "ACC_004",
    storage_errors.StorageError: "SRV_002",
    service_errors.InvalidRequest: "REQ_001",
    service_errors.NotFound: "REQ_005",
    service_errors.Unauthenticated: "AUTH_001",
    service_errors.CredentialRevoked: "AUTH_002",
    service_errors.CredentialNotAllowed: "AUTH_003",
    service_errors.InvalidLogin: "ACC_002",
    service_errors.WeakPassword: "ACC_003",
    service_errors.AlreadyRotated: "KEY_001",
    service_errors.ChallengeInvalid: "PQC_005",
    service_errors.KeyNotRegistered: "PQC_003",
    service_errors.StatementInvalid: "ATT_001",
    service_errors.StatementUsed: "ATT_002",
    service_errors.InvalidCombination: "GEN_001",
    service_errors.KeyGenerationFailed: "GEN_002",
    custody_errors.PlanRequired: "CUS_001",
    custody_errors.KeyPendingDeletion: "CUS_002",
    custody_errors.AlgorithmNotManaged: "CUS_003",
    custody_errors.CustodyError: "CUS_004",
    custody_errors.KeyDestroyed: "CUS_005",
    custody_errors.InvalidKeyState: "CUS_006",
    custody_errors.CustodyIntegrityError: "CUS_007",
    service_errors.PlanCapReached: "LIM_001",
    outbound.UnsafeDestination: "REQ_001",
}


def code_for(cls: type[DomainError]) -> str:
    """The error code a domain exception class is answered with: its own entry or its
    nearest base's (``SRV_001`` for a class missing from ``DOMAIN_ERRORS``, which a test forbids)."""
    for base in cls.__mro__:
        if issubclass(base, DomainError) and base in DOMAIN_ERRORS:
            return DOMAIN_ERRORS[base]
    return "SRV_001"


def code_of(exc: DomainError) -> str:
    """The error code a domain exception is answered with (``code_for`` of its class)."""
    return code_for(type(exc))


def status_of(code: str) -> int:
    """The HTTP status for an error code (500 for a code missing from the table)."""
    return ERROR_CODES.get(code, (500, ""))[0]


class ApiError(Exception):
    """An error only HTTP knows of (body, headers, content type, rate limit), answered
    with the spec's envelope; carries its code, HTTP status and details."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.status_code = status_of(code)
        self.details = {k: v for k, v in details.items() if v is not None}


class RateLimited(ApiError):
    """Too many requests in the current window; carries the seconds to wait."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("RATE_001", f"rate limit exceeded; retry in {retry_after} s")
        self.retry_after = retry_after
