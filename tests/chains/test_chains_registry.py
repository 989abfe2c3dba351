"""The 19 chains, their categories as the spec lists them, and the error codes."""

from __future__ import annotations

import pytest

from api.errors import code_of
from chains.errors import AddressNotFound, ChainUnavailable, InvalidAddress, MalformedChainData, UnsupportedChain
from chains.registry import CHAINS, EVM_CHAINS, Category, Chain, Family, parse_chain

# The spec's scan-endpoint table (polygon and zksync are labelled ZK L2 there).
SPEC_CATEGORIES = {
    Category.MAJOR: {"ethereum", "bitcoin", "solana"},
    Category.EVM_L2: {"base", "arbitrum", "optimism", "linea", "scroll", "mantle", "blast", "sonic"},
    Category.ZK_L2: {"polygon", "zksync"},
    Category.EVM_L1: {"gnosis", "celo", "bsc", "avalanche"},
    Category.NON_EVM: {"cosmos", "tron"},
}


def test_nineteen_chains_in_their_spec_categories() -> None:
    assert len(CHAINS) == 19
    for category, names in SPEC_CATEGORIES.items():
        assert {str(c) for c, info in CHAINS.items() if info.category is category} == names


def test_evm_chains_share_one_family_and_have_distinct_chain_ids() -> None:
    assert len(EVM_CHAINS) == 15
    assert EVM_CHAINS[0] is Chain.ETHEREUM
    ids = [chain.info.evm_chain_id for chain in EVM_CHAINS]
    assert None not in ids and len(set(ids)) == 15
    assert all(info.evm_chain_id is None for info in CHAINS.values() if info.family is not Family.EVM)


def test_native_coins() -> None:
    assert (Chain.BITCOIN.info.symbol, Chain.BITCOIN.info.decimals) == ("BTC", 8)
    assert (Chain.SOLANA.info.symbol, Chain.SOLANA.info.decimals) == ("SOL", 9)
    assert (Chain.COSMOS.info.symbol, Chain.COSMOS.info.decimals) == ("ATOM", 6)
    assert (Chain.TRON.info.symbol, Chain.TRON.info.decimals) == ("TRX", 6)
    assert all(chain.info.decimals == 18 for chain in EVM_CHAINS)


def test_category_labels_are_the_spec_wording() -> None:
    assert [c.label for c in Category] == ["Major", "EVM L2", "ZK L2", "EVM L1", "Non-EVM"]


@pytest.mark.parametrize("name", ["ethereum", "Ethereum", "BSC", "tron"])
def test_parse_chain_accepts_spec_values_in_any_case(name: str) -> None:
    assert parse_chain(name) is Chain(name.lower())


@pytest.mark.parametrize("name", ["", "eth", "dogecoin", " ethereum", "ethereum "])
def test_parse_chain_refuses_unknown_chains_with_scan_002(name: str) -> None:
    with pytest.raises(UnsupportedChain) as caught:
        parse_chain(name)
    assert code_of(caught.value) == "SCAN_002"
    assert caught.value.details["supported"] == [str(c) for c in CHAINS]


def test_error_codes_follow_the_spec() -> None:
    assert [code_of(e("x")) for e in (InvalidAddress, UnsupportedChain, AddressNotFound, ChainUnavailable)] == [
        "SCAN_001",
        "SCAN_002",
        "SCAN_003",
        "SCAN_004",
    ]
    assert code_of(MalformedChainData("x")) == "SCAN_004"
    error = InvalidAddress("bad checksum", chain="bitcoin")
    assert (str(error), error.details) == ("bad checksum", {"chain": "bitcoin"})
