"""Address conformance per family (EIP-55, Tron, Cosmos, Solana, Bitcoin key_io); detection and networks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from api.errors import code_of
from chains.codecs.address import Address
from chains.codecs.base58 import b58check_decode
from chains.codecs.bech32 import Encoding, decode_bytes
from chains.codecs.bitcoin import BitcoinAddress, P2PKHAddress, P2TRAddress, WitnessUnknownAddress
from chains.codecs.cosmos import CosmosAddress
from chains.codecs.detect import detect_chains, parse_address
from chains.codecs.evm import EvmAddress
from chains.codecs.solana import SolanaAddress
from chains.codecs.tron import TronAddress
from chains.errors import InvalidAddress, UnsupportedChain
from chains.observation import AccountType
from chains.registry import EVM_CHAINS, Chain, Network
from pqc.hashes import hash160, keccak256

Loader = Callable[[str], Any]

# key_io "chain" values: testnet4 and signet share the testnet formats; regtest base58
# addresses share them too, while regtest bech32 (bcrt1) is refused (no public chain).
KEY_IO_NETWORK = {
    "main": Network.MAINNET,
    "testnet4": Network.TESTNET,
    "signet": Network.TESTNET,
    "regtest": Network.TESTNET,
}


def _rejected(address: str, chain: str, network: Network = Network.MAINNET) -> InvalidAddress:
    with pytest.raises(InvalidAddress) as caught:
        parse_address(address, chain, network)
    return caught.value


# --- EVM ---------------------------------------------------------------------------------


def test_eip55_valid_addresses_are_their_own_checksum_form(load_vectors: Loader) -> None:
    vectors = load_vectors("addresses/eip55.json")
    assert len(vectors["valid"]) == 8
    for case in vectors["valid"]:
        address = parse_address(case["address"], "ethereum")
        assert str(address) == case["address"]
        assert parse_address(case["lowercase_hex"]) == address
        assert parse_address(case["lowercase_hex"].upper().replace("0X", "0x")) == address


def test_eip55_flipped_case_is_rejected_with_the_reason(load_vectors: Loader) -> None:
    for case in load_vectors("addresses/eip55.json")["invalid_derived"]:
        error = _rejected(case["address"], "ethereum")
        assert "EIP-55" in str(error) and code_of(error) == "SCAN_001"


def test_an_evm_address_is_valid_on_all_15_evm_chains_and_defaults_to_ethereum() -> None:
    text = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
    assert detect_chains(text) == list(EVM_CHAINS)
    assert parse_address(text).chain is Chain.ETHEREUM
    for chain in EVM_CHAINS:
        address = parse_address(text, chain)
        assert isinstance(address, EvmAddress) and address.chain is chain and str(address) == text


@pytest.mark.parametrize(
    "text",
    [
        "0X5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0x5aaeb6053f",
        "0x" + "g" * 40,
    ],
)
def test_malformed_evm_text(text: str) -> None:
    assert "40 hexadecimal digits" in str(_rejected(text, "base"))


# --- Tron ----------------------------------------------------------------------------------


def test_tron_vectors(load_vectors: Loader) -> None:
    vectors = load_vectors("addresses/tron.json")
    for case in vectors["valid"]:
        address = parse_address(case["base58"])
        assert isinstance(address, TronAddress)
        assert "41" + address.payload.hex() == case["hex"] and str(address) == case["base58"]
        if "public_key_uncompressed_xy" in case:
            assert keccak256(bytes.fromhex(case["public_key_uncompressed_xy"]))[-20:] == address.payload
    for case in vectors["invalid_derived"]:
        _rejected(case["string"], "tron")
    assert parse_address("TQHAvs2ZFTbsd93ycTfw1Wuf1e4WsPZWCp", "tron", Network.TESTNET).network is Network.TESTNET


def test_tron_errors_name_the_broken_rule() -> None:
    assert "checksum" in str(_rejected("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u", "tron"))
    assert "0x41" in str(_rejected("1G9AHnMvAgqKJ2eWErupYfdzu6hgW14EeZ", "tron"))
    assert "20" in str(_rejected("6z7t3TSyVBs8aaTzWUzfkus6r92s6MS25", "tron"))


# --- Cosmos --------------------------------------------------------------------------------


def test_cosmos_accounts_and_their_key_hashes(load_vectors: Loader) -> None:
    vectors = load_vectors("addresses/cosmos.json")
    pairs = [(c["address"], c["address_bytes_hex"], c["pubkey_hex"]) for c in vectors["accounts_with_pubkey"]]
    pairs += [
        (c["address"], c["address_bytes_hex"], c["pubkey_hex"]) for c in vectors["multi_hrp_pubkey_vectors"]["vectors"]
    ]
    legacy = vectors["legacy_bech32_pubkey"]
    pairs.append((legacy["derived_address"], None, legacy["pubkey_hex"]))
    for text, payload_hex, pubkey_hex in pairs:
        hrp, payload = decode_bytes(text, Encoding.BECH32)
        assert payload == hash160(bytes.fromhex(pubkey_hex)) and payload.hex() == (payload_hex or payload.hex())
        if hrp == "cosmos":
            address = parse_address(text)
            assert isinstance(address, CosmosAddress) and address.payload == payload and str(address) == text
        else:
            assert "human-readable part" in str(_rejected(text, "cosmos"))
    for case in vectors["address_bytes"]:
        assert parse_address(case["address"], "cosmos").payload.hex() == case["bytes_hex"]
    hrp, amino = decode_bytes(legacy["bech32_pubkey"], Encoding.BECH32)
    assert (hrp, amino.hex()) == (legacy["hrp"], legacy["amino_prefix_hex"] + legacy["pubkey_hex"])


def test_cosmos_invalid_strings(load_vectors: Loader) -> None:
    for case in load_vectors("addresses/cosmos.json")["invalid_derived"]:
        _rejected(case["string"], "cosmos")
    assert "bech32 checksum required" in str(_rejected("cosmos1vv6hruquzpty4xpks9znkw8gys5x4nsn4j49s5", "cosmos"))


def test_cosmos_32_byte_module_accounts_round_trip() -> None:
    address = CosmosAddress(bytes(range(32)), Chain.COSMOS, Network.MAINNET)
    assert parse_address(str(address)) == address


# --- Solana --------------------------------------------------------------------------------


def test_solana_keys_and_curve_check(load_vectors: Loader) -> None:
    vectors = load_vectors("addresses/solana.json")
    cases = [(c["base58"], c["hex"], c["is_on_curve"]) for c in vectors["valid"]]
    cases += [(c["address"], c["hex"], c["is_on_curve"]) for c in vectors["program_derived_addresses"]]
    for key in ("create_with_seed", "find_program_address_derived"):
        cases += [(c["address"], None, c["is_on_curve"]) for c in vectors[key]]
    for text, hex_, on_curve in cases:
        address = parse_address(text)
        assert isinstance(address, SolanaAddress) and str(address) == text
        assert address.payload.hex() == (hex_ or address.payload.hex())
        assert address.is_on_curve is on_curve
        assert address.account_type is (AccountType.EOA if on_curve else AccountType.PDA)


def test_solana_invalid(load_vectors: Loader) -> None:
    vectors = load_vectors("addresses/solana.json")
    for case in vectors["invalid_derived"]:
        with pytest.raises(InvalidAddress):
            parse_address(case["string"], "solana")
    for case in vectors["invalid_bytes"]:
        with pytest.raises(InvalidAddress, match="33 bytes"):
            SolanaAddress(bytes.fromhex(case["hex"]), Chain.SOLANA, Network.MAINNET)


# --- Bitcoin (Bitcoin Core key_io vectors) ---------------------------------------------------


def _key_io_addresses(load_vectors: Loader) -> list[tuple[str, str, dict[str, Any]]]:
    entries = load_vectors("bitcoin/key_io_valid.json")
    assert len(entries) == 70
    return [(text, script, meta) for text, script, meta in entries if not meta["isPrivkey"]]


def test_key_io_valid_addresses(load_vectors: Loader) -> None:
    checked = 0
    for text, script_hex, meta in _key_io_addresses(load_vectors):
        network = KEY_IO_NETWORK[meta["chain"]]
        if text.startswith("bcrt1"):
            for net in Network:
                assert "regtest" in str(_rejected(text, "bitcoin", net))
            continue
        address = parse_address(text, "bitcoin", network)
        assert isinstance(address, BitcoinAddress)
        assert address.script_pubkey.hex() == script_hex
        assert str(address) == (text.lower() if meta.get("tryCaseFlip") else text)
        assert str(BitcoinAddress.from_script_pubkey(bytes.fromhex(script_hex), network)) == str(address)
        if meta.get("tryCaseFlip"):
            assert parse_address(text.swapcase(), "bitcoin", network) == address
        other = Network.TESTNET if network is Network.MAINNET else Network.MAINNET
        assert f"this is a {network} address" in str(_rejected(text, "bitcoin", other))
        checked += 1
    assert checked == 46  # 54 address entries (16 WIF keys skipped) less the 8 regtest bech32 ones


def test_key_io_invalid_strings_are_rejected_on_every_network(load_vectors: Loader) -> None:
    entries = load_vectors("bitcoin/key_io_invalid.json")
    assert len(entries) == 79
    for (text,) in entries:
        for network in Network:
            with pytest.raises(InvalidAddress):
                parse_address(text, "bitcoin", network)
            assert Chain.BITCOIN not in detect_chains(text, network)


def test_typed_decode_requires_the_type() -> None:
    text = "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0"
    assert isinstance(P2TRAddress.decode(text), P2TRAddress)
    with pytest.raises(InvalidAddress, match="p2tr address, not a P2PKHAddress"):
        P2PKHAddress.decode(text)


def test_witness_unknown_keeps_its_version() -> None:
    address = parse_address("BC1SW50QGDZ25J")
    assert isinstance(address, WitnessUnknownAddress)
    assert (address.witness_version, address.payload.hex(), address.script_pubkey.hex()) == (16, "751e", "6002751e")


def test_scripts_without_address_form() -> None:
    p2pk = bytes.fromhex("2102f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9ac")
    with pytest.raises(InvalidAddress, match="p2pk output scripts have no address form"):
        BitcoinAddress.from_script_pubkey(p2pk)


def test_testnet_base58_version_bytes_on_mainnet() -> None:
    error = _rejected("mzK2FFDEhxqHcmrJw1ysqFkVyhUULo45hZ", "bitcoin")
    assert "network='testnet'" in str(error) and error.details["chain"] == "bitcoin"
    assert b58check_decode("mzK2FFDEhxqHcmrJw1ysqFkVyhUULo45hZ")[0] == 0x6F


# --- detection and general rules ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "chain"),
    [
        ("1FsSia9rv4NeEwvJ2GvXrX7LyxYspbN2mo", Chain.BITCOIN),
        ("bc1qvyq0cc6rahyvsazfdje0twl7ez82ndmuac2lhv", Chain.BITCOIN),
        ("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", Chain.TRON),
        ("cosmos1vv6hruquzpty4xpks9znkw8gys5x4nsnqw9f4k", Chain.COSMOS),
        ("vines1vzrYbzLMRdu58ou5XTby4qAqVRLmqo36NKPTg", Chain.SOLANA),
        ("11111111111111111111111111111111", Chain.SOLANA),
    ],
)
def test_non_evm_addresses_detect_to_exactly_one_chain(text: str, chain: Chain) -> None:
    assert detect_chains(text) == [chain]
    assert parse_address(text).chain is chain


def test_testnet_addresses_need_the_testnet_network() -> None:
    text = "tb1qcrh3yqn4nlleplcez2yndq2ry8h9ncg3qh7n54"
    assert detect_chains(text) == []
    assert "this is a testnet address but a mainnet scan" in str(_rejected(text, "bitcoin"))
    assert detect_chains(text, Network.TESTNET) == [Chain.BITCOIN]
    assert parse_address(text, network=Network.TESTNET).network is Network.TESTNET


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        (" 1FsSia9rv4NeEwvJ2GvXrX7LyxYspbN2mo", "whitespace"),
        ("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed\n", "whitespace"),
        ("x" * 101, "101 characters"),
        ("hello", "matches no supported format"),
        ("1FsSia9rv4NeEwvJ2GvXrX7LyxYspbN2mp", "not a valid bitcoin address: bad base58check checksum"),
    ],
)
def test_detection_failures_say_why(text: str, reason: str) -> None:
    with pytest.raises(InvalidAddress, match=reason):
        parse_address(text)
    assert detect_chains(text) == []


def test_wrong_family_for_an_explicit_chain() -> None:
    assert "40 hexadecimal digits" in str(_rejected("1FsSia9rv4NeEwvJ2GvXrX7LyxYspbN2mo", "polygon"))
    with pytest.raises(UnsupportedChain):
        parse_address("1FsSia9rv4NeEwvJ2GvXrX7LyxYspbN2mo", "dogecoin")


def test_addresses_are_values() -> None:
    a: Address = parse_address("0x52908400098527886E0F7030069857D2E4169EE7")
    assert a == parse_address("0x52908400098527886e0f7030069857d2e4169ee7")
    assert a != parse_address("0x52908400098527886E0F7030069857D2E4169EE7", "base")
    assert len({a, parse_address("0x52908400098527886e0f7030069857d2e4169ee7")}) == 1


def test_every_valid_conformance_address_detects_to_its_own_family_only(load_vectors: Loader) -> None:
    expected: dict[str, list[Chain]] = {}
    expected |= {c["address"]: list(EVM_CHAINS) for c in load_vectors("addresses/eip55.json")["valid"]}
    expected |= {c["base58"]: [Chain.TRON] for c in load_vectors("addresses/tron.json")["valid"]}
    expected |= {c["base58"]: [Chain.SOLANA] for c in load_vectors("addresses/solana.json")["valid"]}
    cosmos = load_vectors("addresses/cosmos.json")["accounts_with_pubkey"]
    expected |= {c["address"]: [Chain.COSMOS] for c in cosmos if c["hrp"] == "cosmos"}
    mainnet = [text for text, _, meta in _key_io_addresses(load_vectors) if meta["chain"] == "main"]
    expected |= {text: [Chain.BITCOIN] for text in mainnet}
    assert len(expected) == 8 + 5 + 8 + 2 + len(mainnet)
    assert {text: detect_chains(text) for text in expected} == expected
