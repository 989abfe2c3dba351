"""Fuzz ``pqc.hexcodec.decode_hex``, the decoder of every hex field of the API.

Passes: bytes whose lower-case hex is the input's digits (prefix dropped, lower-cased: the
canonical form), or ``InvalidHex`` (PQC_002) naming the field. Input: first byte's low bit
= ``allow_empty``, the rest as UTF-8 text (invalid sequences replaced, so any text shape).
"""

from __future__ import annotations

import atheris

from api.errors import code_of

with atheris.instrument_imports(include=["pqc"]):
    from pqc.errors import InvalidHex
    from pqc.hexcodec import decode_hex

from fuzz.runner import run
from fuzz.seeds import json_strings

_FIELD = "fuzzed"


def check(allow_empty: bool, text: str) -> None:
    """Decode ``text``; raise AssertionError unless the outcome is a documented one."""
    try:
        value = decode_hex(text, field=_FIELD, allow_empty=allow_empty)
    except InvalidHex as exc:
        assert code_of(exc) == "PQC_002" and exc.details["field"] == _FIELD, exc.details
        return
    digits = text[2:] if text[:2] in ("0x", "0X") else text
    assert value.hex() == digits.lower(), (text, value)
    assert decode_hex(value.hex(), field=_FIELD, allow_empty=allow_empty) == value
    assert value or allow_empty


def test_one_input(data: bytes) -> None:
    """libFuzzer's entry point: one input, one decode."""
    if data:
        check(bool(data[0] & 1), data[1:].decode("utf-8", "replace"))


def seeds() -> list[bytes]:
    """Hex strings of the crypto vectors, plus edge cases."""
    texts = json_strings(
        "addresses/eip55.json",
        "crypto/wycheproof/ecdsa_secp256k1_sha256_bitcoin_test.json",
        min_length=2,
        max_length=300,
    )[:400]
    texts += ["", "0x", "0X", "00", "0xABcd", "abc", "0xg0", " 00", "٠١", "0x0x00"]
    return [flag + t.encode() for t in texts for flag in (b"\x00", b"\x01")]


if __name__ == "__main__":
    run("hex", test_one_input, seeds())
