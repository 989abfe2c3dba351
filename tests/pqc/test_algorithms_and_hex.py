"""Algorithm names, sizes against the libraries, error codes, strict hex decoding."""

from __future__ import annotations

import pytest
from pqcrypto.sign import (  # type: ignore[import-untyped]  # ships no types
    ml_dsa_44,
    ml_dsa_65,
    ml_dsa_87,
    slh_dsa_sha2_128s,
    slh_dsa_shake_128s,
)

import pqc
from api.errors import code_of
from pqc import Algorithm, InvalidHex, UnsupportedAlgorithm
from pqc.algorithms import SPECS


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ml-dsa-44", Algorithm.ML_DSA_44),
        ("ML-DSA-65", Algorithm.ML_DSA_65),
        ("ml-dsa-87", Algorithm.ML_DSA_87),
        ("slh-dsa-128s", Algorithm.SLH_DSA_SHA2_128S),
        ("SLH-DSA-SHA2-128s", Algorithm.SLH_DSA_SHA2_128S),
        ("slh-dsa-shake-128s", Algorithm.SLH_DSA_SHAKE_128S),
        (Algorithm.ML_DSA_44, Algorithm.ML_DSA_44),
    ],
)
def test_parse_algorithm(name: str, expected: Algorithm) -> None:
    assert pqc.parse_algorithm(name) is expected


@pytest.mark.parametrize("name", ["", "ml-dsa", "ml-dsa-44 ", "dilithium3", "slh-dsa-128f", "ecdsa", "x" * 500])
def test_unknown_algorithms_raise_pqc_001(name: str) -> None:
    with pytest.raises(UnsupportedAlgorithm) as error:
        pqc.parse_algorithm(name)
    assert code_of(error.value) == "PQC_001"
    assert "slh-dsa-128s" in error.value.details["supported"]  # type: ignore[operator]  # a list in this error's details
    assert len(str(error.value)) < 120


def test_sizes_agree_with_pqcrypto() -> None:
    modules = {
        Algorithm.ML_DSA_44: ml_dsa_44,
        Algorithm.ML_DSA_65: ml_dsa_65,
        Algorithm.ML_DSA_87: ml_dsa_87,
        Algorithm.SLH_DSA_SHA2_128S: slh_dsa_sha2_128s,
        Algorithm.SLH_DSA_SHAKE_128S: slh_dsa_shake_128s,
    }
    for algorithm, module in modules.items():
        spec = SPECS[algorithm]
        assert (spec.public_key_size, spec.private_key_size, spec.signature_size) == (
            module.PUBLIC_KEY_SIZE,
            module.SECRET_KEY_SIZE,
            module.SIGNATURE_SIZE,
        )


def test_error_codes() -> None:
    assert [code_of(cls("x")) for cls in (pqc.UnsupportedAlgorithm, pqc.InvalidKeyFormat, pqc.InvalidHex)] == [
        "PQC_001",
        "PQC_002",
        "PQC_002",
    ]
    assert tuple(code_of(cls("x")) for cls in (pqc.InvalidSignature, pqc.MalformedSignature, pqc.InvalidInput)) == (
        "PQC_004",
        "PQC_002",
        "REQ_001",
    )
    assert issubclass(pqc.MalformedSignature, pqc.InvalidSignature)
    error = pqc.InvalidKeyFormat("bad key", field="public_key")
    assert (error.message, error.details) == ("bad key", {"field": "public_key"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0x00ff", b"\x00\xff"), ("0X00FF", b"\x00\xff"), ("aBcD", b"\xab\xcd"), ("00", b"\x00")],
)
def test_decode_hex(text: str, expected: bytes) -> None:
    assert pqc.decode_hex(text, field="message") == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "is empty"),
        ("0x", "is empty"),
        ("abc", "odd number"),
        ("0xabc", "odd number"),
        ("0xzz", "not a hex digit"),
        ("ab cd", "not a hex digit"),
        (" abcd", "not a hex digit"),
        ("abcd\n", "not a hex digit"),
        ("0x0x00", "not a hex digit"),
        ("x00", "not a hex digit"),
        ("\uff10\uff10", "not a hex digit"),  # fullwidth digits
        ("\u0663\u0663", "not a hex digit"),  # Arabic-Indic digits
        ("-1", "not a hex digit"),
    ],
)
def test_decode_hex_rejects(text: str, reason: str) -> None:
    with pytest.raises(InvalidHex) as error:
        pqc.decode_hex(text, field="pqcSignature")
    assert code_of(error.value) == "PQC_002"
    assert error.value.details["field"] == "pqcSignature"
    assert reason in str(error.value) and "pqcSignature" in str(error.value)


def test_decode_hex_allow_empty() -> None:
    assert pqc.decode_hex("", field="context", allow_empty=True) == b""
    assert pqc.decode_hex("0x", field="context", allow_empty=True) == b""
