"""Wycheproof vectors (crypto/wycheproof): ML-DSA verify and secp256k1 ECDSA verify.

Every "valid" case must verify; every "invalid" case must raise the documented
exception for its kind of defect (and nothing else).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest

import pqc
from pqc import InvalidInput, InvalidKeyFormat, InvalidSignature, MalformedSignature, PqcError

Loader = Callable[[str], Any]
Tally = Callable[[str, int, int], None]

# Wycheproof flag -> the exception pqc must raise for it (default: InvalidSignature)
_MLDSA_ERROR_BY_FLAG: dict[str, type[PqcError]] = {
    "IncorrectPublicKeyLength": InvalidKeyFormat,
    "InvalidContext": InvalidInput,
    "IncorrectSignatureLength": MalformedSignature,
}


def _mldsa_expected_error(flags: list[str]) -> type[PqcError]:
    for flag in flags:
        if flag in _MLDSA_ERROR_BY_FLAG:
            return _MLDSA_ERROR_BY_FLAG[flag]
    return InvalidSignature


@pytest.mark.parametrize(("level", "count"), [(44, 180), (65, 58), (87, 60)])
def test_mldsa_verify(level: int, count: int, crypto_vectors: Loader, tally: Tally) -> None:
    data = crypto_vectors(f"wycheproof/mldsa_{level}_verify_test.json")
    failures, ran = [], 0
    for group in data["testGroups"]:
        public_key = bytes.fromhex(group["publicKey"])
        for case in group["tests"]:
            ran += 1
            args = (
                f"ml-dsa-{level}",
                public_key,
                bytes.fromhex(case["msg"]),
                bytes.fromhex(case["sig"]),
                bytes.fromhex(case.get("ctx", "")),
            )
            if case["result"] == "valid":
                try:
                    pqc.verify(*args)
                except PqcError as exc:
                    failures.append((case["tcId"], repr(exc)))
                continue
            expected = _mldsa_expected_error(case["flags"])
            try:
                pqc.verify(*args)
                failures.append((case["tcId"], "accepted"))
            except PqcError as exc:
                if type(exc) is not expected:
                    failures.append((case["tcId"], f"{type(exc).__name__} instead of {expected.__name__}"))
    tally(f"Wycheproof ML-DSA-{level} verify", ran, ran - len(failures))
    assert failures == []
    assert ran == count


@pytest.mark.parametrize(
    ("filename", "count", "check"),
    [
        ("ecdsa_secp256k1_sha256_test.json", 476, pqc.unsafe_verify_allowing_high_s),
        ("ecdsa_secp256k1_sha256_bitcoin_test.json", 463, pqc.ecdsa_verify),
    ],
    ids=["standard", "bitcoin-low-s"],
)
def test_secp256k1_verify(
    filename: str,
    count: int,
    check: Callable[[bytes, bytes, bytes], None],
    crypto_vectors: Loader,
    tally: Tally,
) -> None:
    """Strict DER parsing + verify. The standard file accepts high-S (plain X9.62),
    so it runs through unsafe_verify_allowing_high_s; the Bitcoin file through the
    default low-S verify."""
    data = crypto_vectors(f"wycheproof/{filename}")
    failures, ran = [], 0
    for group in data["testGroups"]:
        assert group["sha"] == "SHA-256"
        public_key = bytes.fromhex(group["publicKey"]["uncompressed"])
        for case in group["tests"]:
            ran += 1
            digest = hashlib.sha256(bytes.fromhex(case["msg"])).digest()
            try:
                check(public_key, digest, pqc.signature_from_der(bytes.fromhex(case["sig"])))
                accepted = True
            except InvalidSignature:
                accepted = False
            if accepted != (case["result"] == "valid"):
                failures.append((case["tcId"], case["comment"]))
    tally(f"Wycheproof secp256k1 {filename.removesuffix('.json')}", ran, ran - len(failures))
    assert failures == []
    assert ran == count
