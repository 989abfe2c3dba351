"""Bech32 (BIP-173) and bech32m (BIP-350), and the segwit address format built on them.

Used by Bitcoin witness addresses (``bc1``/``tb1``) and Cosmos accounts (``cosmos1``).
Every failure raises ``Bech32Error`` with the reason, so callers can pass it on to users.
"""

from __future__ import annotations

import enum
import functools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_TO_CHARSET = bytes.maketrans(bytes(range(32)), CHARSET.encode("ascii"))  # 5-bit word -> its character
_CHARSET_INDEX = {c: i for i, c in enumerate(CHARSET)}
_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
_CHECKSUM_LENGTH = 6

#: BIP-173's limit on the whole string; Bitcoin and Cosmos account addresses stay below it.
MAX_LENGTH = 90


class Bech32Error(ValueError):
    """A string is not valid bech32/bech32m, or not a valid segwit address."""


class Encoding(enum.Enum):
    """The two checksum variants; the value is the constant the checksum must come to."""

    BECH32 = 1
    BECH32M = 0x2BC830A3


@dataclass(frozen=True, slots=True)
class Bech32Data:
    """A decoded bech32/bech32m string: lowercase HRP, 5-bit data words (no checksum), variant."""

    hrp: str
    data: tuple[int, ...]
    encoding: Encoding


def _generator_sums() -> tuple[int, ...]:
    """For each 5-bit value of the checksum's top bits, the XOR of the generator terms its
    set bits select: one lookup per character instead of five tests (BIP-173's loop)."""
    return tuple(
        functools.reduce(operator.xor, (gen for i, gen in enumerate(_GENERATOR) if (top >> i) & 1), 0)
        for top in range(32)
    )


_GENERATOR_SUMS = _generator_sums()


def _polymod(values: Iterable[int]) -> int:
    chk = 1
    sums = _GENERATOR_SUMS
    for value in values:
        chk = ((chk & 0x1FFFFFF) << 5 ^ value) ^ sums[chk >> 25]
    return chk


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


@functools.lru_cache(maxsize=64)
def _encoding_hrp(hrp: str) -> tuple[int, ...]:
    """``hrp`` checked for encoding (non-empty lowercase printable ASCII) and expanded; a
    handful of prefixes are encoded again and again (a wallet scan derives thousands)."""
    if not hrp or any(not 33 <= ord(c) <= 126 for c in hrp) or hrp != hrp.lower():
        raise Bech32Error(f"human-readable part {hrp!r} must be non-empty lowercase printable ASCII")
    return tuple(_hrp_expand(hrp))


def decode(text: str, max_length: int = MAX_LENGTH) -> Bech32Data:
    """Decode and checksum-verify a bech32 or bech32m string (either case, never mixed case)."""
    if len(text) > max_length:
        raise Bech32Error(f"bech32 string is {len(text)} characters, over the limit of {max_length}")
    for pos, c in enumerate(text):
        if not 33 <= ord(c) <= 126:
            raise Bech32Error(f"character {c!r} at position {pos} is outside the printable ASCII range")
    if text.lower() != text and text.upper() != text:
        raise Bech32Error("bech32 string mixes upper and lower case")
    text = text.lower()
    sep = text.rfind("1")
    if sep < 0:
        raise Bech32Error("bech32 string has no separator '1'")
    if sep == 0:
        raise Bech32Error("bech32 string has an empty human-readable part")
    if len(text) - sep - 1 < _CHECKSUM_LENGTH:
        raise Bech32Error("bech32 data part is shorter than its 6-character checksum")
    hrp = text[:sep]
    data = []
    for pos, c in enumerate(text[sep + 1 :], start=sep + 1):
        word = _CHARSET_INDEX.get(c)
        if word is None:
            raise Bech32Error(f"character {c!r} at position {pos} is not in the bech32 data alphabet")
        data.append(word)
    const = _polymod(_hrp_expand(hrp) + data)
    for encoding in Encoding:
        if const == encoding.value:
            return Bech32Data(hrp, tuple(data[:-_CHECKSUM_LENGTH]), encoding)
    raise Bech32Error("bad bech32/bech32m checksum")


