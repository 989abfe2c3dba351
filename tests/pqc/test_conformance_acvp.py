"""NIST ACVP vectors (crypto/acvp): ML-DSA keyGen and sigVer, SLH-DSA keyGen.

Counts are asserted so a trimmed or missing group cannot pass silently
(see crypto/INDEX.md: sigVer keeps only the 6 external-interface groups).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import pqc
from pqc import InvalidSignature, PreHash

Loader = Callable[[str], Any]
Tally = Callable[[str, int, int], None]


def test_mldsa_keygen_from_seed(crypto_vectors: Loader, tally: Tally) -> None:
    """Seed -> (pk, expanded sk) byte for byte, 25 cases per parameter set."""
    data = crypto_vectors("acvp/ML-DSA-keyGen-FIPS204.internalProjection.json")
    failures, ran = [], 0
    for group in data["testGroups"]:
        for case in group["tests"]:
            ran += 1
            pair = pqc.generate_keypair(group["parameterSet"], bytes.fromhex(case["seed"]))
            if pair.public_key != bytes.fromhex(case["pk"]) or pair.private_key != bytes.fromhex(case["sk"]):
                failures.append((group["parameterSet"], case["tcId"]))
    tally("ACVP ML-DSA keyGen", ran, ran - len(failures))
    assert failures == []
    assert ran == 75


def test_mldsa_sigver_external_pure_and_prehash(crypto_vectors: Loader, tally: Tally) -> None:
    """sigVer, external interface: pure groups through verify, preHash groups
    through verify_prehashed (HashML-DSA over cryptography's verify_mu)."""
    prompt = crypto_vectors("acvp/ML-DSA-sigVer-FIPS204.prompt.json")
    results = crypto_vectors("acvp/ML-DSA-sigVer-FIPS204.expectedResults.json")
    expected = {
        (group["tgId"], case["tcId"]): case["testPassed"] for group in results["testGroups"] for case in group["tests"]
    }
    failures, ran = [], {"pure": 0, "preHash": 0}
    for group in prompt["testGroups"]:
        assert group["signatureInterface"] == "external"
        for case in group["tests"]:
            ran[group["preHash"]] += 1
            args = (
                group["parameterSet"],
                bytes.fromhex(case["pk"]),
                bytes.fromhex(case["message"]),
                bytes.fromhex(case["signature"]),
                bytes.fromhex(case["context"]),
            )
            try:
                if group["preHash"] == "pure":
                    pqc.verify(*args)
                else:
                    pqc.verify_prehashed(*args, prehash=PreHash(case["hashAlg"]))
                passed = True
            except InvalidSignature:
                passed = False
            if passed != expected[(group["tgId"], case["tcId"])]:
                failures.append((group["tgId"], case["tcId"]))
    total = sum(ran.values())
    tally("ACVP ML-DSA sigVer (pure 45 + preHash 45)", total, total - len(failures))
    assert failures == []
    assert ran == {"pure": 45, "preHash": 45}


@pytest.mark.slow
def test_slhdsa_keygen_from_seeds(crypto_vectors: Loader, tally: Tally) -> None:
    """SK.seed, SK.prf, PK.seed -> (pk, sk) for SHA2-128s and SHAKE-128s (10 each,
    ~0.3-0.4 s per case: PK.root is computed in pure Python)."""
    data = crypto_vectors("acvp/SLH-DSA-keyGen-FIPS205.internalProjection.json")
    failures, ran = [], 0
    for group in data["testGroups"]:
        for case in group["tests"]:
            ran += 1
            seed = bytes.fromhex(case["skSeed"] + case["skPrf"] + case["pkSeed"])
            pair = pqc.generate_keypair(group["parameterSet"], seed)
            if pair.public_key != bytes.fromhex(case["pk"]) or pair.private_key != bytes.fromhex(case["sk"]):
                failures.append((group["parameterSet"], case["tcId"]))
    tally("ACVP SLH-DSA keyGen", ran, ran - len(failures))
    assert failures == []
    assert ran == 20
