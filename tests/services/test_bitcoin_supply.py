"""``qday bitcoin ingest-utxo-snapshot``: a snapshot written in Core's format over a built
chain, the supply by script type and cause, and its update after more blocks are ingested."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from chains.bitcoin.script import p2sh_script, witness_script_pubkey
from cli.main import main as qday
from pqc.hashes import hash160, sha256
from services.bitcoin_ingest import ingest_block_files
from services.bitcoin_utxo import ingest_utxo_snapshot
from storage.analytics import AnalyticsStore
from storage.bitcoin_index import BitcoinIndexStore
from tests.bitcoin_chain import (
    BuiltBlock,
    ChainBuilder,
    multisig,
    p2pk,
    p2pkh,
    p2tr,
    p2wpkh,
    public_key,
    revealing_blocks,
    write_block_file,
)
from tests.bitcoin_snapshot import Coin, write_snapshot
from tests.pipelines.test_docs import DOC, schema_block

REGTEST_MAGIC = bytes.fromhex("fabfb5da")


def nested(key: bytes) -> bytes:
    return p2sh_script(hash160(witness_script_pubkey(0, hash160(key))))


def coins() -> list[Coin]:
    """One coin per case, at heights 1..2 (value = 1000 x its number, to tell them apart)."""
    scripts = [
        p2pk(public_key(2)),  # 1: type
        p2pk(public_key(3, compressed=False)),  # 2: type
        multisig(1, [public_key(6), public_key(7)]),  # 3: type
        p2tr(8),  # 4: type
        p2pkh(public_key(4, compressed=False)),  # 5: key 4 was spent from in this encoding at height 4
        p2pkh(public_key(4)),  # 6: ... and this is its other encoding
        p2wpkh(public_key(5)),  # 7: key 5 was spent from as P2WPKH at height 4
        nested(public_key(5)),  # 8: key 5's nested P2SH-P2WPKH
        p2wpkh(public_key(99)),  # 9: never revealed
        witness_script_pubkey(0, sha256(b"script")),  # 10: P2WSH
        b"\x6a\x04" + b"memo",  # 11: OP_RETURN
    ]
    return [(bytes([n]) * 32, 0, 1 + n % 2, False, 1000 * n, script) for n, script in enumerate(scripts, 1)]


@pytest.fixture
def chain() -> tuple[list[BuiltBlock], list[BuiltBlock]]:
    """Blocks 0..3 (keys 2, 3, 6, 7 and 8 in outputs at height 3) and block 4 (spends revealing keys 4 and 5)."""
    builder = ChainBuilder()
    start = builder.extend(None, 3)
    reveal = revealing_blocks(builder, start[-1])
    return [*start, reveal.blocks[0]], [reveal.blocks[1]]


def supply(report_or_root: Any) -> dict[tuple[str, str], tuple[int, int]]:
    frame = report_or_root.supply
    return {(r["script_type"], r["cause"]): (r["outputs"], r["value_sat"]) for r in frame.iter_rows(named=True)}


def snapshot(path: Path, base: BuiltBlock) -> Path:
    with path.open("wb") as f:
        write_snapshot(f, network="regtest", base_block_hash=base.hash, coins=coins())
    return path


def test_the_supply_by_type_and_cause_and_its_update(tmp_path: Path, chain: Any) -> None:
    first, later = chain
    root = tmp_path / "analytics"
    write_block_file(tmp_path / "blk00000.dat", first, magic=REGTEST_MAGIC)
    ingest_block_files([tmp_path / "blk00000.dat"], BitcoinIndexStore(root))
    # the snapshot is of block 4, which the index does not hold yet: its height comes from the coins
    path = snapshot(tmp_path / "utxo.dat", later[0])
    report = ingest_utxo_snapshot(path, root)
    assert report.read and (report.height, report.height_source) == (2, "coins")
    assert supply(report) == {
        ("multisig", "type"): (1, 3000),
        ("other", "none"): (1, 11000),
        ("p2pk", "type"): (2, 3000),
        ("p2pkh", "none"): (2, 11000),  # key 4's spend (block 4) is not in the index yet
        ("p2sh", "none"): (1, 8000),
        ("p2tr", "type"): (1, 4000),
        ("p2wpkh", "none"): (2, 16000),
        ("p2wsh", "none"): (1, 10000),
    }
    write_block_file(tmp_path / "blk00001.dat", later, magic=REGTEST_MAGIC)
    ingest_block_files([tmp_path / "blk00001.dat"], BitcoinIndexStore(root))
    again = ingest_utxo_snapshot(path, root)  # the same file: not read again, the supply recomputed
    assert not again.read and (again.height, again.height_source) == (4, "index")
    assert supply(again) == {
        ("multisig", "type"): (1, 3000),
        ("other", "none"): (1, 11000),
        ("p2pk", "type"): (2, 3000),
        ("p2pkh", "revealed_key"): (2, 11000),  # both encodings of key 4
        ("p2sh", "revealed_key"): (1, 8000),  # key 5's nested script
        ("p2tr", "type"): (1, 4000),
        ("p2wpkh", "none"): (1, 9000),
        ("p2wpkh", "revealed_key"): (1, 7000),
        ("p2wsh", "none"): (1, 10000),
    }


def test_revelations_above_the_snapshot_height_do_not_count(tmp_path: Path, chain: Any) -> None:
    first, later = chain
    root = tmp_path / "analytics"
    write_block_file(tmp_path / "blk00000.dat", [*first, *later], magic=REGTEST_MAGIC)
    ingest_block_files([tmp_path / "blk00000.dat"], BitcoinIndexStore(root))
    report = ingest_utxo_snapshot(snapshot(tmp_path / "utxo.dat", first[-1]), root)  # block 3
    assert (report.height, report.height_source) == (3, "index")
    assert not any(cause == "revealed_key" for _, cause in supply(report))


def test_the_command_prints_the_table_and_feeds_qday_sql(
    tmp_path: Path, chain: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    first, later = chain
    write_block_file(tmp_path / "blk00000.dat", [*first, *later], magic=REGTEST_MAGIC)
    data = ["--data-dir", str(tmp_path / "data")]
    assert qday(["bitcoin", "ingest-blocks", str(tmp_path / "blk00000.dat"), *data]) == 0
    path = snapshot(tmp_path / "utxo.dat", later[0])
    capsys.readouterr()
    assert qday(["bitcoin", "ingest-utxo-snapshot", str(path), *data]) == 0
    out = capsys.readouterr().out
    assert "11 of 11 coins" in out and "supply at height 4 (height from index)" in out
    assert "p2pkh     revealed_key" in out
    con = AnalyticsStore(tmp_path / "data" / "analytics").connect()
    try:
        assert con.execute("SELECT count(*), sum(value) FROM bitcoin_utxo").fetchone() == (11, 66000)
        total = con.execute("SELECT sum(value_sat) FROM bitcoin_supply_exposure WHERE cause <> 'none'").fetchone()
        assert total == (3000 + 3000 + 4000 + 11000 + 8000 + 7000,)
    finally:
        con.close()
    (tmp_path / "bad.dat").write_bytes(b"not a snapshot")
    assert qday(["bitcoin", "ingest-utxo-snapshot", str(tmp_path / "bad.dat"), *data]) == 2
    assert "bad.dat" in capsys.readouterr().err


def test_the_documented_schemas_and_queries_hold(tmp_path: Path, chain: Any) -> None:
    """docs/analytics.md's index section cannot drift: its schema tables are the views', and
    its queries run on a built chain with a snapshot."""
    first, later = chain
    root = tmp_path / "analytics"
    write_block_file(tmp_path / "blk00000.dat", [*first, *later], magic=REGTEST_MAGIC)
    ingest_block_files([tmp_path / "blk00000.dat"], BitcoinIndexStore(root))
    ingest_utxo_snapshot(snapshot(tmp_path / "utxo.dat", later[0]), root)
    text = DOC.read_text(encoding="utf-8")
    con = AnalyticsStore(root).connect()
    try:
        for view in ("bitcoin_key_exposure", "bitcoin_blocks", "bitcoin_utxo", "bitcoin_supply_exposure"):
            described = [(row[0], row[1]) for row in con.execute(f"DESCRIBE {view}").fetchall()]
            assert schema_block(text, view) == described, view
        queries = re.findall(r"<!-- check:bitcoin-query -->\n```sql\n(.*?)```", text, re.S)
        headline, by_type, lookup, per_year = (con.execute(q).fetchall() for q in queries)
    finally:
        con.close()
    shares = {row[2]: row[4] for row in headline}  # of 66,000 sat
    assert shares == {"none": 45.45, "revealed_key": 39.39, "type": 15.15}
    assert by_type[0][0] == "p2wpkh" and lookup == []  # the block-9 key is a mainnet key
    assert [(row[1], row[2]) for row in per_year] == [("input", 3), ("output", 5)]
