"""FIPS 204 expanded ML-DSA secret key (skEncode) from the 32-byte seed.

No installed fast library exports the expanded key that matches a seed
(``cryptography`` only exports the seed, ``pqcrypto`` cannot take one), so the
part of ML-KeyGen_internal (FIPS 204 Algorithm 6) that the secret key needs is
computed here: rho, K, tr, s1, s2 and t0 = low bits of A*s1 + s2.

Pure Python, a few milliseconds per key. Checked byte for byte against the NIST
ACVP keyGen vectors (tests/pqc/test_conformance_acvp.py). The NTT is written in
constant geometry (every layer pairs x[i] with x[i+128] and writes 2i, 2i+1) so
each layer is a handful of C-level list operations; coefficients are reduced
only at the end (Python integers do not overflow).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from operator import add, mul, sub
from types import MappingProxyType
from typing import Final

_Q: Final = 8380417
_ZETA: Final = 1753
_N: Final = 256
_HALF: Final = 128
_D: Final = 13
_T0_OFFSET: Final = 1 << (_D - 1)
_T0_MASK: Final = (1 << _D) - 1
_N_INV: Final = pow(_N, -1, _Q)


@dataclass(frozen=True, slots=True)
class LatticeParams:
    """ML-DSA matrix dimensions (k rows, l columns) and secret bound eta."""

    k: int
    l: int  # noqa: E741 - FIPS 204 name
    eta: int


def _bit_reverse8(x: int) -> int:
    return int(f"{x:08b}"[::-1], 2)


def _rotate_right8(x: int, r: int) -> int:
    return ((x >> r) | (x << (8 - r))) & 0xFF


def _centered(x: int) -> int:
    return x - _Q if x > _Q // 2 else x


def _layer_twiddles(exponent_sign: int) -> tuple[tuple[int, ...], ...]:
    """Per-layer twiddles in constant-geometry order (layer 0 = FIPS len 128)."""
    layers = []
    for layer in range(8):
        row = []
        for i in range(_HALF):
            logical = _rotate_right8(i, layer)
            m = (1 << layer) + (logical >> (8 - layer))
            row.append(_centered(pow(_ZETA, exponent_sign * _bit_reverse8(m), _Q)))
        layers.append(tuple(row))
    return tuple(layers)


_FORWARD: Final = _layer_twiddles(1)
_INVERSE: Final = _layer_twiddles(-1)[::-1]
_LOW_NIBBLE: Final = bytes(b & 0x0F for b in range(256))
_HIGH_NIBBLE: Final = bytes(b >> 4 for b in range(256))
_MOD5: Final = bytes(b % 5 for b in range(256))
_ABOVE_8: Final = bytes(range(9, 16))
_CLEAR_BIT23: Final = bytes(b & 0x7F for b in range(256))
_BITS: Final = MappingProxyType({w: tuple(format(v, f"0{w}b") for v in range(1 << w)) for w in (3, 4, _D)})


def _ntt(coefficients: list[int]) -> list[int]:
    x = coefficients
    for twiddles in _FORWARD:
        low = x[:_HALF]
        t = list(map(mul, x[_HALF:], twiddles))
        x = [0] * _N
        x[0::2] = map(add, low, t)
        x[1::2] = map(sub, low, t)
    return [v % _Q for v in x]


def _inverse_ntt_unscaled(values: list[int]) -> list[int]:
    x = values
    for twiddles in _INVERSE:
        a, b = x[0::2], x[1::2]
        x = list(map(add, a, b))
        x += map(mul, map(sub, a, b), twiddles)
    return x


def _sample_ntt_poly(seed: bytes) -> list[int]:
    """RejNTTPoly (FIPS 204 Alg. 30): 23-bit little-endian candidates below q."""
    candidates = 280
    while True:
        stream = hashlib.shake_128(seed).digest(3 * candidates)
        lanes = bytearray(4 * candidates)
        lanes[0::4] = stream[0::3]
        lanes[1::4] = stream[1::3]
        lanes[2::4] = stream[2::3].translate(_CLEAR_BIT23)
        values = memoryview(lanes).cast("I").tolist()
        if max(values[:_N]) >= _Q:
            values = [v for v in values if v < _Q]
        if len(values) >= _N:
            return values[:_N]
        candidates *= 2


def _sample_bounded_packed(seed: bytes, eta: int) -> bytes:
    """RejBoundedPoly (FIPS 204 Alg. 31), returned as eta - s_i (the BitPack value)."""
    length = 136
    while True:
        stream = hashlib.shake_256(seed).digest(length)
        nibbles = bytearray(2 * length)
        nibbles[0::2] = stream.translate(_LOW_NIBBLE)
        nibbles[1::2] = stream.translate(_HIGH_NIBBLE)
        accepted = nibbles.translate(_MOD5, b"\x0f") if eta == 2 else nibbles.translate(None, _ABOVE_8)
        if len(accepted) >= _N:
            return bytes(accepted[:_N])
        length *= 2


def _bit_pack(values: bytes | list[int], width: int) -> bytes:
    table = _BITS[width]
    bits = "".join([table[v] for v in reversed(values)])
    return int(bits, 2).to_bytes(_N * width // 8, "little")


def expand_secret_key(params: LatticeParams, seed: bytes, public_key: bytes) -> bytes:
    """The FIPS 204 expanded secret key for ``seed`` so keys interoperate with any
    FIPS 204 implementation; ``public_key`` must be the one derived from the seed."""
    digest = hashlib.shake_256(seed + bytes((params.k, params.l))).digest(128)
    rho, rho_prime, key = digest[:32], digest[32:96], digest[96:]
    eta = params.eta
    packed = [_sample_bounded_packed(rho_prime + r.to_bytes(2, "little"), eta) for r in range(params.l + params.k)]
    s1_hat = [_ntt([eta - v for v in packed[j]]) for j in range(params.l)]
    parts = [rho, key, hashlib.shake_256(public_key).digest(64)]
    parts += [_bit_pack(p, 3 if eta == 2 else 4) for p in packed]
    for i in range(params.k):
        acc = list(map(mul, _sample_ntt_poly(rho + bytes((0, i))), s1_hat[0]))
        for j in range(1, params.l):
            acc = list(map(add, acc, map(mul, _sample_ntt_poly(rho + bytes((j, i))), s1_hat[j])))
        t = _inverse_ntt_unscaled(acc)
        s2 = packed[params.l + i]
        t0_packed = [(_T0_OFFSET - (x * _N_INV + eta - p) % _Q) & _T0_MASK for x, p in zip(t, s2, strict=True)]
        parts.append(_bit_pack(t0_packed, _D))
    return b"".join(parts)
