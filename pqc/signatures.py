"""One interface over every post-quantum signature backend.

``generate_keypair``, ``sign``, ``verify`` and ``verify_prehashed`` accept an
``Algorithm`` or its API name, validate lengths and contexts once, then hand
over to the ML-DSA or SLH-DSA backend. Verification never returns a bool: it
returns None or raises (InvalidSignature / MalformedSignature / InvalidKeyFormat /
InvalidInput). All functions are synchronous and CPU-bound; the API runs them
off the event loop.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from pqc import mldsa, slhdsa
from pqc.algorithms import SPECS, Algorithm, Family, check_context, parse_algorithm
from pqc.errors import InvalidInput, InvalidKeyFormat, MalformedSignature, UnsupportedAlgorithm
from pqc.mldsa import PreHash


@dataclass(frozen=True, slots=True, repr=False)
class KeyPair:
    """A generated key pair. ``private_key`` is the FIPS 204/205 encoding (ML-DSA:
    expanded skEncode, or the 32-byte seed in the seed form; SLH-DSA:
    SK.seed||SK.prf||PK.seed||PK.root); ``seed`` re-creates it (ML-DSA: 32-byte xi;
    SLH-DSA: 48 bytes). Secrets are left out of ``repr``."""

    algorithm: Algorithm
    public_key: bytes
    private_key: bytes
    seed: bytes

    def __repr__(self) -> str:
        """Algorithm and public-key fingerprint only, so logging a KeyPair leaks nothing."""
        return f"KeyPair(algorithm={self.algorithm.value!r}, fingerprint={public_key_fingerprint(self.public_key)!r})"


def public_key_fingerprint(public_key: bytes) -> str:
    """SHA-256 of the public key as lowercase hex: a short, stable name for a key
    (attestation challenges, logs) that never reveals anything secret."""
    return hashlib.sha256(public_key).hexdigest()


def _require_length(value: bytes, expected: int, what: str, algorithm: Algorithm) -> None:
    if len(value) != expected:
        raise InvalidKeyFormat(
            f"{algorithm} {what.replace('_', ' ')} must be {expected} bytes, got {len(value)}",
            field=what,
            expected=expected,
            length=len(value),
        )


def _check_verify_inputs(algorithm: Algorithm, public_key: bytes, signature: bytes, context: bytes) -> None:
    spec = SPECS[algorithm]
    check_context(context)
    _require_length(public_key, spec.public_key_size, "public_key", algorithm)
    if len(signature) != spec.signature_size:
        raise MalformedSignature(
            f"{algorithm} signature must be {spec.signature_size} bytes, got {len(signature)}",
            field="signature",
            expected=spec.signature_size,
            length=len(signature),
        )


def generate_keypair(algorithm: Algorithm | str, seed: bytes | None = None, *, expanded: bool = True) -> KeyPair:
    """A new key pair, random or (with ``seed``) deterministic so custody can keep
    only the seed; ML-DSA seeds are 32 bytes, SLH-DSA seeds 48 bytes.

    ``expanded=False`` (ML-DSA only) makes ``private_key`` the 32-byte seed itself,
    the seed form of RFC 9881 that OpenSSL 3.5+, Go, BoringSSL and ``cryptography``
    take as the private key; it skips deriving the 2,560-4,896-byte FIPS 204 expanded
    key, which costs twice or three times the rest of key generation here."""
    alg = parse_algorithm(algorithm)
    spec = SPECS[alg]
    if seed is not None:
        _require_length(seed, spec.seed_size, "seed", alg)
    if spec.family is Family.ML_DSA:
        seed = secrets.token_bytes(spec.seed_size) if seed is None else seed
        if not expanded:
            return KeyPair(alg, mldsa.public_key_of(alg, seed), seed, seed)
        public_key, private_key = mldsa.generate(alg, seed)
    elif not expanded:
        raise InvalidInput(
            f"{alg} has one private key encoding (FIPS 205 SK); the seed form is for ML-DSA", field="expanded"
        )
    else:
        public_key, private_key, seed = slhdsa.generate(alg, seed)
    return KeyPair(alg, public_key, private_key, seed)


def sign(algorithm: Algorithm | str, private_key: bytes, message: bytes, context: bytes = b"") -> bytes:
    """A pure-mode signature over ``message`` with a FIPS 204/205 context string
    (0-255 bytes). ML-DSA takes the 32-byte seed or the expanded key."""
    alg = parse_algorithm(algorithm)
    check_context(context)
    if SPECS[alg].family is Family.ML_DSA:
        return mldsa.sign(alg, private_key, message, context)
    return slhdsa.sign(alg, private_key, message, context)


def verify(
    algorithm: Algorithm | str, public_key: bytes, message: bytes, signature: bytes, context: bytes = b""
) -> None:
    """Return None when ``signature`` is a valid pure-mode signature of ``message``
    under ``public_key`` and ``context``; raise otherwise (never a bool to forget)."""
    alg = parse_algorithm(algorithm)
    _check_verify_inputs(alg, public_key, signature, context)
    if SPECS[alg].family is Family.ML_DSA:
        mldsa.verify(alg, public_key, message, signature, context)
    else:
        slhdsa.verify(alg, public_key, message, signature, context)


def verify_prehashed(
    algorithm: Algorithm | str,
    public_key: bytes,
    message: bytes,
    signature: bytes,
    context: bytes = b"",
    *,
    prehash: PreHash,
) -> None:
    """Like ``verify`` for HashML-DSA signatures (the signer hashed ``message`` with
    ``prehash`` first); ML-DSA only."""
    alg = parse_algorithm(algorithm)
    if SPECS[alg].family is not Family.ML_DSA:
        raise UnsupportedAlgorithm(f"pre-hashed verification is only offered for ML-DSA, not {alg}", algorithm=str(alg))
    _check_verify_inputs(alg, public_key, signature, context)
    mldsa.verify_prehashed(alg, public_key, message, signature, context, prehash)
