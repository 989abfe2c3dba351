"""Strict hex decoding for API fields ("0x"-prefixed or bare, as the spec allows)."""

from __future__ import annotations

import re
from typing import Final

from pqc.errors import InvalidHex

_HEX: Final = re.compile(r"[0-9a-fA-F]*")


def decode_hex(text: str, *, field: str, allow_empty: bool = False) -> bytes:
    """Bytes of a hex string with or without a 0x/0X prefix; raises InvalidHex
    naming ``field`` for odd length, non-hex characters, whitespace, or emptiness
    (unless ``allow_empty``), so every API hex field fails the same clear way."""
    digits = text[2:] if text[:2] in ("0x", "0X") else text
    try:
        decoded = bytes.fromhex(digits)
    except ValueError:
        decoded = None
    # fromhex also accepts spaces between pairs: a shorter result means it skipped some
    if decoded is not None and 2 * len(decoded) == len(digits) and (digits or allow_empty):
        return decoded
    if not _HEX.fullmatch(digits):
        reason = "contains a character that is not a hex digit (0-9, a-f, A-F)"
    elif len(digits) % 2:
        reason = "has an odd number of hex digits"
    else:
        reason = "is empty"
    raise InvalidHex(f"field '{field}' {reason}", field=field, reason=reason)
