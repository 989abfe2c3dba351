"""The ``KeyCustody`` interface and what every custody backend shares.

A backend turns "make a managed key" into a public key plus an opaque
``key_ref`` that the operational store keeps, and "sign with it" into a
signature, without the private key ever leaving the backend's control:

| backend                          | ``key_ref`` kept in SQLite           | ``destroy``                  |
|----------------------------------|--------------------------------------|------------------------------|
| PKCS#11 wrapped seed (embedded)  | seed wrapped by the token's AES key  | nothing on the token (the    |
|                                  | (AES-256-GCM, bound to the key row)  | store erases the blob)       |
| HSM with native ML-DSA (PKCS#11  | CKA_ID of a non-extractable private  | C_DestroyObject              |
| 3.2 CKM_ML_DSA), not written yet | key object on the HSM                |                              |
| cloud KMS with ML-DSA, not       | the KMS key name / ARN               | schedule deletion in the KMS |
| written yet                      |                                      |                              |

``binding`` is what a ``key_ref`` is bound to (key id, account, environment,
algorithm): the embedded backend authenticates it as AES-GCM associated data,
so a wrapped seed copied into another row, account or environment fails to
unwrap. No method returns or logs private material; errors carry no key bytes.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass, field
from typing import Protocol

from pqc import SPECS, Algorithm, Family

#: Algorithms a managed key may use: ML-DSA only (the spec's rule).
MANAGED_ALGORITHMS = (Algorithm.ML_DSA_44, Algorithm.ML_DSA_65, Algorithm.ML_DSA_87)


@dataclass(frozen=True, slots=True)
class CustodyKey:
    """A key a backend has just created: what the store keeps about it."""

    public_key: bytes = field(repr=False)
    key_ref: bytes = field(repr=False)
    backend: str
    wrapping_key: str  # the backend's name for what protects key_ref ("" if nothing)


class KeyCustody(Protocol):
    """Where managed private keys live. Every method is synchronous and may block
    (PKCS#11, network); the API calls them from its thread pool."""

    #: Stored with each key, so a later deployment knows which backend owns it.
    name: str

    def create(self, algorithm: Algorithm, binding: bytes) -> CustodyKey:
        """A new key pair for ``algorithm``; the private half stays in custody."""

    def sign(self, algorithm: Algorithm, key_ref: bytes, binding: bytes, message: bytes, context: bytes) -> bytes:
        """A FIPS 204 pure ML-DSA signature over ``message`` with ``context``;
        raises ``CustodyIntegrityError`` when ``key_ref`` does not open under ``binding``."""

    def destroy(self, key_ref: bytes, binding: bytes) -> None:
        """Destroy what the backend holds for this key (idempotent). The caller
        erases ``key_ref`` from the store afterwards."""

    def describe(self) -> dict[str, str]:
        """Non-secret facts for logs and health output (module, token, key label)."""

    def close(self) -> None:
        """Release sessions and handles."""


def binding_for(key_id: str, account_id: str, environment: str, algorithm: str) -> bytes:
    """The bytes a managed key's material is bound to."""
    return "\x00".join(("qday-managed-key-v1", key_id, account_id, environment, algorithm)).encode()


def require_managed_algorithm(algorithm: Algorithm) -> None:
    """Raise ValueError for an algorithm managed custody does not hold."""
    if algorithm not in MANAGED_ALGORITHMS or SPECS[algorithm].family is not Family.ML_DSA:
        raise ValueError(f"{algorithm} cannot be held in managed custody")


def new_seed() -> bytearray:
    """32 random bytes from the OS, read straight into a mutable buffer (no
    immutable copy to linger)."""
    seed = bytearray(32)
    with open("/dev/urandom", "rb", buffering=0) as source:
        view = memoryview(seed)
        filled = 0
        while filled < len(seed):
            filled += source.readinto(view[filled:]) or 0
    return seed


def wipe(buffer: bytearray) -> None:
    """Overwrite a mutable buffer with zeros."""
    buffer[:] = bytes(len(buffer))


_BYTES_DATA_OFFSET = bytes.__basicsize__ - 1  # CPython: ob_sval follows the header


def _scrub_works() -> bool:
    if sys.implementation.name != "cpython":
        return False
    probe = bytes(bytearray(os.urandom(16)))
    ctypes.memset(id(probe) + _BYTES_DATA_OFFSET, 0, len(probe))
    return probe == bytes(16)


_SCRUB = _scrub_works()


def scrub_bytes(value: bytes) -> None:
    """Best effort: zero the buffer of a ``bytes`` object this module owns alone
    (a library returned it to us and nobody else holds it). CPython only; a
    no-op elsewhere. Never call it on shared or short (cached) objects."""
    if _SCRUB and type(value) is bytes and len(value) > 1:
        ctypes.memset(id(value) + _BYTES_DATA_OFFSET, 0, len(value))
