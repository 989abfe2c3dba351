"""FIPS 204 expanded ML-DSA secret key (skEncode) from the 32-byte seed.

No installed fast library exports the expanded key that matches a seed
(``cryptography`` only exports the seed, ``pqcrypto`` cannot take one), so the
part of ML-KeyGen_internal (FIPS 204 Algorithm 6) that the secret key needs is
computed here: rho, K, tr, s1, s2 and t0 = low bits of A*s1 + s2.

Vectorised with numpy over all polynomials at once, checked byte for byte
against the NIST ACVP keyGen vectors (tests/pqc/test_conformance_acvp.py).
SHAKE output (ExpandA, ExpandS, tr; hashlib, in C) is a quarter to two fifths
of the time; the rest is about fifty numpy calls on arrays of a few thousand
values, whose cost is mostly per call, so it grows slowly with k and l.

The NTT and its inverse are 256x256 linear maps mod q. Each is split into two
rounds of 16-point products (256 = 16 * 16, Cooley-Tukey), run as float64
matrix products: every partial sum stays below 2^53, so they are exact, and
values are brought back below q (centred, not canonical) between rounds. The
bit-reversed coefficient order of FIPS 204 is folded into the factor matrices.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

_Q: Final = 8380417
_ZETA: Final = 1753
_N: Final = 256
_RADIX: Final = 16
_D: Final = 13
_T0_OFFSET: Final = 1 << (_D - 1)
_T0_MASK: Final = (1 << _D) - 1
_A_CANDIDATES: Final = 280  # 840 SHAKE128 bytes = 5 blocks; 256 of them are below q with overwhelming probability
_S_BYTES: Final = 272  # 2 SHAKE256 blocks = 544 half-bytes; 256 accepted with overwhelming probability
_REJECTED: Final = 0xFF
_REJECTED_BYTE: Final = bytes((_REJECTED,))

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Words = npt.NDArray[np.uint32]
Bytes = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class LatticeParams:
    """ML-DSA matrix dimensions (k rows, l columns) and secret bound eta."""

    k: int
    l: int  # noqa: E741  # FIPS 204's name for the parameter
    eta: int


def _bit_reverse4(x: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    return ((x & 1) << 3) | ((x & 2) << 1) | ((x & 4) >> 1) | ((x & 8) >> 3)


def _zeta_power(exponent: Ints, scale: int = 1) -> Floats:
    """scale * zeta^exponent mod q, centred in (-q/2, q/2) so products stay small."""
    table = np.array([scale * pow(_ZETA, e, _Q) % _Q for e in range(2 * _N)], dtype=np.int64)
    centred = np.where(table > _Q // 2, table - _Q, table)
    power = centred[exponent % (2 * _N)].astype(np.float64)
    power.flags.writeable = False
    return power


def _ntt_factors() -> tuple[Floats, Floats]:
    """Forward NTT: w_hat[16c + d] = sum_j w_j zeta^((2 brv8(16c + d) + 1) j) with
    j = 16a + b and brv8(16c + d) = 16 brv4(d) + brv4(c), so the exponent is
    (2 brv4(c) + 1)(16a + b) + 32 brv4(d) b (mod 512): round one sums over a for
    each (b, c), round two over b for each (c, d). Shapes [b, a, c] and [b, d]."""
    a = np.arange(_RADIX)[None, :, None]
    b = np.arange(_RADIX)[:, None, None]
    c = _bit_reverse4(np.arange(_RADIX))[None, None, :]
    first = _zeta_power((2 * c + 1) * (_RADIX * a + b))
    d = _bit_reverse4(np.arange(_RADIX))[None, :]
    second = _zeta_power(2 * _RADIX * d * b[:, :, 0])
    return first, second


def _inverse_ntt_factors() -> tuple[Floats, Floats]:
    """Inverse NTT: w[c + 16d] = 256^-1 sum_i w_hat[i] zeta^-((2 brv8(i) + 1)(c + 16d))
    with i = 16a + b and brv8(i) = 16 brv4(b) + brv4(a), so the exponent is
    -(32 brv4(b) + 2 brv4(a) + 1) c - 16 (2 brv4(a) + 1) d (mod 512): round one
    sums over b for each (a, c), round two over a for each (c, d), with the 1/256
    folded in. Shapes [a, b, c] and [a, d]."""
    a = _bit_reverse4(np.arange(_RADIX))[:, None, None]
    b = _bit_reverse4(np.arange(_RADIX))[None, :, None]
    c = np.arange(_RADIX)[None, None, :]
    first = _zeta_power(-(2 * _RADIX * b + 2 * a + 1) * c)
    d = np.arange(_RADIX)[None, :]
    second = _zeta_power(-_RADIX * (2 * a[:, :, 0] + 1) * d, scale=pow(_N, -1, _Q))
    return first, second


_NTT_FIRST, _NTT_SECOND = _ntt_factors()
_INTT_FIRST, _INTT_SECOND = _inverse_ntt_factors()


def _reduce(x: Floats) -> Floats:
    """x mod q as an exact float in [-q/2 - 1, q/2 + 1], for integer-valued |x| < 2^52."""
    multiple = x * (1.0 / _Q)
    np.rint(multiple, out=multiple)
    multiple *= _Q
    return np.subtract(x, multiple, out=multiple)


def _secret_ntt(packed: Bytes, eta: int) -> Floats:
    """NTT of each secret polynomial s = eta - packed, centred mod q, FIPS 204 order."""
    rows = len(packed)
    by_b = packed.reshape(rows, _RADIX, _RADIX).transpose(2, 0, 1)  # [b, row, a]
    secret = np.subtract(eta, by_b, dtype=np.float64, order="C")
    half = _reduce(secret @ _NTT_FIRST)  # [b, row, c], |sums| < 2^29 before reducing
    return _reduce(half.reshape(_RADIX, -1).T @ _NTT_SECOND).reshape(rows, _N)  # sums < 2^49


def _inverse_ntt(polys: Floats) -> Floats:
    """Inverse NTT of each row of ``polys`` (|values| < q): exact integers below 2^49
    in absolute value, congruent mod q to the result, natural order."""
    rows = len(polys)
    by_a = polys.reshape(rows, _RADIX, _RADIX).transpose(1, 0, 2)  # [a, row, b]
    half = _reduce(by_a @ _INTT_FIRST)  # [a, row, c], sums < 2^49
    spread = half.reshape(_RADIX, -1).T @ _INTT_SECOND  # [(row, c), d], sums < 2^49
    return spread.reshape(rows, _RADIX, _RADIX).transpose(0, 2, 1).reshape(rows, _N)


def _first_below_q(values: Words) -> Words | None:
    """The first 256 values below q of each row, in stream order, or None if a row has fewer."""
    accepted = values < _Q
    first = values[accepted & (np.cumsum(accepted, axis=1) <= _N)]
    return first.reshape(len(values), _N) if first.size == len(values) * _N else None


class _Xof(Protocol):
    def digest(self, length: int, /) -> bytes: ...


def _squeeze(xof: Callable[[bytes], _Xof], seeds: list[bytes], length: int) -> bytes:
    """``length`` output bytes of ``xof`` for each seed, concatenated."""
    return b"".join([xof(seed).digest(length) for seed in seeds])


def _expand_a(rho: bytes, params: LatticeParams) -> Words:
    """ExpandA (FIPS 204 Alg. 32 with RejNTTPoly, Alg. 30): A_hat transposed, as
    [l, k, 256] in [0, q). Candidates are 23-bit little-endian triples, read as
    unaligned 32-bit words (a zero byte pads the last one)."""
    seeds = [rho + bytes((j, i)) for j in range(params.l) for i in range(params.k)]
    candidates = _A_CANDIDATES
    while True:
        stream = _squeeze(hashlib.shake_128, seeds, 3 * candidates) + b"\0"
        words: Words = np.ndarray((len(seeds), candidates), "<u4", stream, strides=(3 * candidates, 3))
        matrix = _first_below_q(words & np.uint32(0x7FFFFF))
        if matrix is not None:
            return matrix.reshape(params.l, params.k, _N)
        candidates *= 2


def _half_byte_table(eta: int, shift: int) -> bytes:
    """byte -> its low (shift 0) or high (shift 4) half-byte as the BitPack value
    eta - s (CoeffFromHalfByte, FIPS 204 Alg. 15), or _REJECTED."""
    half_bytes = [(z >> shift) & 0x0F for z in range(256)]
    if eta == 2:
        return bytes(h % 5 if h < 15 else _REJECTED for h in half_bytes)
    return bytes(h if h < 9 else _REJECTED for h in half_bytes)


_HALF_BYTES: Final = MappingProxyType({eta: (_half_byte_table(eta, 0), _half_byte_table(eta, 4)) for eta in (2, 4)})


def _expand_s(rho_prime: bytes, params: LatticeParams) -> Bytes:
    """ExpandS (FIPS 204 Alg. 33 with RejBoundedPoly, Alg. 31): s1 then s2 as
    [l + k, 256] BitPack values eta - s, in [0, 2 eta]. Half-bytes are mapped and
    rejected with bytes.translate, which beats numpy masking at this size."""
    seeds = [rho_prime + r.to_bytes(2, "little") for r in range(params.l + params.k)]
    low, high = _HALF_BYTES[params.eta]
    length = _S_BYTES
    while True:
        stream = _squeeze(hashlib.shake_256, seeds, length)
        half_bytes = bytearray(2 * len(stream))
        half_bytes[0::2] = stream.translate(low)
        half_bytes[1::2] = stream.translate(high)
        starts = range(0, len(half_bytes), 2 * length)
        rows = [half_bytes[r : r + 2 * length].translate(None, _REJECTED_BYTE)[:_N] for r in starts]
        if min(map(len, rows)) == _N:
            return np.frombuffer(b"".join(rows), np.uint8).reshape(len(seeds), _N)
        length *= 2


def _lane_weights(width: int) -> Floats:
    """2^(width i) for the values summed into one lane: 8 if they fit in 52 bits, else 4."""
    weights = np.ldexp(1.0, width * np.arange(8 if 8 * width <= 52 else 4))
    weights.flags.writeable = False
    return weights


_LANE_WEIGHTS: Final = MappingProxyType({width: _lane_weights(width) for width in (3, 4, _D)})


def _bit_pack(values: npt.NDArray[np.integer[Any]], width: int) -> bytes:
    """SimpleBitPack (FIPS 204 Alg. 16) of every value in row order, width 3, 4 or 13:
    each 8 values make ``width`` bytes. Values are summed into lanes of at most 52
    bits as exact floats; for width 13 two lanes are joined into a 128-bit word."""
    weights = _LANE_WEIGHTS[width]
    lanes = (values.reshape(-1, len(weights)) @ weights).astype("<u8")
    if len(weights) == 4:
        lanes = lanes.reshape(-1, 2)
        shift = np.uint64(4 * width)
        lanes[:, 0] |= lanes[:, 1] << shift
        lanes[:, 1] >>= np.uint64(64) - shift
    return lanes.view(np.uint8).reshape(-1, 64 // len(weights))[:, :width].tobytes()  # 8 or 16 bytes a group


def _t0_packed(a_hat: Words, s1: Bytes, s2: Bytes, eta: int) -> Ints:
    """2^12 - t0 for t = NTT^-1(A_hat * NTT(s1)) + s2 (Power2Round, BitPack of t0),
    from s1, s2 given as BitPack values eta - s."""
    s1_hat = _secret_ntt(s1, eta)
    product = _reduce((a_hat * s1_hat[:, None, :]).sum(axis=0))  # sums over j < 2^49
    t = (_inverse_ntt(product) - s2).astype(np.int64) + eta
    return (_T0_OFFSET - t % _Q) & _T0_MASK


def expand_secret_key(params: LatticeParams, seed: bytes, public_key: bytes) -> bytes:
    """The FIPS 204 expanded secret key for ``seed`` so keys interoperate with any
    FIPS 204 implementation; ``public_key`` must be the one derived from the seed."""
    digest = hashlib.shake_256(seed + bytes((params.k, params.l))).digest(128)
    rho, rho_prime, key = digest[:32], digest[32:96], digest[96:]
    packed = _expand_s(rho_prime, params)
    s1, s2 = packed[: params.l], packed[params.l :]
    t0 = _t0_packed(_expand_a(rho, params), s1, s2, params.eta)
    tr = hashlib.shake_256(public_key).digest(64)
    return b"".join((rho, key, tr, _bit_pack(packed, 3 if params.eta == 2 else 4), _bit_pack(t0, _D)))
