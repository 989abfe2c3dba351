"""secp256k1: message schemes, recovery, signer comparison, verify, strict DER."""

from __future__ import annotations

import base64
import hashlib

import pytest
from coincurve import PrivateKey

import pqc
from api.errors import code_of
from pqc import (
    ClaimedSigner,
    InvalidInput,
    InvalidKeyFormat,
    InvalidSignature,
    MalformedSignature,
    MessageScheme,
    SignatureLayout,
)
from pqc.ecdsa_der import decode_der_signature, encode_der_signature
from pqc.ecdsa_messages import compact_size
from pqc.secp256k1 import CURVE_ORDER, HALF_ORDER

# eth-account documentation vector (sign_message / recover_message of "I♥SF")
EIP191_KEY = bytes.fromhex("b25c7db31feed9122727bf0939dc769a96564b2de4c4726d035b36ecf1e5b364")
EIP191_MESSAGE = "I♥SF".encode()
EIP191_DIGEST = bytes.fromhex("1476abb745d423bf09273f1afd887d951181d25adc66c4834a70491911b7f750")
EIP191_SIGNATURE = bytes.fromhex(
    "e6ca9bba58c88611fad66a6ce8f996908195593807c4b38bd528d2cff09d4eb3"
    "3e5bfbbf4d3e39b1a2fd816a7680c19ebebaf3a141b239934ad43cb33fcec8ce1c"
)
EIP191_ADDRESS = bytes.fromhex("5ce9454909639D2D17A3F753ce7d93fa0b9aB12E")

# Bitcoin Core test/functional/rpc_signmessage.py (signmessagewithprivkey, regtest)
BTC_SECRET = bytes.fromhex("d2b8a0116d641fe7d3036f8464628fb595b480414c13a301b3d4038c811c28b0")
BTC_MESSAGE = b"This is just a test message"
BTC_SIGNATURE = base64.b64decode(
    "INbVnW4e6PeRmsv2Qgu8NuopvrVjkcxob+sX8OcZG0SALhWybUjzMLPdAsXI46YZGb0KQTRii+wWIQzRpG/U+S0="
)
BTC_ADDRESS = "mpLQjfK79b7CCV4VMJWEWAj5Mpx8Up5zxB"

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _base58check_payload(address: str) -> bytes:
    raw = 0
    for char in address:
        raw = raw * 58 + _B58.index(char)
    data = raw.to_bytes(25, "big")
    assert hashlib.sha256(hashlib.sha256(data[:-4]).digest()).digest()[:4] == data[-4:]
    return data[1:-4]


def _sign(secret: bytes, digest: bytes) -> bytes:
    """r || s || recovery id (0/1), low-S, from libsecp256k1."""
    return PrivateKey(secret).sign_recoverable(digest, hasher=None)


def _with_s(signature: bytes, s: int, v: int | None = None) -> bytes:
    return signature[:32] + s.to_bytes(32, "big") + bytes([signature[64] if v is None else v])


def test_eip191_documented_vector() -> None:
    assert pqc.message_digest("eip191", EIP191_MESSAGE) == EIP191_DIGEST
    recovered = pqc.recover_public_key(EIP191_DIGEST, EIP191_SIGNATURE)
    assert pqc.evm_address(recovered) == EIP191_ADDRESS
    pqc.require_signer(recovered, EIP191_ADDRESS, ClaimedSigner.EVM_ADDRESS)
    as_zero_one = EIP191_SIGNATURE[:64] + bytes([EIP191_SIGNATURE[64] - 27])
    assert pqc.recover_public_key(EIP191_DIGEST, as_zero_one) == recovered
    key = PrivateKey(EIP191_KEY).public_key
    for claimed in (key.format(compressed=True), key.format(compressed=False), key.format(compressed=False)[1:]):
        pqc.require_signer(recovered, claimed)


def test_bip137_bitcoin_core_vector() -> None:
    digest = pqc.message_digest(MessageScheme.BIP137, BTC_MESSAGE)
    parsed = pqc.parse_recoverable_signature(BTC_SIGNATURE, SignatureLayout.BIP137)
    assert parsed.compressed is True and BTC_SIGNATURE[0] == 32
    recovered = pqc.recover_public_key(digest, BTC_SIGNATURE, SignatureLayout.BIP137)
    assert recovered == PrivateKey(BTC_SECRET).public_key.format(compressed=False)
    pqc.require_signer(recovered, _base58check_payload(BTC_ADDRESS), ClaimedSigner.HASH160)
    as_rsv = BTC_SIGNATURE[1:] + bytes([parsed.recovery_id])
    assert pqc.recover_public_key(digest, as_rsv, SignatureLayout.RSV) == recovered
    with pytest.raises(InvalidSignature) as error:
        pqc.require_signer(recovered, EIP191_ADDRESS, ClaimedSigner.HASH160)
    assert error.value.details["reason"] == "signer_mismatch"


