"""Supported post-quantum signature algorithms, their names and their byte sizes.

Sizes (bytes):

| algorithm           | public key | private key (FIPS encoding) | seed | signature |
|---------------------|-----------:|----------------------------:|-----:|----------:|
| ml-dsa-44           |      1,312 |  2,560 (expanded skEncode)  |   32 |     2,420 |
| ml-dsa-65           |      1,952 |  4,032                      |   32 |     3,309 |
| ml-dsa-87           |      2,592 |  4,896                      |   32 |     4,627 |
| slh-dsa-sha2-128s   |         32 |     64                      |   48 |     7,856 |
| slh-dsa-shake-128s  |         32 |     64                      |   48 |     7,856 |

The spec's ``slh-dsa-128s`` means ``slh-dsa-sha2-128s`` (see docs/crypto.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from pqc.errors import InvalidInput, UnsupportedAlgorithm

#: FIPS 204 / FIPS 205 context strings are at most this many bytes.
MAX_CONTEXT_BYTES: Final = 255


class Algorithm(StrEnum):
    """Canonical algorithm names (the values are what the API accepts and returns)."""

    ML_DSA_44 = "ml-dsa-44"
    ML_DSA_65 = "ml-dsa-65"
    ML_DSA_87 = "ml-dsa-87"
    SLH_DSA_SHA2_128S = "slh-dsa-sha2-128s"
    SLH_DSA_SHAKE_128S = "slh-dsa-shake-128s"


class Family(StrEnum):
    """The standard an algorithm belongs to; decides which backend handles it."""

    ML_DSA = "ml-dsa"
    SLH_DSA = "slh-dsa"


@dataclass(frozen=True, slots=True)
class AlgorithmSpec:
    """Family and encoded sizes (bytes) of one algorithm."""

    family: Family
    public_key_size: int
    private_key_size: int
    seed_size: int
    signature_size: int


SPECS: Final = MappingProxyType(
    {
        Algorithm.ML_DSA_44: AlgorithmSpec(Family.ML_DSA, 1312, 2560, 32, 2420),
        Algorithm.ML_DSA_65: AlgorithmSpec(Family.ML_DSA, 1952, 4032, 32, 3309),
        Algorithm.ML_DSA_87: AlgorithmSpec(Family.ML_DSA, 2592, 4896, 32, 4627),
        Algorithm.SLH_DSA_SHA2_128S: AlgorithmSpec(Family.SLH_DSA, 32, 64, 48, 7856),
        Algorithm.SLH_DSA_SHAKE_128S: AlgorithmSpec(Family.SLH_DSA, 32, 64, 48, 7856),
    }
)

_ALIASES: Final = MappingProxyType({"slh-dsa-128s": Algorithm.SLH_DSA_SHA2_128S})


def parse_algorithm(name: str) -> Algorithm:
    """The Algorithm for an API name (case-insensitive, spec aliases included), so
    callers never branch on raw strings; raises UnsupportedAlgorithm otherwise."""
    lowered = name.lower()
    alias = _ALIASES.get(lowered)
    if alias is not None:
        return alias
    try:
        return Algorithm(lowered)
    except ValueError:
        raise UnsupportedAlgorithm(
            f"unsupported algorithm {name[:40]!r}",
            algorithm=name[:40],
            supported=sorted([*Algorithm, *_ALIASES]),
        ) from None


def check_context(context: bytes) -> None:
    """Reject a FIPS 204/205 context string longer than 255 bytes before any backend sees it."""
    if len(context) > MAX_CONTEXT_BYTES:
        raise InvalidInput(
            f"context must be at most {MAX_CONTEXT_BYTES} bytes, got {len(context)}",
            field="context",
            max_length=MAX_CONTEXT_BYTES,
            length=len(context),
        )
