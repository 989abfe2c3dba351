"""Exceptions raised by ``pqc``; each carries the spec error code the API answers with.

The API layer maps ``code`` to an HTTP status (``api/errors.py``); ``details`` is a
small JSON-safe dict for the error envelope. No exception message or detail ever
contains key material, only lengths, field names and reasons.

| class                 | code     | raised for                                                   |
|-----------------------|----------|--------------------------------------------------------------|
| UnsupportedAlgorithm  | PQC_001  | unknown algorithm name, or an operation the algorithm lacks  |
| InvalidKeyFormat      | PQC_002  | wrong-length or unparsable key, seed or claimed signer       |
| InvalidHex            | PQC_002  | malformed hex text (the field is named in ``details``)       |
| InvalidSignature      | PQC_004  | signature does not verify, high-S, signer mismatch           |
| MalformedSignature    | PQC_002  | signature bytes that cannot be a signature (length, DER,     |
|                       |          | r/s out of range, recovery byte); a kind of InvalidSignature |
| InvalidInput          | REQ_001  | other bad parameters: context > 255 bytes, digest not 32     |
|                       |          | bytes, unknown message scheme                                |
"""

from __future__ import annotations

from typing import ClassVar


class PqcError(Exception):
    """Base of every ``pqc`` error: a message, a spec ``code`` and JSON-safe ``details``."""

    code: ClassVar[str]

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, object] = details


class UnsupportedAlgorithm(PqcError):
    """The algorithm is unknown, or it does not offer the requested operation."""

    code = "PQC_001"


class InvalidKeyFormat(PqcError):
    """A key, seed or claimed signer identity has the wrong length or cannot be parsed."""

    code = "PQC_002"


class InvalidHex(PqcError):
    """A hex field is malformed; ``details['field']`` names it."""

    code = "PQC_002"


class InvalidSignature(PqcError):
    """The signature is not valid for this key, message and context."""

    code = "PQC_004"


class MalformedSignature(InvalidSignature):
    """The signature bytes are structurally impossible (so also an InvalidSignature)."""

    code = "PQC_002"


class InvalidInput(PqcError):
    """A non-key parameter is out of range (context length, digest length, scheme name)."""

    code = "REQ_001"