def test_bip137_header_ranges() -> None:
    digest = pqc.message_digest("bip137", BTC_MESSAGE)
    body = BTC_SIGNATURE[1:]
    recid = (BTC_SIGNATURE[0] - 27) % 4
    for header, compressed in ((27 + recid, False), (31 + recid, True), (35 + recid, True), (39 + recid, True)):
        signature = bytes([header]) + body
        assert pqc.parse_recoverable_signature(signature, SignatureLayout.BIP137).compressed is compressed
        pqc.recover_public_key(digest, signature, SignatureLayout.BIP137)
    for header in (0, 26, 43, 255):
        with pytest.raises(MalformedSignature):
            pqc.recover_public_key(digest, bytes([header]) + body, SignatureLayout.BIP137)


def test_digest_scheme_needs_32_bytes() -> None:
    assert pqc.message_digest("digest", bytes(32)) == bytes(32)
    with pytest.raises(InvalidInput) as error:
        pqc.message_digest("digest", bytes(31))
    assert code_of(error.value) == "REQ_001"
    with pytest.raises(InvalidInput):
        pqc.message_digest("eth_sign", b"")
    with pytest.raises(InvalidInput):
        pqc.recover_public_key(bytes(31), EIP191_SIGNATURE)


def test_compact_size() -> None:
    assert compact_size(0xFC) == b"\xfc"
    assert compact_size(0xFD) == b"\xfd\xfd\x00"
    assert compact_size(0xFFFF) == b"\xfd\xff\xff"
    assert compact_size(0x10000) == b"\xfe\x00\x00\x01\x00"
    assert compact_size(1 << 32) == b"\xff" + (1 << 32).to_bytes(8, "little")


def test_high_s_is_rejected_for_recovery_and_verify() -> None:
    digest = hashlib.sha256(b"m").digest()
    signature = _sign(EIP191_KEY, digest)
    s = int.from_bytes(signature[32:64], "big")
    assert s <= HALF_ORDER
    twin = _with_s(signature, CURVE_ORDER - s, signature[64] ^ 1)
    with pytest.raises(InvalidSignature) as error:
        pqc.recover_public_key(digest, twin)
    assert error.value.details["reason"] == "high_s" and code_of(error.value) == "PQC_004"
    public_key = PrivateKey(EIP191_KEY).public_key.format()
    pqc.ecdsa_verify(public_key, digest, signature[:64])
    with pytest.raises(InvalidSignature):
        pqc.ecdsa_verify(public_key, digest, twin[:64])
    pqc.unsafe_verify_allowing_high_s(public_key, digest, twin[:64])


@pytest.mark.parametrize(
    ("r", "s", "reason"),
    [(0, 1, "r_range"), (CURVE_ORDER, 1, "r_range"), (1, 0, "s_range"), (1, CURVE_ORDER, "s_range")],
)
def test_out_of_range_scalars_are_malformed(r: int, s: int, reason: str) -> None:
    signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    with pytest.raises(MalformedSignature) as error:
        pqc.recover_public_key(bytes(32), signature + b"\x1b")
    assert error.value.details["reason"] == reason and code_of(error.value) == "PQC_002"
    with pytest.raises(MalformedSignature):
        pqc.unsafe_verify_allowing_high_s(PrivateKey(EIP191_KEY).public_key.format(), bytes(32), signature)


@pytest.mark.parametrize("v", [2, 3, 26, 29, 35, 36, 37, 255])
def test_recovery_bytes_outside_0_1_27_28_are_malformed(v: int) -> None:
    with pytest.raises(MalformedSignature) as error:
        pqc.recover_public_key(EIP191_DIGEST, EIP191_SIGNATURE[:64] + bytes([v]))
    assert error.value.details["reason"] == "recovery_byte"


