"""The exposure-index rows of real blocks: which keys each transaction reveals, and their HASH160s."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import coincurve
import pytest

from chains.bitcoin.revelations import (
    Revelation,
    RevelationKind,
    address_hashes,
    block_revelations,
    key_hashes,
    transaction_revelations,
)
from chains.bitcoin.script import push_items
from chains.bitcoin.spend import SpendType, analyze_input
from chains.bitcoin.tx import Block, Transaction, TxOut, parse_block, parse_transaction
from chains.codecs.bitcoin import BitcoinAddress
from chains.registry import Network
from pqc.hashes import hash160

Loader = Callable[[str], Any]

BLOCK9_KEY = bytes.fromhex(
    "0411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5c"
    "b2e0eaddfb84ccf9744464f82e160bfa9b8b64f9d4c03f999b8643f656b412a3"
)
BLOCK9_P2PKH = "12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S"
BLOCK170_SPEND = "f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16"
BLOCK170_COINBASE = "b1fea52486ce0c62bb442b530a3f0132b826c74e473d1f2c220bfa78111c5082"
# A one-input P2WPKH spend in block 702861 and the key its witness shows.
P2WPKH_TXID = "7bf717689b9033eafb2f3272719989b304bb7db616c2bfb5ded2e1b76d50a4f0"
P2WPKH_KEY = bytes.fromhex("02dfaba46d2417eee4661d45a6ab44f15cf2c77377045c678c926142b6b611ab9e")


@pytest.fixture(scope="module")
def blocks(conformance_dir: Path) -> Callable[[str], tuple[bytes, Block]]:
    cache: dict[str, tuple[bytes, Block]] = {}

    def load(name: str) -> tuple[bytes, Block]:
        if name not in cache:
            raw = (conformance_dir / "bitcoin" / "blocks" / name).read_bytes()
            cache[name] = (raw, parse_block(raw))
        return cache[name]

    return load


def _address_program(address: str) -> bytes:
    return BitcoinAddress.decode(address, network=Network.MAINNET).payload


def _check_row(row: Revelation) -> None:
    """Both HASH160 columns follow from the key, whichever encoding appeared."""
    if len(row.pubkey) == 32:
        assert row.hash160 == hash160(b"\x02" + row.pubkey)
        assert row.hash160_uncompressed is None
        return
    point = coincurve.PublicKey(row.pubkey)
    assert row.hash160 == hash160(point.format(compressed=True))
    assert row.hash160_uncompressed == hash160(point.format(compressed=False))


def test_key_hashes_of_both_encodings_of_the_block9_key() -> None:
    compressed = coincurve.PublicKey(BLOCK9_KEY).format(compressed=True)
    hashes = key_hashes(BLOCK9_KEY)
    assert hashes == key_hashes(compressed)
    assert hashes is not None
    assert hashes[1] == _address_program(BLOCK9_P2PKH) == hash160(BLOCK9_KEY)
    assert hashes[0] == hash160(compressed) != hashes[1]


def test_key_hashes_of_hybrid_and_x_only_keys() -> None:
    uncompressed = bytearray(BLOCK9_KEY)
    uncompressed[0] = 6 + (uncompressed[-1] & 1)  # the hybrid encoding of the same point
    assert key_hashes(bytes(uncompressed)) == key_hashes(BLOCK9_KEY)
    x = BLOCK9_KEY[1:33]
    assert key_hashes(x) == (hash160(b"\x02" + x), None)


@pytest.mark.parametrize(
    "key",
    [
        b"\x02" + bytes(32),  # x = 0 is not on secp256k1
        b"\x03" + b"\xff" * 32,  # x >= p
        bytes(32),  # x-only with no point
        b"\x04" + BLOCK9_KEY[1:33] + bytes(32),  # wrong y
        BLOCK9_KEY[:20],  # no key size
        b"",
    ],
)
def test_key_hashes_refuses_what_is_not_a_point(key: bytes) -> None:
    assert key_hashes(key) is None


def test_block170_shows_the_block9_key_in_an_output_and_its_p2pk_spend_reveals_nothing(blocks: Any) -> None:
    _, block = blocks("block170.raw")
    rows = list(block_revelations(block, 170))
    assert {(row.txid, row.pubkey[:5].hex(), row.kind) for row in rows} == {
        (BLOCK170_COINBASE, "04d46c4968", RevelationKind.OUTPUT),
        (BLOCK170_SPEND, "04ae1a62fe", RevelationKind.OUTPUT),
        (BLOCK170_SPEND, BLOCK9_KEY[:5].hex(), RevelationKind.OUTPUT),
    }
    spend = next(tx for tx in block.transactions if tx.txid == BLOCK170_SPEND)
    disclosure = analyze_input(spend.inputs[0])
    assert (disclosure.spend_type, disclosure.revealed_keys, disclosure.inferred) == (SpendType.P2PK, (), True)
    block9 = next(row for row in rows if row.pubkey == BLOCK9_KEY)
    assert block9.hash160_uncompressed == _address_program(BLOCK9_P2PKH)
    assert all(row.height == 170 for row in rows)
    for row in rows:
        _check_row(row)


def test_block702861_lists_every_p2wpkh_and_nested_key(blocks: Any) -> None:
    raw, block = blocks("mainnet_block_0c835b.raw")
    rows = list(block_revelations(block, None))
    inputs = {(row.txid, row.pubkey) for row in rows if row.kind is RevelationKind.INPUT}
    assert len(inputs) == len(rows)  # no P2PK, bare multisig or P2TR output in this pre-taproot block
    assert all(row.height is None for row in rows)
    # The chosen P2WPKH spend: its witness key is in the raw bytes as a 33-byte witness item.
    assert b"\x21" + P2WPKH_KEY in raw
    assert (P2WPKH_TXID, P2WPKH_KEY) in inputs
    # Decoded here from the raw fields: native P2WPKH (empty scriptSig, [sig, key]) and
    # nested P2SH-P2WPKH (scriptSig pushing 0x0014<hash>, whose hash commits to the key).
    native = nested = 0
    checked: set[tuple[str, bytes]] = set()
    for tx in block.transactions[1:]:
        for txin in tx.inputs:
            if len(txin.witness) != 2 or len(txin.witness[1]) != 33:
                continue
            key = txin.witness[1]
            if not txin.script_sig:
                native += 1
            elif txin.script_sig[:3] == b"\x16\x00\x14":
                assert txin.script_sig[3:] == hash160(key)
                nested += 1
            else:
                continue
            checked.add((tx.txid, key))
    assert checked <= inputs
    assert native > 2000 and nested > 1000
    spends = sum(len(tx.inputs) for tx in block.transactions[1:])
    # Multisig scripts add keys; a key spent twice by one transaction is one row.
    assert len(checked) < len(rows) <= 3 * spends
    for row in rows:
        _check_row(row)


def test_block413567_lists_p2pkh_keys_of_both_encodings(blocks: Any) -> None:
    _, block = blocks("block413567.raw")
    rows = list(block_revelations(block, 413567))
    assert Counter(row.kind for row in rows) == {RevelationKind.INPUT: len(rows)}
    assert len({(row.txid, row.pubkey, row.kind) for row in rows}) == len(rows)
    found = {(row.txid, row.pubkey) for row in rows}
    sizes: Counter[int] = Counter()
    for tx in block.transactions[1:]:
        for txin in tx.inputs:
            items = push_items(txin.script_sig)
            if items and len(items) == 2 and len(items[1]) in (33, 65) and items[0][:1] == b"\x30":
                assert (tx.txid, items[1]) in found
                sizes[len(items[1])] += 1
    assert sizes[33] > 1000 and sizes[65] > 50
    uncompressed = [row for row in rows if len(row.pubkey) == 65]
    assert uncompressed and all(row.hash160_uncompressed == hash160(row.pubkey) for row in uncompressed)
    for row in rows:
        _check_row(row)


def test_taproot_output_keys_and_script_path_keys(load_vectors: Loader) -> None:
    entries = {entry["name"]: entry for entry in load_vectors("bitcoin/transactions.json")}
    funding = parse_transaction(bytes.fromhex(entries["taproot_ts1_funding"]["hex"]))
    outputs = [row for row in transaction_revelations(funding, None) if row.kind is RevelationKind.OUTPUT]
    assert outputs and all(len(row.pubkey) == 32 and row.hash160_uncompressed is None for row in outputs)
    spend = parse_transaction(bytes.fromhex(entries["taproot_ts1_spend"]["hex"]))
    rows = list(transaction_revelations(spend, None))
    expected = {key for txin in spend.inputs for key in analyze_input(txin).revealed_keys}
    assert expected and {row.pubkey for row in rows if row.kind is RevelationKind.INPUT} == expected
    for row in outputs + rows:
        _check_row(row)


def test_a_key_revealed_twice_in_one_transaction_is_one_row(blocks: Any) -> None:
    _, block = blocks("block413567.raw")
    for tx in block.transactions[1:]:
        keys = [key for txin in tx.inputs for key in analyze_input(txin).revealed_keys]
        if len(keys) != len(set(keys)):
            rows = list(transaction_revelations(tx, 413567))
            assert sorted(row.pubkey for row in rows) == sorted(set(keys))
            return
    pytest.fail("no transaction in block 413567 reveals one key twice")


def _paying(script: bytes) -> Transaction:
    """A transaction with one output paying ``script`` (no inputs: nothing else is revealed)."""
    return Transaction(2, (), (TxOut(1_000, script),), 0, "11" * 32, "11" * 32)


def test_address_hashes_of_a_sec_key_follow_bip49(conformance_dir: Path) -> None:
    """The BIP-49 vector: a compressed key, its key hash and its P2SH-P2WPKH script hash."""
    vector = json.loads((conformance_dir / "wallets" / "bip49.json").read_text())
    fields = {f["name"]: f["value"] for group in vector["groups"] for f in group["fields"]}
    key = bytes.fromhex(fields["account0recvPublicKeyHex"])
    (row,) = transaction_revelations(_paying(bytes([len(key)]) + key + b"\xac"), None)  # P2PK
    hashes = address_hashes(row)
    uncompressed = coincurve.PublicKey(key).format(compressed=False)
    assert hashes == (
        bytes.fromhex(fields["keyhash"]),
        hash160(uncompressed),
        bytes.fromhex(fields["addressBytes"]),
    )


def test_address_hashes_of_an_x_only_key_cover_both_parities() -> None:
    secret = coincurve.PrivateKey(b"\x07" * 32)
    x_only = secret.public_key.format()[1:]
    (row,) = transaction_revelations(_paying(b"\x51\x20" + x_only), None)  # P2TR
    even = coincurve.PublicKey(b"\x02" + x_only)
    odd = coincurve.PublicKey(b"\x03" + x_only)
    forms = [even.format(), odd.format(), even.format(compressed=False), odd.format(compressed=False)]
    nested = [hash160(b"\x00\x14" + hash160(k)) for k in forms[:2]]
    assert address_hashes(row) == (*(hash160(k) for k in forms), *nested)
