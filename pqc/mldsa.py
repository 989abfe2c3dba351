"""ML-DSA (FIPS 204) backend: which library does which operation.

* keygen from a seed, signing with a seed, verification: ``cryptography``
  (OpenSSL; ~1-2 ms signing, correct 0-255 byte contexts, releases the GIL).
* expanded secret key for a seed: ``pqc.mldsa_expand`` (no library exports it).
* signing with an expanded secret key (no seed available): ``pqcrypto``
  (10x slower, holds the GIL, and rejects valid 254/255-byte contexts, which
  are therefore refused here with InvalidInput).
* HashML-DSA verification: message representative mu built here, checked
  with ``cryptography``'s ``verify_mu``.

Callers go through ``pqc.signatures``, which dispatches by family and validates
lengths and contexts first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType, ModuleType
from typing import Final

from cryptography.exceptions import InvalidSignature as _LibraryInvalidSignature
from cryptography.hazmat.primitives.asymmetric import mldsa as _cg
from pqcrypto.sign import ml_dsa_44, ml_dsa_65, ml_dsa_87

from pqc.algorithms import SPECS, Algorithm
from pqc.errors import InvalidInput, InvalidKeyFormat, InvalidSignature
from pqc.mldsa_expand import LatticeParams, expand_secret_key

_PrivateKey = _cg.MLDSA44PrivateKey | _cg.MLDSA65PrivateKey | _cg.MLDSA87PrivateKey
_PublicKey = _cg.MLDSA44PublicKey | _cg.MLDSA65PublicKey | _cg.MLDSA87PublicKey

#: Longest context pqcrypto 1.0.0 signs with correctly (FIPS 204 allows 255).
PQCRYPTO_MAX_CONTEXT_BYTES: Final = 253


@dataclass(frozen=True, slots=True)
class _Backend:
    params: LatticeParams
    from_seed: Callable[[bytes | bytearray], _PrivateKey]
    from_public_bytes: Callable[[bytes], _PublicKey]
    expanded_key_module: ModuleType


_BACKENDS: Final = MappingProxyType(
    {
        Algorithm.ML_DSA_44: _Backend(
            LatticeParams(k=4, l=4, eta=2),
            _cg.MLDSA44PrivateKey.from_seed_bytes,
            _cg.MLDSA44PublicKey.from_public_bytes,
            ml_dsa_44,
        ),
        Algorithm.ML_DSA_65: _Backend(
            LatticeParams(k=6, l=5, eta=4),
            _cg.MLDSA65PrivateKey.from_seed_bytes,
            _cg.MLDSA65PublicKey.from_public_bytes,
            ml_dsa_65,
        ),
        Algorithm.ML_DSA_87: _Backend(
            LatticeParams(k=8, l=7, eta=2),
            _cg.MLDSA87PrivateKey.from_seed_bytes,
            _cg.MLDSA87PublicKey.from_public_bytes,
            ml_dsa_87,
        ),
    }
)


class PreHash(StrEnum):
    """Hash functions HashML-DSA may use (FIPS 204 section 5.4), named as in NIST ACVP."""

    SHA2_224 = "SHA2-224"
    SHA2_256 = "SHA2-256"
    SHA2_384 = "SHA2-384"
    SHA2_512 = "SHA2-512"
    SHA2_512_224 = "SHA2-512/224"
    SHA2_512_256 = "SHA2-512/256"
    SHA3_224 = "SHA3-224"
    SHA3_256 = "SHA3-256"
    SHA3_384 = "SHA3-384"
    SHA3_512 = "SHA3-512"
    SHAKE_128 = "SHAKE-128"
    SHAKE_256 = "SHAKE-256"


# hashlib name, last arc of the NIST OID 2.16.840.1.101.3.4.2.x, XOF output length
_PREHASHES: Final = MappingProxyType(
    {
        PreHash.SHA2_256: ("sha256", 1, 0),
        PreHash.SHA2_384: ("sha384", 2, 0),
        PreHash.SHA2_512: ("sha512", 3, 0),
        PreHash.SHA2_224: ("sha224", 4, 0),
        PreHash.SHA2_512_224: ("sha512_224", 5, 0),
        PreHash.SHA2_512_256: ("sha512_256", 6, 0),
        PreHash.SHA3_224: ("sha3_224", 7, 0),
        PreHash.SHA3_256: ("sha3_256", 8, 0),
        PreHash.SHA3_384: ("sha3_384", 9, 0),
        PreHash.SHA3_512: ("sha3_512", 10, 0),
        PreHash.SHAKE_128: ("shake_128", 11, 32),
        PreHash.SHAKE_256: ("shake_256", 12, 64),
    }
)
_HASH_OID_PREFIX: Final = bytes.fromhex("06096086480165030402")


def public_key_of(algorithm: Algorithm, seed: bytes | bytearray) -> bytes:
    """The public key of a 32-byte seed (ML-DSA.KeyGen_internal's pk), in C. Takes a
    ``bytearray`` too, so managed custody can wipe the seed afterwards (no copy)."""
    return _BACKENDS[algorithm].from_seed(seed).public_key().public_bytes_raw()


def generate(algorithm: Algorithm, seed: bytes) -> tuple[bytes, bytes]:
    """(public key, expanded secret key) for a 32-byte seed, deterministic so a seed
    stored in managed custody always re-creates the same key pair. The expanded key
    is derived in numpy (no installed library exports it): 2-3x the public key alone."""
    public_key = public_key_of(algorithm, seed)
    return public_key, expand_secret_key(_BACKENDS[algorithm].params, seed, public_key)


def sign(algorithm: Algorithm, private_key: bytes, message: bytes, context: bytes) -> bytes:
    """Pure ML-DSA signature with a 32-byte seed (fast path) or an expanded secret key,
    so both custody formats can sign."""
    backend = _BACKENDS[algorithm]
    spec = SPECS[algorithm]
    if len(private_key) == spec.seed_size:
        return backend.from_seed(private_key).sign(message, context)
    if len(private_key) != spec.private_key_size:
        raise InvalidKeyFormat(
            f"{algorithm} private key must be a {spec.seed_size}-byte seed or a "
            f"{spec.private_key_size}-byte expanded key, got {len(private_key)} bytes",
            field="private_key",
            expected=[spec.seed_size, spec.private_key_size],
            length=len(private_key),
        )
    if len(context) > PQCRYPTO_MAX_CONTEXT_BYTES:
        raise InvalidInput(
            f"signing with an expanded {algorithm} key supports contexts up to "
            f"{PQCRYPTO_MAX_CONTEXT_BYTES} bytes; sign with the 32-byte seed for longer ones",
            field="context",
            max_length=PQCRYPTO_MAX_CONTEXT_BYTES,
            length=len(context),
        )
    try:
        signature: bytes = backend.expanded_key_module.sign(private_key, message, context)
    except ValueError:
        raise InvalidKeyFormat(
            f"{algorithm} expanded private key is not a valid FIPS 204 encoding", field="private_key"
        ) from None
    return signature


def verify(algorithm: Algorithm, public_key: bytes, message: bytes, signature: bytes, context: bytes) -> None:
    """Check a pure ML-DSA signature; raises InvalidSignature when it does not verify."""
    key = _BACKENDS[algorithm].from_public_bytes(public_key)
    try:
        key.verify(signature, message, context)
    except _LibraryInvalidSignature:
        raise InvalidSignature(f"{algorithm} signature does not verify", algorithm=str(algorithm)) from None


def verify_prehashed(
    algorithm: Algorithm,
    public_key: bytes,
    message: bytes,
    signature: bytes,
    context: bytes,
    prehash: PreHash,
) -> None:
    """Check a HashML-DSA signature (FIPS 204 Alg. 5) over ``message`` hashed with
    ``prehash``, for interop with signers that pre-hash; raises InvalidSignature."""
    key = _BACKENDS[algorithm].from_public_bytes(public_key)
    hash_name, oid_arc, xof_length = _PREHASHES[prehash]
    hasher = hashlib.new(hash_name, message)
    digest = hasher.digest(xof_length) if xof_length else hasher.digest()  # type: ignore[call-arg]  # typeshed: new() gives HASH, not HASHXOF
    tr = hashlib.shake_256(public_key).digest(64)
    encoded = b"\x01" + bytes((len(context),)) + context + _HASH_OID_PREFIX + bytes((oid_arc,)) + digest
    mu = hashlib.shake_256(tr + encoded).digest(64)
    try:
        key.verify_mu(signature, mu)
    except _LibraryInvalidSignature:
        raise InvalidSignature(
            f"{algorithm} pre-hashed ({prehash}) signature does not verify", algorithm=str(algorithm)
        ) from None
