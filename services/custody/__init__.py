"""Managed custody: where managed ML-DSA private keys live.

``KeyCustody`` (``services.custody.backend``) is the interface; the embedded default
is ``Pkcs11WrappedSeedCustody`` (``services.custody.pkcs11``): a PKCS#11
token (SoftHSM2 unless configured otherwise) holds one non-extractable AES-256
key, and every ML-DSA seed is kept only wrapped by it. See docs/custody.md.
"""

from services.custody.backend import (
    CustodyError,
    CustodyIntegrityError,
    CustodyKey,
    CustodyUnavailable,
    KeyCustody,
    binding_for,
)

__all__ = [
    "CustodyError",
    "CustodyIntegrityError",
    "CustodyKey",
    "CustodyUnavailable",
    "KeyCustody",
    "binding_for",
]
