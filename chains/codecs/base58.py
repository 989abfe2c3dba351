"""Base58 and base58check (Bitcoin's alphabet), shared by Bitcoin, Tron and Solana addresses."""

from __future__ import annotations

from pqc.hashes import sha256d

ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_INDEX = {c: i for i, c in enumerate(ALPHABET)}


class Base58Error(ValueError):
    """A string is not base58, or its base58check checksum does not match."""


def b58encode(data: bytes) -> str:
    """Encode bytes as base58, one leading ``1`` per leading zero byte."""
    zeros = len(data) - len(data.lstrip(b"\0"))
    n = int.from_bytes(data, "big")
    digits = []
    while n:
        n, r = divmod(n, 58)
        digits.append(ALPHABET[r])
    return "1" * zeros + "".join(reversed(digits))


def b58decode(text: str) -> bytes:
    """Decode base58 text; raise ``Base58Error`` naming the first character outside the alphabet."""
    n = 0
    for pos, c in enumerate(text):
        digit = _INDEX.get(c)
        if digit is None:
            raise Base58Error(f"character {c!r} at position {pos} is not in the base58 alphabet")
        n = n * 58 + digit
    zeros = len(text) - len(text.lstrip("1"))
    return b"\0" * zeros + n.to_bytes((n.bit_length() + 7) // 8, "big")


def b58check_encode(payload: bytes) -> str:
    """Base58 with a 4-byte double-SHA-256 checksum appended."""
    return b58encode(payload + sha256d(payload)[:4])


def b58check_decode(text: str) -> bytes:
    """Decode base58check text to its payload; raise ``Base58Error`` when the checksum fails."""
    raw = b58decode(text)
    if len(raw) < 5:
        raise Base58Error("too short for base58check (no room for a 4-byte checksum)")
    payload, checksum = raw[:-4], raw[-4:]
    if sha256d(payload)[:4] != checksum:
        raise Base58Error("bad base58check checksum")
    return payload
