"""BIP-173/BIP-350 conformance: bech32/bech32m strings, segwit addresses and encodings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chains.bitcoin.script import witness_script_pubkey
from chains.codecs.bech32 import (
    Bech32Error,
    Encoding,
    WitnessProgram,
    convertbits,
    decode,
    decode_segwit,
    encode,
    encode_segwit,
)
from chains.codecs.bitcoin import BitcoinAddress
from chains.errors import InvalidAddress
from chains.registry import Network

NETWORK_OF_HRP = {"bc": Network.MAINNET, "tb": Network.TESTNET}


@pytest.fixture(scope="module")
def vectors(load_vectors: Callable[[str], Any]) -> Any:
    return load_vectors("addresses/bech32.json")


def _rejected_everywhere(address: str) -> bool:
    for network in Network:
        try:
            BitcoinAddress.decode(address, network=network)
        except InvalidAddress:
            continue
        return False
    return True


@pytest.mark.parametrize(("key", "encoding"), [("valid_bech32", Encoding.BECH32), ("valid_bech32m", Encoding.BECH32M)])
def test_valid_strings_decode_and_reencode(vectors: Any, key: str, encoding: Encoding) -> None:
    assert vectors[key]
    for text in vectors[key]:
        decoded = decode(text)
        assert decoded.encoding is encoding, text
        assert encode(decoded.hrp, decoded.data, encoding) == text.lower()


@pytest.mark.parametrize(
    ("key", "encoding"), [("invalid_bech32", Encoding.BECH32), ("invalid_bech32m", Encoding.BECH32M)]
)
def test_invalid_strings_never_decode_as_their_variant(vectors: Any, key: str, encoding: Encoding) -> None:
    """As the reference tests: either decoding fails, or it yields the other variant."""
    for case in vectors[key]:
        try:
            decoded = decode(case["string"])
        except Bech32Error:
            continue
        assert decoded.encoding is not encoding, case


def test_valid_segwit_addresses(vectors: Any) -> None:
    for case in vectors["valid_segwit_addresses"]:
        hrp, witness = decode_segwit(case["address"])
        assert (hrp, witness.version, len(witness.program)) == (
            case["hrp"],
            case["witness_version"],
            case["program_length"],
        )
        assert witness_script_pubkey(witness.version, witness.program).hex() == case["script_pubkey"]
        assert encode_segwit(hrp, witness) == case["address"].lower()
        address = BitcoinAddress.decode(case["address"], network=NETWORK_OF_HRP[hrp])
        assert address.script_pubkey.hex() == case["script_pubkey"]
        assert str(address) == case["address"].lower()


def test_invalid_segwit_addresses_are_rejected_on_every_network(vectors: Any) -> None:
    failures = [case for case in vectors["invalid_segwit_addresses"] if not _rejected_everywhere(case["address"])]
    assert not failures


def test_checksum_variant_errors_say_which_variant_is_required(vectors: Any) -> None:
    wrong_variant = [c for c in vectors["invalid_segwit_addresses"] if c["reason"].startswith("Invalid checksum (")]
    assert len(wrong_variant) == 5
    for case in wrong_variant:
        with pytest.raises(Bech32Error, match=r"checksum required for witness v\d+"):
            decode_segwit(case["address"])


def test_invalid_segwit_encodings_fail(vectors: Any) -> None:
    for case in vectors["invalid_segwit_address_encodings"]:
        with pytest.raises(Bech32Error):
            encode_segwit(case["hrp"], WitnessProgram(case["witness_version"], bytes(case["program_length"])))


def test_bip173_original_vectors_under_bip350(vectors: Any) -> None:
    original = vectors["bip173_original_segwit_vectors"]
    for case in original["valid_in_bip173"]:
        if case["valid_under_bip350"]:
            _, witness = decode_segwit(case["address"])
            assert witness_script_pubkey(witness.version, witness.program).hex() == case["script_pubkey"]
        else:
            assert _rejected_everywhere(case["address"]), case
    assert all(_rejected_everywhere(case["address"]) for case in original["invalid_in_bip173"])


@given(st.binary(max_size=90))
@settings(max_examples=300)
def test_whole_bytes_regroup_as_the_bit_loop_does(data: bytes) -> None:
    """The encoder's 8-to-5 fast path (one big-integer pass) equals BIP-173's bit loop."""
    assert convertbits(data, 8, 5, pad=True) == convertbits(list(data), 8, 5, pad=True)