@pytest.mark.parametrize("length", [0, 64, 66, 130])
def test_wrong_lengths_are_malformed(length: int) -> None:
    with pytest.raises(MalformedSignature):
        pqc.recover_public_key(EIP191_DIGEST, (EIP191_SIGNATURE * 3)[:length])
    with pytest.raises(MalformedSignature):
        pqc.ecdsa_verify(PrivateKey(EIP191_KEY).public_key.format(), EIP191_DIGEST, bytes(length + 1))


def test_unrecoverable_signature() -> None:
    p = 2**256 - 2**32 - 977
    r = next(x for x in range(1, 100) if pow(x**3 + 7, (p - 1) // 2, p) != 1)  # no point with x = r
    signature = r.to_bytes(32, "big") + (1).to_bytes(32, "big") + b"\x00"
    with pytest.raises(InvalidSignature) as error:
        pqc.recover_public_key(bytes(32), signature)
    assert error.value.details["reason"] == "unrecoverable"


def test_claimed_key_formats() -> None:
    key = PrivateKey(EIP191_KEY).public_key
    uncompressed = key.format(compressed=False)
    assert pqc.parse_public_key(key.format()) == uncompressed
    assert pqc.parse_public_key(uncompressed[1:]) == uncompressed
    hybrid = bytes([6 + (uncompressed[-1] & 1)]) + uncompressed[1:]
    off_curve = uncompressed[:-1] + bytes([uncompressed[-1] ^ 1])
    for bad in (b"", hybrid, off_curve, b"\x02" + bytes(32), uncompressed[:-1], b"\x05" + uncompressed[1:33]):
        with pytest.raises(InvalidKeyFormat):
            pqc.require_signer(uncompressed, bad)
    with pytest.raises(InvalidKeyFormat):
        pqc.require_signer(uncompressed, bytes(21), ClaimedSigner.EVM_ADDRESS)
    other = PrivateKey(BTC_SECRET).public_key.format()
    with pytest.raises(InvalidSignature):
        pqc.require_signer(uncompressed, other)
    pqc.require_signer(uncompressed, pqc.hash160(uncompressed), ClaimedSigner.HASH160)
    pqc.require_signer(uncompressed, pqc.hash160(key.format()), ClaimedSigner.HASH160)
    # a recovered key in another encoding is parsed first, with the same outcomes
    pqc.require_signer(key.format(), uncompressed)
    pqc.require_signer(uncompressed[1:], pqc.evm_address(uncompressed), ClaimedSigner.EVM_ADDRESS)
    with pytest.raises(InvalidSignature):
        pqc.require_signer(key.format(), other)


def test_verify_rejects_wrong_digest_and_key() -> None:
    digest = hashlib.sha256(b"m").digest()
    signature = _sign(EIP191_KEY, digest)[:64]
    public_key = PrivateKey(EIP191_KEY).public_key.format()
    with pytest.raises(InvalidSignature) as error:
        pqc.ecdsa_verify(public_key, hashlib.sha256(b"n").digest(), signature)
    assert error.value.details["reason"] == "verification"
    with pytest.raises(InvalidSignature):
        pqc.ecdsa_verify(PrivateKey(BTC_SECRET).public_key.format(), digest, signature)
    with pytest.raises(InvalidInput):
        pqc.ecdsa_verify(public_key, digest[:31], signature)


def test_der_round_trip_and_strictness() -> None:
    digest = hashlib.sha256(b"m").digest()
    der = PrivateKey(EIP191_KEY).sign(digest, hasher=None)
    r, s = decode_der_signature(der)
    assert encode_der_signature(r, s) == der
    pqc.ecdsa_verify(PrivateKey(EIP191_KEY).public_key.format(), digest, pqc.signature_from_der(der))
    long_form = bytes([0x30, 0x81, der[1]]) + der[2:]
    padded_r = bytes([0x30, der[1] + 1, 0x02, der[3] + 1, 0x00]) + der[4:]
    bad_encodings = [
        b"",
        b"\x31" + der[1:],
        long_form,
        padded_r,
        der + b"\x00",
        der[:-1],
        bytes([0x30, der[1] + 2]) + der[2:] + b"\x05\x00",
        bytes.fromhex("3006020100020101"),  # r = 0
        bytes.fromhex("3006020181020101"),  # negative r
        bytes.fromhex("30050200020101"),  # empty INTEGER
    ]
    for bad in bad_encodings:
        with pytest.raises(MalformedSignature):
            pqc.signature_from_der(bad)
