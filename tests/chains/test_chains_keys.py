"""Key families (chains/keys.py): every form of a key, checked against public vectors,
and the property that every form derived from one key lands in one family."""

from __future__ import annotations

from typing import Any

import pytest
from coincurve import PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from chains.codecs.detect import parse_address
from chains.errors import InvalidAddress
from chains.keys import (
    KeyForm,
    KeyType,
    hash160_family,
    keccak_family,
    key_addresses,
    parse_public_key,
    taproot_output_key,
)
from chains.registry import EVM_CHAINS, Chain, Network
from pqc.errors import InvalidKeyFormat

#: The block-9 coinbase key (Satoshi's coins spent to Hal Finney in block 170): public in a
#: P2PK output since 2009; its uncompressed P2PKH is the classic "looks unspent" address.
BLOCK9_P2PK = bytes.fromhex(
    "410411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5cb2e0eaddfb84ccf9744464f82e160bfa9b8b64"
    "f9d4c03f999b8643f656b412a3ac"
)


def _by_form(key_hex: str, network: Network = Network.MAINNET) -> dict[KeyForm, list[str]]:
    out: dict[KeyForm, list[str]] = {}
    for place in key_addresses(parse_public_key(bytes.fromhex(key_hex)), network):
        out.setdefault(place.form, []).append(place.text)
    return out


def test_block9_key_in_every_form_including_its_p2pk_output(load_vectors: Any) -> None:
    block9 = next(t for t in load_vectors("bitcoin/transactions.json") if t["name"] == "block9_coinbase")
    script = bytes.fromhex(block9["outputs"][0]["script_pubkey"])
    assert script == BLOCK9_P2PK
    forms = _by_form(script[1:66].hex())
    assert forms[KeyForm.P2PK_UNCOMPRESSED] == [script.hex()]  # the very output of block 9
    assert forms[KeyForm.P2PKH_UNCOMPRESSED] == ["12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S"]
    # The compressed encoding is the same key: listed with it, never a second key.
    assert forms[KeyForm.P2PK][0] == "21" + parse_public_key(script[1:66]).compressed.hex() + "ac"


def test_bip84_p2wpkh_and_bip49_nested_p2wpkh(load_vectors: Any) -> None:
    for entry in load_vectors("wallets/bip84.json")["addresses"]:
        assert _by_form(entry["pubkey"])[KeyForm.P2WPKH] == [entry["address"]]
    fields = {f["name"]: f["value"] for g in load_vectors("wallets/bip49.json")["groups"] for f in g["fields"]}
    nested = _by_form(fields["account0recvPublicKeyHex"], Network.TESTNET)[KeyForm.P2SH_P2WPKH]
    assert nested == [fields["address"]]


def test_bip86_output_keys_and_addresses(load_vectors: Any) -> None:
    for entry in load_vectors("wallets/bip86.json")["addresses"]:
        internal = bytes.fromhex(entry["internal_key"])
        assert taproot_output_key(internal).hex() == entry["output_key"]
        # Either parity of the internal key gives the same output key (BIP-340 x-only).
        key = parse_public_key(b"\x03" + internal)
        assert _by_form(key.compressed.hex())[KeyForm.P2TR] == [entry["address"]]


def test_tron_and_evm_share_the_keccak_account(load_vectors: Any) -> None:
    for entry in load_vectors("addresses/tron.json")["valid"]:
        if "public_key_uncompressed_xy" not in entry:
            continue
        forms = _by_form(entry["public_key_uncompressed_xy"])
        assert forms[KeyForm.TRON] == [entry["base58"]]
        assert {a.lower() for a in forms[KeyForm.EVM]} == {"0x" + entry["hex"][2:]}
        assert len(forms[KeyForm.EVM]) == len(EVM_CHAINS) == 15


def test_cosmos_accounts_of_their_public_keys(load_vectors: Any) -> None:
    for entry in load_vectors("addresses/cosmos.json")["accounts_with_pubkey"]:
        if entry["hrp"] == "cosmos":
            assert _by_form(entry["pubkey_hex"])[KeyForm.COSMOS] == [entry["address"]]


def test_solana_keys_on_the_curve_and_pdas_refused(load_vectors: Any) -> None:
    vectors = load_vectors("addresses/solana.json")
    for entry in vectors["valid"]:
        raw = bytes.fromhex(entry["hex"])
        if entry["is_on_curve"]:
            key = parse_public_key(raw)
            assert key.key_type is KeyType.ED25519
            assert [(p.chain, p.form, p.text) for p in key_addresses(key)] == [
                (Chain.SOLANA, KeyForm.SOLANA, entry["base58"])
            ]
        else:
            with pytest.raises(InvalidKeyFormat, match="ed25519"):
                parse_public_key(raw)
    for pda in vectors["program_derived_addresses"]:
        with pytest.raises(InvalidKeyFormat):  # no private key exists for a PDA: not a key
            parse_public_key(bytes.fromhex(pda["hex"]))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\x02" + b"\x00" * 32, "secp256k1"),  # x = 0 is not on the curve
        (b"\x04" + b"\x01" * 64, "secp256k1"),
        (b"\x05" + b"\x11" * 32, "secp256k1"),  # no such SEC prefix
        (b"\x02" * 20, "33 or 65 bytes"),
        (b"", "33 or 65 bytes"),
    ],
)
def test_keys_that_are_not_points_are_refused(raw: bytes, message: str) -> None:
    with pytest.raises(InvalidKeyFormat, match=message):
        parse_public_key(raw)


def test_x_y_without_prefix_is_the_uncompressed_key() -> None:
    key = PrivateKey(b"\x01" * 32).public_key
    assert parse_public_key(key.format(compressed=False)[1:]) == parse_public_key(key.format(compressed=True))


@settings(max_examples=40, deadline=None)
@given(secret=st.integers(min_value=1, max_value=2**255), compressed=st.booleans())
def test_every_form_of_one_key_lands_in_one_family(secret: int, compressed: bool) -> None:
    """Both encodings give one key; every address it controls decodes back and its
    hash or account family contains its siblings."""
    point = PrivateKey(secret.to_bytes(32, "big")).public_key
    key = parse_public_key(point.format(compressed=compressed))
    assert key == parse_public_key(point.format(compressed=not compressed))
    places = key_addresses(key)
    assert len(places) == 7 + len(EVM_CHAINS) + 2
    by_form = {p.form: p for p in places}
    for place in places:
        if place.address is not None:
            assert parse_address(place.text, place.chain) == place.address
    hash_forms = (KeyForm.P2PKH, KeyForm.P2WPKH, KeyForm.P2SH_P2WPKH, KeyForm.COSMOS)
    compressed_forms = [by_form[f].address for f in hash_forms]
    for member in compressed_forms[:2] + compressed_forms[3:]:
        assert member is not None and hash160_family(member) == compressed_forms
    evm = [p.address for p in places if p.form in (KeyForm.EVM, KeyForm.TRON)]
    for member in evm:
        assert member is not None and keccak_family(member) == evm


def test_families_of_addresses_without_a_key_hash_are_refused() -> None:
    p2tr = parse_address("bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr", Chain.BITCOIN)
    with pytest.raises(InvalidAddress, match="no key-hash family"):
        hash160_family(p2tr)
    with pytest.raises(InvalidAddress, match="no keccak family"):
        keccak_family(p2tr)
    nested = parse_address("3JvL6Ymt8MVWiCNHC7oWU6nLeHNJKLZGLN", Chain.BITCOIN)
    assert hash160_family(nested) == [nested]  # its script is unknown: no siblings can be named
