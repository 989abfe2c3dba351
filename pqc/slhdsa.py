"""SLH-DSA-128s (FIPS 205) backend, SHA2 and SHAKE variants, through ``pqcrypto``.

``pqcrypto`` signs (~0.4 s SHA2, ~1.3-2 s SHAKE), verifies (~0.4 / 1-2 ms) and makes
random keys (~50 / 160 ms). Key generation from given seeds computes PK.root in
``pqc.slhdsa_keygen``. Private key = SK.seed || SK.prf || PK.seed || PK.root
(64 bytes); the "seed" is its first 48 bytes. Callers go through
``pqc.signatures``, which dispatches by family and validates lengths and
contexts first.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import Final

from pqcrypto import InvalidSignatureError
from pqcrypto.sign import slh_dsa_sha2_128s, slh_dsa_shake_128s

from pqc.algorithms import SPECS, Algorithm
from pqc.errors import InvalidKeyFormat, InvalidSignature
from pqc.slhdsa_keygen import public_root

_N: Final = 16
_MODULES: Final[Mapping[Algorithm, ModuleType]] = MappingProxyType(
    {
        Algorithm.SLH_DSA_SHA2_128S: slh_dsa_sha2_128s,
        Algorithm.SLH_DSA_SHAKE_128S: slh_dsa_shake_128s,
    }
)


def generate(algorithm: Algorithm, seed: bytes | None) -> tuple[bytes, bytes, bytes]:
    """(public key, private key, seed): random through pqcrypto, or deterministic from
    a 48-byte SK.seed || SK.prf || PK.seed so a key can be re-created."""
    if seed is None:
        public_key, private_key = _MODULES[algorithm].keygen()
        return public_key, private_key, private_key[: 3 * _N]
    sk_seed, pk_seed = seed[:_N], seed[2 * _N :]
    root = public_root(algorithm is Algorithm.SLH_DSA_SHAKE_128S, sk_seed, pk_seed)
    return pk_seed + root, seed + root, seed


def sign(algorithm: Algorithm, private_key: bytes, message: bytes, context: bytes) -> bytes:
    """Pure SLH-DSA signature (randomized by pqcrypto) with the 64-byte private key."""
    module = _MODULES[algorithm]
    size = SPECS[algorithm].private_key_size
    if len(private_key) != size:
        raise InvalidKeyFormat(
            f"{algorithm} private key must be {size} bytes, got {len(private_key)}",
            field="private_key",
            expected=size,
            length=len(private_key),
        )
    signature: bytes = module.sign(private_key, message, context)
    return signature


def verify(algorithm: Algorithm, public_key: bytes, message: bytes, signature: bytes, context: bytes) -> None:
    """Check a pure SLH-DSA signature; raises InvalidSignature when it does not verify."""
    try:
        _MODULES[algorithm].verify(public_key, message, signature, context)
    except InvalidSignatureError:
        raise InvalidSignature(f"{algorithm} signature does not verify", algorithm=str(algorithm)) from None
