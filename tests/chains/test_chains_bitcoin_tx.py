"""Real transactions and blocks: txids/wtxids, output classes and what every input reveals."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import coincurve
import pytest

from api.errors import code_of
from chains.bitcoin.script import OutputType, classify_script, push_items, script_commits_to_key
from chains.bitcoin.spend import SpendType, analyze_input
from chains.bitcoin.tx import Block, Transaction, TxIn, merkle_root, parse_block, parse_transaction
from chains.codecs.bitcoin import BitcoinAddress
from chains.errors import MalformedChainData
from chains.registry import Network
from pqc.hashes import hash160

Loader = Callable[[str], Any]

BLOCKS = {
    "block170.raw": ("00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee", 2),
    "block413567.raw": ("0000000000000000025aff8be8a55df8f89c77296db6198f272d6577325d4069", 1557),
    "mainnet_block_0c835b.raw": ("000000000000000000000c835b2adcaedc20fdf6ee440009c249452c726dafae", 2500),
    "testnet_block_045e0b.raw": ("000000000000045e0b1660b6445b5e5c5ab63c9a4f956be7e1e69be04fa4497b", 15),
}

# Annotations of transactions.json for inputs whose funding transaction is not in the file.
INFERRED = {
    "p2wpkh (inferred, prevout not in set)": SpendType.P2WPKH,
    "p2pkh (inferred, prevout not in set)": SpendType.P2PKH,
}


def _is_point(key: bytes) -> bool:
    try:
        coincurve.PublicKeyXOnly(key) if len(key) == 32 else coincurve.PublicKey(key)
    except ValueError:
        return False
    return True


def _check_key_commitment(txin: TxIn, spend_type: SpendType, keys: tuple[bytes, ...], prevout: bytes | None) -> None:
    """Check that a revealed P2PKH/P2WPKH key hashes to the program it spends.

    That is the prevout's program when known, and for nested P2WPKH also the program in the scriptSig.
    """
    if prevout is not None and spend_type in (SpendType.P2PKH, SpendType.P2WPKH, SpendType.P2SH_P2WPKH):
        assert any(script_commits_to_key(prevout, key) for key in keys), txin
    if spend_type is SpendType.P2SH_P2WPKH:
        redeem = (push_items(txin.script_sig) or ())[-1]
        assert hash160(keys[0]) == classify_script(redeem).program


@pytest.fixture(scope="module")
def transactions(load_vectors: Loader) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = load_vectors("bitcoin/transactions.json")
    assert len(entries) == 14
    return entries


@pytest.fixture(scope="module")
def blocks(conformance_dir: Path) -> dict[str, Block]:
    return {name: parse_block((conformance_dir / "bitcoin/blocks" / name).read_bytes()) for name in BLOCKS}


def test_transactions_ids_and_outputs(transactions: list[dict[str, Any]]) -> None:
    for entry in transactions:
        tx = parse_transaction(bytes.fromhex(entry["hex"]))
        assert (tx.txid, tx.wtxid, tx.has_witness) == (entry["txid"], entry["wtxid"], entry["segwit"]), entry["name"]
        assert [(o.value, o.script_pubkey.hex()) for o in tx.outputs] == [
            (o["value_sat"], o["script_pubkey"]) for o in entry["outputs"]
        ]
        assert [classify_script(o.script_pubkey).output_type for o in tx.outputs] == [
            o["type"] for o in entry["outputs"]
        ]


def test_transactions_inputs_reveal_the_expected_keys(transactions: list[dict[str, Any]]) -> None:
    parsed = {e["txid"]: parse_transaction(bytes.fromhex(e["hex"])) for e in transactions}
    seen: Counter[SpendType] = Counter()
    for entry in transactions:
        tx = parsed[entry["txid"]]
        for txin, note in zip(tx.inputs, entry["inputs"], strict=True):
            assert (txin.prev_txid, txin.vout) == (note["prev_txid"], note["vout"])
            funding = parsed.get(txin.prev_txid)
            prevout = funding.outputs[txin.vout].script_pubkey if funding else None
            if prevout is not None:
                assert prevout.hex() == note["prevout_script_pubkey"]
            disclosure = analyze_input(txin, prevout)
            seen[disclosure.spend_type] += 1
            assert disclosure.inferred is (prevout is None and not txin.is_coinbase)
            expected = INFERRED.get(note["type"]) or SpendType(note["type"])
            assert disclosure.spend_type is expected, (entry["name"], note)
            assert all(_is_point(key) for key in disclosure.revealed_keys)
            _check_key_commitment(txin, disclosure.spend_type, disclosure.revealed_keys, prevout)
            if expected in (SpendType.P2PK, SpendType.P2TR_KEYPATH):
                # Nothing new: the key the spend relies on is already in the output script.
                assert prevout is not None and disclosure.revealed_keys == ()
                shown = bytes.fromhex(note.get("revealed_pubkey", prevout[2:].hex()))
                assert classify_script(prevout).keys == (shown,)
            elif expected is SpendType.P2TR_SCRIPTPATH:
                assert disclosure.script == bytes.fromhex(note["leaf_script"])
                assert disclosure.revealed_keys == tuple(
                    bytes.fromhex(k) for k in [*note["leaf_keys"], note["internal_key"]]
                )
            elif expected in (SpendType.P2PKH, SpendType.P2WPKH):
                assert len(disclosure.revealed_keys) == 1
    assert seen == {
        SpendType.COINBASE: 2,
        SpendType.P2PK: 1,
        SpendType.P2WPKH: 5,
        SpendType.P2PKH: 4,
        SpendType.P2TR_KEYPATH: 6,
        SpendType.P2TR_SCRIPTPATH: 4,
    }


def test_p2pkh_funding_inputs_reveal_one_reused_key(transactions: list[dict[str, Any]]) -> None:
    entry = next(e for e in transactions if e["name"] == "taproot_csa_funding0")
    tx = parse_transaction(bytes.fromhex(entry["hex"]))
    keys = {analyze_input(txin).revealed_keys for txin in tx.inputs}
    assert len(keys) == 1 and next(iter(keys))[0].hex().startswith("02682e5e")


@pytest.mark.parametrize("name", list(BLOCKS))
def test_block_header_and_merkle_root(blocks: dict[str, Block], name: str) -> None:
    block = blocks[name]
    assert (block.header.hash, len(block.transactions)) == BLOCKS[name]
    assert merkle_root([tx.txid for tx in block.transactions]) == block.header.merkle_root
    assert block.transactions[0].inputs[0].is_coinbase
    assert not any(txin.is_coinbase for tx in block.transactions[1:] for txin in tx.inputs)


def test_a_large_block_parses_well_under_a_second(conformance_dir: Path) -> None:
    raw = (conformance_dir / "bitcoin/blocks/mainnet_block_0c835b.raw").read_bytes()
    start = time.perf_counter()
    parse_block(raw)
    assert time.perf_counter() - start < 1.0


def _classify_outputs(block: Block) -> Counter[OutputType]:
    return Counter(classify_script(out.script_pubkey).output_type for tx in block.transactions for out in tx.outputs)


def test_block_outputs_are_classified(blocks: dict[str, Block]) -> None:
    assert _classify_outputs(blocks["block170.raw"]) == {OutputType.P2PK: 3}
    segwit = _classify_outputs(blocks["mainnet_block_0c835b.raw"])
    assert segwit == {
        OutputType.P2WPKH: 2383,
        OutputType.P2SH: 1816,
        OutputType.P2PKH: 1660,
        OutputType.P2WSH: 133,
        OutputType.OP_RETURN: 23,
    }
    testnet = blocks["testnet_block_045e0b.raw"]
    addresses = [
        str(BitcoinAddress.from_script_pubkey(out.script_pubkey, Network.TESTNET))
        for tx in testnet.transactions
        for out in tx.outputs
        if classify_script(out.script_pubkey).output_type is not OutputType.OP_RETURN
    ]
    assert len(addresses) == 25 and all(a[0] in "mn2" for a in addresses)


def _analyze_block(block: Block) -> tuple[Counter[SpendType], int, int]:
    """Analyse every input, with its prevout when the block itself created it.

    Every revealed key must be a curve point and every checkable hash commitment must hold.
    """
    created = {(tx.txid, i): out.script_pubkey for tx in block.transactions for i, out in enumerate(tx.outputs)}
    types: Counter[SpendType] = Counter()
    keys = with_prevout = 0
    for tx in block.transactions:
        for txin in tx.inputs:
            prevout = created.get((txin.prev_txid, txin.vout))
            disclosure = analyze_input(txin, prevout)
            types[disclosure.spend_type] += 1
            if prevout is not None:
                with_prevout += 1
                assert analyze_input(txin).spend_type is disclosure.spend_type
            assert all(_is_point(key) for key in disclosure.revealed_keys)
            _check_key_commitment(txin, disclosure.spend_type, disclosure.revealed_keys, prevout)
            keys += len(disclosure.revealed_keys)
    return types, keys, with_prevout


def test_block_inputs_reveal_valid_keys(blocks: dict[str, Block]) -> None:
    results = {name: _analyze_block(block) for name, block in blocks.items()}
    assert results["block170.raw"] == (Counter({SpendType.COINBASE: 1, SpendType.P2PK: 1}), 0, 0)
    types, keys, with_prevout = results["mainnet_block_0c835b.raw"]
    assert types == {
        SpendType.COINBASE: 1,
        SpendType.P2WPKH: 2588,
        SpendType.P2SH_P2WPKH: 1578,
        SpendType.P2PKH: 1080,
        SpendType.P2SH: 1030,
        SpendType.P2WSH: 129,
        SpendType.P2SH_P2WSH: 112,
    }
    assert (keys, with_prevout) == (8001, 327)
    types, keys, with_prevout = results["block413567.raw"]
    assert types == {SpendType.COINBASE: 1, SpendType.P2PKH: 3957, SpendType.P2SH: 929}
    assert (keys, with_prevout) == (6639, 287)
    assert all(SpendType.UNKNOWN not in types for types, _, _ in results.values())


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        bytes.fromhex("01000000"),
        bytes.fromhex("0100000001"),
        bytes.fromhex("01000000ff" + "ff" * 8),
        bytes.fromhex("010000000001" + "00" * 10),
    ],
)
def test_truncated_or_bogus_transactions_raise_malformed_chain_data(raw: bytes) -> None:
    with pytest.raises(MalformedChainData) as caught:
        parse_transaction(raw)
    assert code_of(caught.value) == "SCAN_004"


def test_trailing_bytes_are_refused(transactions: list[dict[str, Any]]) -> None:
    with pytest.raises(MalformedChainData, match="trailing"):
        parse_transaction(bytes.fromhex(transactions[0]["hex"]) + b"\0")


def test_segwit_flag_with_empty_witnesses_is_refused(transactions: list[dict[str, Any]]) -> None:
    tx: Transaction = parse_transaction(bytes.fromhex(transactions[0]["hex"]))
    raw = bytes.fromhex(transactions[0]["hex"])
    forged = raw[:4] + b"\x00\x01" + raw[4:-4] + b"\x00" * len(tx.inputs) + raw[-4:]
    with pytest.raises(MalformedChainData, match="witness"):
        parse_transaction(forged)
