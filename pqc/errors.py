"""Exceptions raised by ``pqc``, domain errors (``core.errors.DomainError``).

The API maps each class to the spec code below (``api/errors.py``, one table);
``details`` is a small JSON-safe dict for the error envelope. No exception message or
detail ever contains key material, only lengths, field names and reasons.

| class                 | API code | raised for                                                   |
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

from core.errors import DomainError


class PqcError(DomainError):
    """Base of every ``pqc`` error: a message and JSON-safe ``details``."""


class UnsupportedAlgorithm(PqcError):
    """The algorithm is unknown, or it does not offer the requested operation."""


class InvalidKeyFormat(PqcError):
    """A key, seed or claimed signer identity has the wrong length or cannot be parsed."""


class InvalidHex(PqcError):
    """A hex field is malformed; ``details['field']`` names it."""


class InvalidSignature(PqcError):
    """The signature is not valid for this key, message and context."""


class MalformedSignature(InvalidSignature):
    """The signature bytes are structurally impossible (so also an InvalidSignature)."""


class InvalidInput(PqcError):
    """A non-key parameter is out of range (context length, digest length, scheme name)."""