def encode(hrp: str, data: Sequence[int], encoding: Encoding) -> str:
    """Encode a lowercase HRP and 5-bit data words with the chosen checksum variant."""
    expanded = _encoding_hrp(hrp)
    if data and (min(data) < 0 or max(data) > 31):
        raise Bech32Error("bech32 data words must be 5-bit values")
    values = [*expanded, *data]
    polymod = _polymod(values + [0] * _CHECKSUM_LENGTH) ^ encoding.value
    checksum = [(polymod >> 5 * (5 - i)) & 31 for i in range(_CHECKSUM_LENGTH)]
    text = hrp + "1" + bytes([*data, *checksum]).translate(_TO_CHARSET).decode("ascii")
    if len(text) > MAX_LENGTH:
        raise Bech32Error(f"encoded string would be {len(text)} characters, over the limit of {MAX_LENGTH}")
    return text


def _bytes_to_words(data: bytes) -> list[int]:
    """``convertbits(data, 8, 5, pad=True)`` of whole bytes in one big-integer pass (the
    encoder's case: about 10x the bit loop on a 20-byte program)."""
    bits = 8 * len(data)
    padding = -bits % 5
    value = int.from_bytes(data, "big") << padding
    return [(value >> shift) & 31 for shift in range(bits + padding - 5, -1, -5)]


def convertbits(data: Iterable[int], frombits: int, tobits: int, pad: bool) -> list[int]:
    """Regroup a bit stream from ``frombits``- to ``tobits``-wide words (BIP-173's padding rules)."""
    if isinstance(data, bytes) and (frombits, tobits, pad) == (8, 5, True):
        return _bytes_to_words(data)
    acc = bits = 0
    out = []
    maxv = (1 << tobits) - 1
    for value in data:
        if value >> frombits:
            raise Bech32Error(f"value {value} does not fit in {frombits} bits")
        acc = (acc << frombits) | value
        bits += frombits
        while bits >= tobits:
            bits -= tobits
            out.append((acc >> bits) & maxv)
    if pad:
        if bits:
            out.append((acc << (tobits - bits)) & maxv)
    elif bits >= frombits:
        raise Bech32Error("more than 4 bits of padding in the 5-to-8 bit conversion")
    elif (acc << (tobits - bits)) & maxv:
        raise Bech32Error("non-zero padding bits in the 5-to-8 bit conversion")
    return out


def decode_bytes(text: str, encoding: Encoding) -> tuple[str, bytes]:
    """Decode a bech32 string that carries plain bytes (no witness version), e.g. a Cosmos address."""
    decoded = decode(text)
    if decoded.encoding is not encoding:
        raise Bech32Error(f"{encoding.name.lower()} checksum required, got {decoded.encoding.name.lower()}")
    return decoded.hrp, bytes(convertbits(decoded.data, 5, 8, pad=False))


def encode_bytes(hrp: str, payload: bytes, encoding: Encoding) -> str:
    """Encode plain bytes under an HRP (the inverse of ``decode_bytes``)."""
    return encode(hrp, convertbits(payload, 8, 5, pad=True), encoding)


@dataclass(frozen=True, slots=True)
class WitnessProgram:
    """A segwit output's witness version (0-16) and program (2-40 bytes)."""

    version: int
    program: bytes

    def __post_init__(self) -> None:
        if not 0 <= self.version <= 16:
            raise Bech32Error(f"witness version {self.version} is out of range 0-16")
        if not 2 <= len(self.program) <= 40:
            raise Bech32Error(f"witness program is {len(self.program)} bytes; 2 to 40 allowed")
        if self.version == 0 and len(self.program) not in (20, 32):
            raise Bech32Error(f"witness v0 program is {len(self.program)} bytes; v0 allows only 20 or 32")

    @property
    def encoding(self) -> Encoding:
        """The checksum variant BIP-350 requires: bech32 for v0, bech32m for v1 and above."""
        return Encoding.BECH32 if self.version == 0 else Encoding.BECH32M


def decode_segwit(text: str) -> tuple[str, WitnessProgram]:
    """Decode a segwit address (any HRP) into its lowercase HRP and witness program."""
    decoded = decode(text)
    if not decoded.data:
        raise Bech32Error("segwit address has an empty data part (no witness version)")
    version = decoded.data[0]
    program = WitnessProgram(version, bytes(convertbits(decoded.data[1:], 5, 8, pad=False)))
    if decoded.encoding is not program.encoding:
        raise Bech32Error(
            f"{program.encoding.name.lower()} checksum required for witness v{version}, "
            f"got {decoded.encoding.name.lower()}"
        )
    return decoded.hrp, program


def encode_segwit(hrp: str, witness: WitnessProgram) -> str:
    """Encode a witness program as a segwit address under ``hrp`` (lowercase, canonical)."""
    return encode(hrp, [witness.version, *convertbits(witness.program, 8, 5, pad=True)], witness.encoding)
