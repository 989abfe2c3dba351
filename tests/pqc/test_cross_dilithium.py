"""Cross-implementation checks against dilithium-py (pure-Python FIPS 204 final,
with context strings and HashML-DSA): keys and signatures flow both ways."""

from __future__ import annotations

import pytest
from dilithium_py.ml_dsa import (  # type: ignore[import-untyped]  # ships no types
    HASH_ML_DSA_44_WITH_SHA512,
    ML_DSA_44,
    ML_DSA_65,
    ML_DSA_87,
)
from dilithium_py.ml_dsa.ml_dsa import ML_DSA  # type: ignore[import-untyped]  # ships no types

import pqc
from pqc import Algorithm, InvalidSignature

REFERENCE: dict[Algorithm, ML_DSA] = {
    Algorithm.ML_DSA_44: ML_DSA_44,
    Algorithm.ML_DSA_65: ML_DSA_65,
    Algorithm.ML_DSA_87: ML_DSA_87,
}
MESSAGE = b"hybrid attestation"


@pytest.mark.parametrize("algorithm", list(REFERENCE), ids=str)
def test_keys_made_here_sign_there_and_verify_here(algorithm: Algorithm) -> None:
    reference = REFERENCE[algorithm]
    pair = pqc.generate_keypair(algorithm)
    assert reference.key_derive(pair.seed) == (pair.public_key, pair.private_key)
    signature = reference.sign(pair.private_key, MESSAGE, ctx=bytes(255))
    pqc.verify(algorithm, pair.public_key, MESSAGE, signature, bytes(255))
    with pytest.raises(InvalidSignature):
        pqc.verify(algorithm, pair.public_key, MESSAGE, signature, bytes(254))


@pytest.mark.parametrize("algorithm", list(REFERENCE), ids=str)
def test_keys_made_there_sign_here_and_verify_there(algorithm: Algorithm) -> None:
    reference = REFERENCE[algorithm]
    public_key, private_key = reference.keygen()
    signature = pqc.sign(algorithm, private_key, MESSAGE, b"ctx")  # foreign expanded key
    assert reference.verify(public_key, MESSAGE, signature, ctx=b"ctx")
    assert not reference.verify(public_key, MESSAGE, signature, ctx=b"")
    pqc.verify(algorithm, public_key, MESSAGE, signature, b"ctx")


def test_seed_signatures_verify_there() -> None:
    pair = pqc.generate_keypair(Algorithm.ML_DSA_44)
    signature = pqc.sign(Algorithm.ML_DSA_44, pair.seed, MESSAGE, bytes(254))
    assert ML_DSA_44.verify(pair.public_key, MESSAGE, signature, ctx=bytes(254))


def test_hash_ml_dsa_signatures_from_there_verify_here() -> None:
    public_key, private_key = HASH_ML_DSA_44_WITH_SHA512.keygen()
    signature = HASH_ML_DSA_44_WITH_SHA512.sign(private_key, MESSAGE, ctx=b"ctx")
    pqc.verify_prehashed(Algorithm.ML_DSA_44, public_key, MESSAGE, signature, b"ctx", prehash=pqc.PreHash.SHA2_512)
    with pytest.raises(InvalidSignature):
        pqc.verify(Algorithm.ML_DSA_44, public_key, MESSAGE, signature, b"ctx")
    with pytest.raises(InvalidSignature):
        pqc.verify_prehashed(Algorithm.ML_DSA_44, public_key, MESSAGE, signature, b"ctx", prehash=pqc.PreHash.SHA2_256)


@pytest.mark.parametrize("algorithm", list(REFERENCE), ids=str)
def test_expanded_key_is_right_when_sampling_must_squeeze_more(
    algorithm: Algorithm, monkeypatch: pytest.MonkeyPatch
) -> None:
    # First squeezes too short for 256 coefficients: the retry paths, which real
    # parameters reach with negligible probability, must still give the FIPS 204 key.
    monkeypatch.setattr("pqc.mldsa_expand._A_CANDIDATES", 200)
    monkeypatch.setattr("pqc.mldsa_expand._S_BYTES", 100)
    pair = pqc.generate_keypair(algorithm)
    assert REFERENCE[algorithm].key_derive(pair.seed) == (pair.public_key, pair.private_key)
