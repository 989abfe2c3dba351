"""Property tests: hex decoding, and every malformed-input path of verify / recover
raises only the documented PqcError subclasses, never anything else."""

from __future__ import annotations

import re

import pytest
from coincurve import PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pqc
from pqc import (
    Algorithm,
    ClaimedSigner,
    InvalidHex,
    InvalidInput,
    InvalidKeyFormat,
    InvalidSignature,
    KeyPair,
    MalformedSignature,
    SignatureLayout,
)
from pqc.algorithms import SPECS

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MESSAGE = b"property"


def _around(size: int) -> st.SearchStrategy[bytes]:
    """Mostly the exact size (to reach the library), sometimes near it or anything."""
    return st.one_of(
        st.binary(min_size=size, max_size=size),
        st.integers(min_value=max(0, size - 2), max_value=size + 2).flatmap(
            lambda n: st.binary(min_size=n, max_size=n)
        ),
        st.binary(max_size=80),
    )


# --- hex -------------------------------------------------------------------------------


@given(st.binary(), st.sampled_from(["", "0x", "0X"]), st.booleans())
def test_hex_round_trip(data: bytes, prefix: str, upper: bool) -> None:
    text = data.hex().upper() if upper else data.hex()
    assert pqc.decode_hex(prefix + text, field="f", allow_empty=True) == data


@given(st.text(max_size=40))
def test_hex_decodes_or_raises_invalid_hex(text: str) -> None:
    digits = text[2:] if text[:2] in ("0x", "0X") else text
    well_formed = re.fullmatch(r"(?:[0-9a-fA-F]{2})+", digits) is not None
    try:
        decoded = pqc.decode_hex(text, field="f")
    except InvalidHex as error:
        assert not well_formed
        assert error.details["field"] == "f"
    else:
        assert well_formed and decoded == bytes.fromhex(digits)


# --- post-quantum verify ------------------------------------------------------------------


@pytest.fixture(scope="module")
def mldsa_pair() -> KeyPair:
    return pqc.generate_keypair(Algorithm.ML_DSA_44, bytes(32))


@FAST
@given(
    algorithm=st.sampled_from(list(Algorithm)),
    data=st.data(),
    message=st.binary(max_size=64),
    context=st.binary(max_size=300),
)
def test_pq_verify_of_garbage_raises_only_documented_errors(
    algorithm: Algorithm, data: st.DataObject, message: bytes, context: bytes
) -> None:
    spec = SPECS[algorithm]
    public_key = data.draw(_around(spec.public_key_size))
    signature = data.draw(_around(spec.signature_size))
    with pytest.raises((InvalidSignature, InvalidKeyFormat, InvalidInput)) as error:
        pqc.verify(algorithm, public_key, message, signature, context)
    if len(context) > 255:
        assert isinstance(error.value, InvalidInput)
    elif len(public_key) != spec.public_key_size:
        assert isinstance(error.value, InvalidKeyFormat)
    elif len(signature) != spec.signature_size:
        assert isinstance(error.value, MalformedSignature)


@FAST
@given(position=st.integers(min_value=0), bit=st.integers(min_value=0, max_value=7))
def test_any_flipped_signature_bit_is_rejected(mldsa_pair: KeyPair, position: int, bit: int) -> None:
    signature = bytearray(pqc.sign(mldsa_pair.algorithm, mldsa_pair.seed, MESSAGE))
    signature[position % len(signature)] ^= 1 << bit
    with pytest.raises(InvalidSignature):
        pqc.verify(mldsa_pair.algorithm, mldsa_pair.public_key, MESSAGE, bytes(signature))


@FAST
@given(private_key=st.binary(max_size=100), algorithm=st.sampled_from(list(Algorithm)))
def test_sign_with_wrong_length_keys_raises_invalid_key_format(private_key: bytes, algorithm: Algorithm) -> None:
    spec = SPECS[algorithm]
    if len(private_key) in (spec.seed_size, spec.private_key_size):
        private_key += b"\0"
    with pytest.raises(InvalidKeyFormat):
        pqc.sign(algorithm, private_key, MESSAGE)


# --- secp256k1 ------------------------------------------------------------------------------

SECRET = bytes(31) + b"\x07"


@settings(max_examples=300, deadline=None)
@given(
    digest=_around(32),
    signature=_around(65),
    layout=st.sampled_from(list(SignatureLayout)),
)
def test_recover_of_garbage_raises_only_documented_errors(
    digest: bytes, signature: bytes, layout: SignatureLayout
) -> None:
    try:
        recovered = pqc.recover_public_key(digest, signature, layout)
    except (InvalidSignature, InvalidInput) as error:
        if len(digest) != 32:
            assert isinstance(error, InvalidInput)
        elif len(signature) != 65:
            assert isinstance(error, MalformedSignature)
    else:
        assert len(recovered) == 65 and recovered[0] == 4
        assert pqc.parse_public_key(recovered) == recovered


@settings(max_examples=300, deadline=None)
@given(
    public_key=st.one_of(_around(33), _around(65), _around(64)),
    digest=_around(32),
    signature=_around(64),
)
def test_ecdsa_verify_of_garbage_raises_only_documented_errors(
    public_key: bytes, digest: bytes, signature: bytes
) -> None:
    with pytest.raises((InvalidSignature, InvalidKeyFormat, InvalidInput)):
        pqc.ecdsa_verify(public_key, digest, signature)


@settings(max_examples=300, deadline=None)
@given(claimed=st.binary(max_size=70), kind=st.sampled_from(list(ClaimedSigner)))
def test_require_signer_raises_only_documented_errors(claimed: bytes, kind: ClaimedSigner) -> None:
    recovered = PrivateKey(SECRET).public_key.format(compressed=False)
    with pytest.raises((InvalidSignature, InvalidKeyFormat)):
        pqc.require_signer(recovered, claimed, kind)


@settings(max_examples=500, deadline=None)
@given(der=st.one_of(st.binary(max_size=80), st.binary(min_size=1, max_size=6).map(lambda b: b"\x30" + b)))
def test_der_parser_returns_64_bytes_or_malformed(der: bytes) -> None:
    try:
        compact = pqc.signature_from_der(der)
    except MalformedSignature:
        return
    assert len(compact) == 64


@settings(max_examples=100, deadline=None)
@given(digest=st.binary(min_size=32, max_size=32))
def test_real_signatures_round_trip_through_der_and_recovery(digest: bytes) -> None:
    key = PrivateKey(SECRET)
    compact = pqc.signature_from_der(key.sign(digest, hasher=None))
    pqc.ecdsa_verify(key.public_key.format(), digest, compact)
    recoverable = key.sign_recoverable(digest, hasher=None)
    assert recoverable[:64] == compact
    pqc.require_signer(pqc.recover_public_key(digest, recoverable), key.public_key.format())
