"""ML-DSA through the pqc interface: round trips, failure cases, contexts, key formats."""

from __future__ import annotations

import pytest

import pqc
from api.errors import code_of
from pqc import Algorithm, InvalidInput, InvalidKeyFormat, InvalidSignature, KeyPair, MalformedSignature
from pqc.algorithms import SPECS

ML_DSA = [Algorithm.ML_DSA_44, Algorithm.ML_DSA_65, Algorithm.ML_DSA_87]
MESSAGE = b"attest: 0xabc"


@pytest.fixture(scope="module", params=ML_DSA, ids=str)
def pair(request: pytest.FixtureRequest) -> KeyPair:
    return pqc.generate_keypair(request.param, bytes(range(32)))


def test_sizes_match_the_standard(pair: KeyPair) -> None:
    spec = SPECS[pair.algorithm]
    assert len(pair.public_key) == spec.public_key_size
    assert len(pair.private_key) == spec.private_key_size
    assert len(pair.seed) == spec.seed_size == 32
    assert len(pqc.sign(pair.algorithm, pair.seed, MESSAGE)) == spec.signature_size


def test_seed_keygen_is_deterministic_and_random_keygen_is_not(pair: KeyPair) -> None:
    again = pqc.generate_keypair(pair.algorithm, pair.seed)
    assert (again.public_key, again.private_key) == (pair.public_key, pair.private_key)
    fresh = pqc.generate_keypair(pair.algorithm)
    assert fresh.public_key != pair.public_key
    assert pqc.generate_keypair(pair.algorithm, fresh.seed).private_key == fresh.private_key


@pytest.mark.parametrize("key_form", ["seed", "expanded"])
def test_round_trip(pair: KeyPair, key_form: str) -> None:
    private_key = pair.seed if key_form == "seed" else pair.private_key
    signature = pqc.sign(pair.algorithm, private_key, MESSAGE, b"ctx")
    pqc.verify(pair.algorithm, pair.public_key, MESSAGE, signature, b"ctx")


@pytest.mark.parametrize("length", [0, 1, 254, 255])
def test_context_lengths_up_to_255_work(pair: KeyPair, length: int) -> None:
    context = bytes([7]) * length
    signature = pqc.sign(pair.algorithm, pair.seed, MESSAGE, context)
    pqc.verify(pair.algorithm, pair.public_key, MESSAGE, signature, context)
    with pytest.raises(InvalidSignature):
        pqc.verify(pair.algorithm, pair.public_key, MESSAGE, signature, context + b"x" if length < 255 else b"")


def test_context_of_256_bytes_is_rejected(pair: KeyPair) -> None:
    with pytest.raises(InvalidInput) as sign_error:
        pqc.sign(pair.algorithm, pair.seed, MESSAGE, bytes(256))
    assert code_of(sign_error.value) == "REQ_001"
    signature = pqc.sign(pair.algorithm, pair.seed, MESSAGE)
    with pytest.raises(InvalidInput):
        pqc.verify(pair.algorithm, pair.public_key, MESSAGE, signature, bytes(256))


def test_expanded_key_refuses_contexts_pqcrypto_mishandles(pair: KeyPair) -> None:
    """pqcrypto 1.0.0 rejects valid 254/255-byte contexts; say so clearly instead."""
    signature = pqc.sign(pair.algorithm, pair.private_key, MESSAGE, bytes(253))
    pqc.verify(pair.algorithm, pair.public_key, MESSAGE, signature, bytes(253))
    with pytest.raises(InvalidInput, match="32-byte seed"):
        pqc.sign(pair.algorithm, pair.private_key, MESSAGE, bytes(254))


def test_wrong_message_context_key_or_signature_raise(pair: KeyPair) -> None:
    alg = pair.algorithm
    signature = pqc.sign(alg, pair.seed, MESSAGE, b"ctx")
    other = pqc.generate_keypair(alg, bytes(32))
    with pytest.raises(InvalidSignature):
        pqc.verify(alg, pair.public_key, MESSAGE + b"!", signature, b"ctx")
    with pytest.raises(InvalidSignature):
        pqc.verify(alg, pair.public_key, MESSAGE, signature, b"ctX")
    with pytest.raises(InvalidSignature):
        pqc.verify(alg, pair.public_key, MESSAGE, signature)
    with pytest.raises(InvalidSignature):
        pqc.verify(alg, other.public_key, MESSAGE, signature, b"ctx")
    flipped = bytes([signature[0] ^ 1]) + signature[1:]
    with pytest.raises(InvalidSignature) as error:
        pqc.verify(alg, pair.public_key, MESSAGE, flipped, b"ctx")
    assert code_of(error.value) == "PQC_004"
    with pytest.raises(MalformedSignature) as malformed:
        pqc.verify(alg, pair.public_key, MESSAGE, signature[:-1], b"ctx")
    assert code_of(malformed.value) == "PQC_002"
    assert malformed.value.details["expected"] == SPECS[alg].signature_size


def test_wrong_length_keys_raise_invalid_key_format(pair: KeyPair) -> None:
    alg = pair.algorithm
    signature = pqc.sign(alg, pair.seed, MESSAGE)
    with pytest.raises(InvalidKeyFormat) as error:
        pqc.verify(alg, pair.public_key[:-1], MESSAGE, signature)
    assert code_of(error.value) == "PQC_002"
    assert error.value.details == {
        "field": "public_key",
        "expected": SPECS[alg].public_key_size,
        "length": SPECS[alg].public_key_size - 1,
    }
    for bad in (b"", pair.seed[:-1], pair.private_key + b"\0"):
        with pytest.raises(InvalidKeyFormat):
            pqc.sign(alg, bad, MESSAGE)
    with pytest.raises(InvalidKeyFormat):
        pqc.generate_keypair(alg, bytes(31))


def test_public_key_of_another_level_is_rejected() -> None:
    pair44 = pqc.generate_keypair(Algorithm.ML_DSA_44, bytes(32))
    signature = pqc.sign(Algorithm.ML_DSA_44, pair44.seed, MESSAGE)
    with pytest.raises(InvalidKeyFormat):
        pqc.verify(Algorithm.ML_DSA_65, pair44.public_key, MESSAGE, signature)


def test_keypair_repr_hides_secrets(pair: KeyPair) -> None:
    text = repr(pair)
    assert pair.seed.hex() not in text and pair.private_key[:16].hex() not in text
    assert pqc.public_key_fingerprint(pair.public_key) in text
    assert pqc.public_key_fingerprint(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_prehash_verification_is_ml_dsa_only() -> None:
    with pytest.raises(pqc.UnsupportedAlgorithm):
        pqc.verify_prehashed("slh-dsa-128s", bytes(32), b"", bytes(7856), prehash=pqc.PreHash.SHA2_256)
