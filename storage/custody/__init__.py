"""Managed custody: where managed ML-DSA private keys live.

``KeyCustody`` (``storage.custody.base``) is the interface; the embedded default
is ``Pkcs11WrappedSeedCustody`` (``storage.custody.pkcs11_softhsm``): a PKCS#11
token (SoftHSM2 unless configured otherwise) holds one non-extractable AES-256
key, and every ML-DSA seed is kept only wrapped by it. See docs/custody.md.
"""

from storage.custody.base import (
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
