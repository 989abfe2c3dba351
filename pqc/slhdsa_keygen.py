"""FIPS 205 SLH-DSA-{SHA2,SHAKE}-128s public root from given seeds (slh_keygen_internal).

``pqcrypto`` only generates keys from its own randomness, so deterministic key
generation (and the ACVP keyGen check) computes PK.root here: the top XMSS tree
of the hypertree, 2^9 WOTS+ leaves of 35 hash chains each (about 290,000 hash
calls, roughly 0.3-0.4 s in pure Python). Signing and verification stay in
``pqcrypto``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

_N: Final = 16  # security parameter n (bytes)
_TREE_HEIGHT: Final = 9  # h' = h / d
_TOP_LAYER: Final = 6  # d - 1
_CHAIN_STEPS: Final = 15  # w - 1
_CHAINS: Final = 35  # len = len1 (32) + len2 (3)
_HASH_ADDRESSES: Final = tuple(j.to_bytes(4, "big") for j in range(_CHAIN_STEPS))

# ADRS types (FIPS 205 section 4.2)
_WOTS_HASH: Final = 0
_WOTS_PK: Final = 1
_TREE: Final = 2
_WOTS_PRF: Final = 5

_Address = Callable[[int, int, int, int], bytes]
_TweakableHash = Callable[[bytes, bytes], bytes]


def _sha2_address(adrs_type: int, word1: int, word2: int, word3: int) -> bytes:
    """Compressed ADRS (22 bytes) for the top layer, tree address 0 (FIPS 205 section 11.2)."""
    return (
        bytes((_TOP_LAYER,))
        + bytes(8)
        + bytes((adrs_type,))
        + word1.to_bytes(4, "big")
        + word2.to_bytes(4, "big")
        + word3.to_bytes(4, "big")
    )


def _shake_address(adrs_type: int, word1: int, word2: int, word3: int) -> bytes:
    """Full 32-byte ADRS for the top layer, tree address 0."""
    return (
        _TOP_LAYER.to_bytes(4, "big")
        + bytes(12)
        + adrs_type.to_bytes(4, "big")
        + word1.to_bytes(4, "big")
        + word2.to_bytes(4, "big")
        + word3.to_bytes(4, "big")
    )


def _sha2_hash(pk_seed: bytes) -> _TweakableHash:
    """F, H, T_l and PRF for category 1 SHA2: SHA-256(PK.seed || pad || ADRSc || x)[:n]."""
    keyed = hashlib.sha256(pk_seed + bytes(64 - _N))

    def tweakable_hash(address: bytes, data: bytes) -> bytes:
        h = keyed.copy()
        h.update(address + data)
        return h.digest()[:_N]

    return tweakable_hash


def _shake_hash(pk_seed: bytes) -> _TweakableHash:
    """F, H, T_l and PRF for SHAKE: SHAKE256(PK.seed || ADRS || x, 8n)."""
    keyed = hashlib.shake_256(pk_seed)

    def tweakable_hash(address: bytes, data: bytes) -> bytes:
        h = keyed.copy()
        h.update(address + data)
        return h.digest(_N)

    return tweakable_hash


def _wots_public_key(address: _Address, thash: _TweakableHash, sk_seed: bytes, leaf: int) -> bytes:
    chain_ends = []
    for chain in range(_CHAINS):
        value = thash(address(_WOTS_PRF, leaf, chain, 0), sk_seed)
        prefix = address(_WOTS_HASH, leaf, chain, 0)[:-4]
        for step in _HASH_ADDRESSES:
            value = thash(prefix + step, value)
        chain_ends.append(value)
    return thash(address(_WOTS_PK, leaf, 0, 0), b"".join(chain_ends))


def public_root(shake: bool, sk_seed: bytes, pk_seed: bytes) -> bytes:
    """PK.root for SLH-DSA-SHAKE-128s (``shake``) or SLH-DSA-SHA2-128s, so a key pair
    can be re-created from its 48 bytes of seed material."""
    address = _shake_address if shake else _sha2_address
    thash = (_shake_hash if shake else _sha2_hash)(pk_seed)
    nodes = [_wots_public_key(address, thash, sk_seed, leaf) for leaf in range(1 << _TREE_HEIGHT)]
    for height in range(1, _TREE_HEIGHT + 1):
        nodes = [
            thash(address(_TREE, 0, height, index), nodes[2 * index] + nodes[2 * index + 1])
            for index in range(len(nodes) // 2)
        ]
    return nodes[0]
