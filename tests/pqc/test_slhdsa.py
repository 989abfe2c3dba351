"""SLH-DSA-128s through the pqc interface. Signing costs ~0.4 s (SHA2) and ~1.3 s
(SHAKE), so signatures are made once per module and reused."""

from __future__ import annotations

import pytest

import pqc
from pqc import Algorithm, InvalidInput, InvalidKeyFormat, InvalidSignature, KeyPair, MalformedSignature
from pqc.algorithms import SPECS

MESSAGE = b"attest: 0xabc"
CONTEXTS = [b"", b"c", bytes(254), bytes(255)]


@pytest.fixture(scope="module")
def sha2_pair() -> KeyPair:
    return pqc.generate_keypair("slh-dsa-128s")


@pytest.fixture(scope="module")
def sha2_signatures(sha2_pair: KeyPair) -> dict[bytes, bytes]:
    return {ctx: pqc.sign(sha2_pair.algorithm, sha2_pair.private_key, MESSAGE, ctx) for ctx in CONTEXTS}


def test_spec_name_means_sha2(sha2_pair: KeyPair) -> None:
    assert sha2_pair.algorithm is Algorithm.SLH_DSA_SHA2_128S
    spec = SPECS[sha2_pair.algorithm]
    assert (len(sha2_pair.public_key), len(sha2_pair.private_key), len(sha2_pair.seed)) == (32, 64, 48)
    assert spec.signature_size == 7856
    assert sha2_pair.private_key[:48] == sha2_pair.seed
    assert sha2_pair.private_key[32:] == sha2_pair.public_key


@pytest.mark.parametrize("context", CONTEXTS, ids=lambda c: f"ctx{len(c)}")
def test_contexts_0_1_254_255_round_trip(
    sha2_pair: KeyPair, sha2_signatures: dict[bytes, bytes], context: bytes
) -> None:
    signature = sha2_signatures[context]
    assert len(signature) == 7856
    pqc.verify(sha2_pair.algorithm, sha2_pair.public_key, MESSAGE, signature, context)
    other_context = b"x" if context != b"x" else b""
    with pytest.raises(InvalidSignature):
        pqc.verify(sha2_pair.algorithm, sha2_pair.public_key, MESSAGE, signature, other_context)


def test_failures(sha2_pair: KeyPair, sha2_signatures: dict[bytes, bytes]) -> None:
    alg, pk = sha2_pair.algorithm, sha2_pair.public_key
    signature = sha2_signatures[b""]
    with pytest.raises(InvalidSignature):
        pqc.verify(alg, pk, MESSAGE + b"!", signature)
    with pytest.raises(InvalidSignature):
        pqc.verify(alg, bytes(32), MESSAGE, signature)
    with pytest.raises(InvalidSignature):
        pqc.verify(alg, pk, MESSAGE, signature[:-1] + bytes([signature[-1] ^ 1]))
    with pytest.raises(InvalidSignature):
        pqc.verify(Algorithm.SLH_DSA_SHAKE_128S, pk, MESSAGE, signature)
    with pytest.raises(MalformedSignature):
        pqc.verify(alg, pk, MESSAGE, signature[:-1])
    with pytest.raises(InvalidKeyFormat):
        pqc.verify(alg, pk + b"\0", MESSAGE, signature)
    with pytest.raises(InvalidKeyFormat):
        pqc.sign(alg, sha2_pair.seed, MESSAGE)
    with pytest.raises(InvalidInput):
        pqc.sign(alg, sha2_pair.private_key, MESSAGE, bytes(256))
    with pytest.raises(InvalidInput):
        pqc.verify(alg, pk, MESSAGE, signature, bytes(256))


@pytest.mark.slow
def test_seeded_keygen_recreates_pqcrypto_keys(sha2_pair: KeyPair) -> None:
    """PK.root computed in pure Python equals the one pqcrypto made (SHA2 and SHAKE)."""
    shake = pqc.generate_keypair(Algorithm.SLH_DSA_SHAKE_128S)
    for pair in (sha2_pair, shake):
        again = pqc.generate_keypair(pair.algorithm, pair.seed)
        assert (again.public_key, again.private_key) == (pair.public_key, pair.private_key)
    with pytest.raises(InvalidKeyFormat):
        pqc.generate_keypair(Algorithm.SLH_DSA_SHAKE_128S, bytes(32))


@pytest.mark.slow
def test_shake_variant_round_trip() -> None:
    pair = pqc.generate_keypair("slh-dsa-shake-128s")
    signature = pqc.sign(pair.algorithm, pair.private_key, MESSAGE, b"ctx")
    pqc.verify(pair.algorithm, pair.public_key, MESSAGE, signature, b"ctx")
    with pytest.raises(InvalidSignature):
        pqc.verify(Algorithm.SLH_DSA_SHA2_128S, pair.public_key, MESSAGE, signature, b"ctx")
