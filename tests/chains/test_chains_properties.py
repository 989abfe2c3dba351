"""Property tests: parsing never fails in an unexpected way, and codecs round-trip."""

from __future__ import annotations

import contextlib

from hypothesis import given
from hypothesis import strategies as st

from chains.bitcoin.exposure import SpendHistory, exposure_with_history
from chains.bitcoin.script import OutputType, classify_script
from chains.bitcoin.spend import analyze_input
from chains.bitcoin.tx import TxIn, parse_transaction
from chains.codecs.address import Address
from chains.codecs.base58 import ALPHABET, b58decode, b58encode
from chains.codecs.bech32 import CHARSET, Bech32Error, Encoding, decode, encode
from chains.codecs.bitcoin import (
    P2MRAddress,
    P2PKHAddress,
    P2SHAddress,
    P2TRAddress,
    P2WPKHAddress,
    P2WSHAddress,
    SegwitAddress,
)
from chains.codecs.cosmos import CosmosAddress
from chains.codecs.detect import parse_address
from chains.codecs.evm import EvmAddress
from chains.codecs.solana import SolanaAddress
from chains.codecs.tron import TronAddress
from chains.errors import InvalidAddress, MalformedChainData, UnsupportedChain
from chains.observation import Exposure
from chains.registry import EVM_CHAINS, Chain, Network

networks = st.sampled_from(list(Network))
chains = st.one_of(st.none(), st.sampled_from(list(Chain)), st.sampled_from(["Ethereum", "dogecoin", ""]))

# Text drawn to reach past the first checks of each codec, plus arbitrary Unicode.
address_like = st.one_of(
    st.text(max_size=120),
    st.text(alphabet=ALPHABET, min_size=20, max_size=50),
    st.builds(
        lambda hrp, body: hrp + body,
        st.sampled_from(["bc1", "tb1", "BC1", "bcrt1", "cosmos1"]),
        st.text(alphabet=CHARSET, max_size=70),
    ),
    st.builds(lambda body: "0x" + body, st.text(alphabet="0123456789abcdefABCDEF", min_size=38, max_size=42)),
    st.builds(lambda body: "T" + body, st.text(alphabet=ALPHABET, min_size=32, max_size=34)),
)


@given(address_like, chains, networks)
def test_any_text_gives_an_address_or_a_scan_error(text: str, chain: Chain | str | None, network: Network) -> None:
    try:
        address = parse_address(text, chain, network)
    except (InvalidAddress, UnsupportedChain):
        return
    assert isinstance(address, Address)
    assert parse_address(str(address), address.chain, network) == address


def _bitcoin_addresses() -> st.SearchStrategy[Address]:
    fixed = st.one_of(
        *(
            st.builds(cls, st.binary(min_size=size, max_size=size), st.just(Chain.BITCOIN), networks)
            for cls, size in [
                (P2PKHAddress, 20),
                (P2SHAddress, 20),
                (P2WPKHAddress, 20),
                (P2WSHAddress, 32),
                (P2TRAddress, 32),
                (P2MRAddress, 32),
            ]
        )
    )
    unknown = st.builds(
        lambda version, program, network: SegwitAddress.build(version, program, Chain.BITCOIN, network),
        st.integers(1, 16),
        st.binary(min_size=2, max_size=40),
        networks,
    )
    return st.one_of(fixed, unknown)


valid_addresses = st.one_of(
    st.builds(EvmAddress, st.binary(min_size=20, max_size=20), st.sampled_from(EVM_CHAINS), networks),
    st.builds(TronAddress, st.binary(min_size=20, max_size=20), st.just(Chain.TRON), networks),
    st.builds(
        CosmosAddress,
        st.one_of(st.binary(min_size=20, max_size=20), st.binary(min_size=32, max_size=32)),
        st.just(Chain.COSMOS),
        networks,
    ),
    st.builds(SolanaAddress, st.binary(min_size=32, max_size=32), st.just(Chain.SOLANA), networks),
    _bitcoin_addresses(),
)


@given(valid_addresses)
def test_addresses_round_trip_through_their_text(address: Address) -> None:
    text = str(address)
    decoded = parse_address(text, address.chain, address.network)
    assert decoded == address and str(decoded) == text
    if address.chain in EVM_CHAINS:
        assert parse_address(text.lower(), address.chain) == EvmAddress(address.payload, address.chain, Network.MAINNET)


@given(st.binary(max_size=64))
def test_base58_round_trip(data: bytes) -> None:
    assert b58decode(b58encode(data)) == data


@given(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=10),
    st.lists(st.integers(0, 31), max_size=40),
    st.sampled_from(list(Encoding)),
)
def test_bech32_round_trip(hrp: str, data: list[int], encoding: Encoding) -> None:
    text = encode(hrp, data, encoding)
    decoded = decode(text)
    assert (decoded.hrp, list(decoded.data), decoded.encoding) == (hrp, data, encoding)
    assert decode(text.upper()) == decoded


@given(st.text(max_size=100))
def test_bech32_decode_only_raises_bech32_error(text: str) -> None:
    with contextlib.suppress(Bech32Error):
        decode(text)


@given(st.binary(max_size=80))
def test_any_script_is_classified(script: bytes) -> None:
    assert classify_script(script).output_type in OutputType


@given(
    st.builds(
        TxIn,
        st.sampled_from(["00" * 32, "11" * 32]),
        st.sampled_from([0, 0xFFFFFFFF]),
        st.binary(max_size=120),
        st.just(0xFFFFFFFF),
        st.lists(st.binary(max_size=70), max_size=4).map(tuple),
    ),
    st.one_of(st.none(), st.binary(max_size=40)),
)
def test_any_input_is_analysed(txin: TxIn, prevout: bytes | None) -> None:
    disclosure = analyze_input(txin, prevout)
    assert all(len(key) in (32, 33, 65) for key in disclosure.revealed_keys)


@given(st.binary(max_size=300))
def test_random_bytes_are_a_transaction_or_malformed(raw: bytes) -> None:
    with contextlib.suppress(MalformedChainData):
        parse_transaction(raw)


@given(
    st.sampled_from(list(OutputType)),
    st.one_of(st.none(), st.integers(0, 10)),
    st.booleans(),
)
def test_exposure_never_reads_missing_data_as_safe(
    output_type: OutputType, spent_count: int | None, reused: bool
) -> None:
    level = exposure_with_history(output_type, SpendHistory(spent_count=spent_count, key_disclosed_elsewhere=reused))
    assert level is not Exposure.NOT_EXPOSED
