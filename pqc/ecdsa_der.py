"""Strict DER for ECDSA signatures: SEQUENCE { INTEGER r, INTEGER s } (X9.62, RFC 3279).

Strict means exactly one encoding is accepted: definite minimal lengths, no
leading zero byte unless the next byte has its top bit set, no negative or
empty integers, no trailing bytes. BER variants are rejected
(Wycheproof "BerEncodedSignature" cases).
"""

from __future__ import annotations

from typing import Final

from pqc.errors import MalformedSignature

_SEQUENCE: Final = 0x30
_INTEGER: Final = 0x02


def _malformed(reason: str) -> MalformedSignature:
    return MalformedSignature(f"DER signature is malformed: {reason}", field="signature", reason="der")


def _read_length(der: bytes, pos: int) -> tuple[int, int]:
    """(length, position after the length octets), minimal definite form only."""
    if pos >= len(der):
        raise _malformed("truncated length")
    first = der[pos]
    if first < 0x80:
        return first, pos + 1
    count = first & 0x7F
    if count == 0 or count > 2:
        raise _malformed("indefinite or oversized length")
    if pos + 1 + count > len(der):
        raise _malformed("truncated length")
    length = int.from_bytes(der[pos + 1 : pos + 1 + count], "big")
    if length < 0x80 or der[pos + 1] == 0:
        raise _malformed("non-minimal length")
    return length, pos + 1 + count


def _read_integer(der: bytes, pos: int) -> tuple[int, int]:
    if pos >= len(der) or der[pos] != _INTEGER:
        raise _malformed("expected INTEGER")
    length, start = _read_length(der, pos + 1)
    end = start + length
    if length == 0 or end > len(der):
        raise _malformed("empty or truncated INTEGER")
    body = der[start:end]
    if body[0] & 0x80:
        raise _malformed("negative INTEGER")
    if length > 1 and body[0] == 0 and not body[1] & 0x80:
        raise _malformed("INTEGER has a superfluous leading zero")
    return int.from_bytes(body, "big"), end


def decode_der_signature(der: bytes) -> tuple[int, int]:
    """(r, s) of a strictly DER-encoded ECDSA signature; raises MalformedSignature
    for anything else so BER tricks cannot produce a second valid encoding."""
    if not der or der[0] != _SEQUENCE:
        raise _malformed("expected SEQUENCE")
    length, pos = _read_length(der, 1)
    if pos + length != len(der):
        raise _malformed("SEQUENCE length does not match the data")
    r, pos = _read_integer(der, pos)
    s, pos = _read_integer(der, pos)
    if pos != len(der):
        raise _malformed("trailing data inside SEQUENCE")
    return r, s


def _encode_integer(value: int) -> bytes:
    body = value.to_bytes(value.bit_length() // 8 + 1, "big")
    return bytes((_INTEGER, len(body))) + body


def encode_der_signature(r: int, s: int) -> bytes:
    """Canonical DER for an (r, s) pair below 2^256 (what libsecp256k1 verifies)."""
    content = _encode_integer(r) + _encode_integer(s)
    return bytes((_SEQUENCE, len(content))) + content
