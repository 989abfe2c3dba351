"""``qday bitcoin ingest-blocks``: real mainnet blocks and built chains written as Bitcoin Core
block files (plain and Core 28+ obfuscated), into the exposure index and its views."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from chains.bitcoin.revelations import block_revelations, key_hashes
from chains.bitcoin.tx import parse_block
from chains.codecs.bitcoin import BitcoinAddress
from chains.registry import Network
from cli.main import main as qday
from pqc.hashes import hash160
from services.bitcoin_ingest import IngestError, IngestSummary, ingest_block_files
from storage.analytics import AnalyticsStore
from storage.bitcoin_index import FILES, BitcoinIndexStore, PartWriter
from tests.bitcoin_chain import (
    MAINNET_MAGIC,
    BuiltBlock,
    ChainBuilder,
    public_key,
    revealing_blocks,
    taproot_output_key,
    write_block_file,
    write_conformance_block_file,
)

REGTEST_MAGIC = bytes.fromhex("fabfb5da")
KEY = bytes.fromhex("5a3c1f0e9d8b7a61")
BLOCK9_KEY = bytes.fromhex(
    "0411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5c"
    "b2e0eaddfb84ccf9744464f82e160bfa9b8b64f9d4c03f999b8643f656b412a3"
)
BLOCK170_SPEND = "f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16"
P2WPKH_TXID = "7bf717689b9033eafb2f3272719989b304bb7db616c2bfb5ded2e1b76d50a4f0"  # in block 702861
P2WPKH_KEY = bytes.fromhex("02dfaba46d2417eee4661d45a6ab44f15cf2c77377045c678c926142b6b611ab9e")


def ingest(paths: Sequence[Path], data: Path, workers: int = 1) -> IngestSummary:
    return ingest_block_files(paths, BitcoinIndexStore(data / "analytics"), workers=workers)


def query(data: Path, sql: str) -> list[tuple[Any, ...]]:
    con = AnalyticsStore(data / "analytics").connect()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def exposure_rows(data: Path) -> list[tuple[Any, ...]]:
    return query(
        data,
        "SELECT network, txid, pubkey, kind, height, hash160, hash160_uncompressed FROM bitcoin_key_exposure"
        " ORDER BY ALL",
    )


@pytest.fixture
def built_chain() -> tuple[ChainBuilder, list[BuiltBlock], list[BuiltBlock], BuiltBlock, Any]:
    """Genesis + 2 coinbase blocks, two blocks revealing keys of every kind (heights 3, 4), and
    a stale block at height 3 (a branch that lost)."""
    chain = ChainBuilder()
    main = chain.extend(None, 3)
    reveal = revealing_blocks(chain, main[-1])
    stale = chain.block(main[-1])
    return chain, main, list(reveal.blocks), stale, reveal


def test_real_blocks_plain_and_obfuscated_give_the_same_index(tmp_path: Path, conformance_dir: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "xor").mkdir()
    blocks = write_conformance_block_file(conformance_dir, tmp_path / "plain" / "blk00000.dat", preallocate=1 << 16)
    write_conformance_block_file(conformance_dir, tmp_path / "xor" / "blk00000.dat", xor_key=KEY, preallocate=1 << 16)
    for name in ("plain", "xor"):
        summary = ingest([tmp_path / name], tmp_path / f"data-{name}")
        assert not summary.failed and summary.reports[0].blocks == 3
    rows = exposure_rows(tmp_path / "data-plain")
    assert rows == exposure_rows(tmp_path / "data-xor")
    expected = sum(len(list(block_revelations(parse_block(raw), None))) for raw in blocks.values())
    assert len(rows) == expected > 10_000
    by_key = {(r[1], r[2], r[3]): r for r in rows}
    block9 = by_key[(BLOCK170_SPEND, BLOCK9_KEY, "output")]  # block 170 pays the block-9 key again
    assert block9[0] == "mainnet" and block9[4] is None  # a version-1 block: its height is not stated
    assert (block9[5], block9[6]) == key_hashes(BLOCK9_KEY)
    assert by_key[(P2WPKH_TXID, P2WPKH_KEY, "input")][4] == 702_861  # BIP-34 height
    assert all(r[5] is not None and (r[6] is not None) == (len(r[2]) != 32) for r in rows)


def test_a_built_chain_gets_heights_from_links_and_a_stale_block_none(tmp_path: Path, built_chain: Any) -> None:
    _, main, revealing, stale, reveal = built_chain
    folder = tmp_path / "blocks"
    folder.mkdir()
    # arrival order across two files: the stale block arrived before the block that beat it
    write_block_file(folder / "blk00000.dat", [*main, stale], magic=REGTEST_MAGIC, xor_key=KEY)
    write_block_file(folder / "blk00001.dat", revealing, magic=REGTEST_MAGIC, xor_key=KEY)
    summary = ingest([folder], tmp_path / "data", workers=2)
    assert not summary.failed and [s.complete_to for s in summary.chains] == [4]
    heights = dict(query(tmp_path / "data", "SELECT block_hash, height FROM bitcoin_blocks"))
    assert [heights[b.hash] for b in (*main, *revealing)] == [0, 1, 2, 3, 4]
    assert heights[stale.hash] is None
    linked = dict(query(tmp_path / "data", "SELECT block_hash, linked FROM bitcoin_blocks"))
    assert linked[stale.hash] is False and linked[revealing[1].hash] is True
    rows = query(tmp_path / "data", "SELECT pubkey, txid, kind, height FROM bitcoin_key_exposure")
    assert {(bytes(p), t, k) for p, t, k, _ in rows} == reveal.revealed
    assert {h for *_, h in rows} == {3, 4}
    state = BitcoinIndexStore(tmp_path / "data" / "analytics").chain_state("regtest")
    assert state is not None and (state.complete_to, state.tip_height, state.blocks) == (4, 4, 6)


def test_lookups_find_a_key_under_either_encoding_and_parity(tmp_path: Path, built_chain: Any) -> None:
    _, main, revealing, _, _ = built_chain
    write_block_file(tmp_path / "blk00000.dat", [*main, *revealing], magic=REGTEST_MAGIC)
    ingest([tmp_path / "blk00000.dat"], tmp_path / "data")
    index = BitcoinIndexStore(tmp_path / "data" / "analytics")
    spent = public_key(4, compressed=False)  # spent from P2PKH in its uncompressed form, at height 4
    for encoding in (spent, public_key(4)):
        (hit,) = index.lookup(["regtest"], [hash160(encoding)])
        assert (hit.pubkey, hit.kind, hit.height) == (spent, "input", 4)
    x_only = taproot_output_key(8)  # a P2TR output key (height 3): an x-only key reveals both parities
    for prefix in (b"\x02", b"\x03"):
        (hit,) = index.lookup(["regtest"], [hash160(prefix + x_only)])
        assert (hit.pubkey, hit.kind, hit.height) == (x_only, "output", 3)
    assert index.lookup(["regtest"], [hash160(public_key(99))]) == []
    assert index.lookup(["mainnet"], [hash160(spent)]) == []  # another network's index


def test_an_unchanged_file_is_skipped_and_a_grown_one_redone(tmp_path: Path, built_chain: Any) -> None:
    _, main, revealing, _, _ = built_chain
    path = tmp_path / "blocks" / "blk00000.dat"
    path.parent.mkdir()
    write_block_file(path, main, magic=REGTEST_MAGIC)
    first = ingest([path.parent], tmp_path / "data")
    part = tmp_path / "data" / "analytics" / "bitcoin_blocks" / "network=regtest" / "files" / "blk00000.parquet"
    written = part.stat().st_mtime_ns
    again = ingest([path.parent], tmp_path / "data")
    assert first.reports[0].blocks == 3 and again.reports[0].skipped and part.stat().st_mtime_ns == written
    write_block_file(path, [*main, *revealing], magic=REGTEST_MAGIC)  # Core appended two blocks
    grown = ingest([path.parent], tmp_path / "data")
    assert grown.reports[0].blocks == 5 and not grown.reports[0].skipped
    assert query(tmp_path / "data", "SELECT count(*), count(DISTINCT block_hash) FROM bitcoin_blocks") == [(5, 5)]
    assert grown.chains[0].complete_to == 4


def test_a_malformed_file_is_reported_and_the_others_kept(tmp_path: Path, built_chain: Any) -> None:
    _, main, revealing, _, _ = built_chain
    folder = tmp_path / "blocks"
    folder.mkdir()
    write_block_file(folder / "blk00000.dat", main, magic=REGTEST_MAGIC)
    good = write_block_file(folder / "blk00001.dat", revealing, magic=REGTEST_MAGIC)
    data = (folder / "blk00001.dat").read_bytes()
    (folder / "blk00001.dat").write_bytes(data[: good[1] + 100])  # the second record is cut short
    summary = ingest([folder], tmp_path / "data", workers=2)
    (failed,) = summary.failed
    assert failed.path.name == "blk00001.dat" and "cut short" in (failed.error or "")
    assert query(tmp_path / "data", "SELECT count(*) FROM bitcoin_blocks") == [(3,)]
    assert [s.complete_to for s in summary.chains] == [2]


def test_inputs_that_cannot_be_ingested_are_clear_errors(tmp_path: Path) -> None:
    index = BitcoinIndexStore(tmp_path / "analytics")
    with pytest.raises(IngestError, match="no such file"):
        ingest_block_files([tmp_path / "missing"], index)
    with pytest.raises(IngestError, match="no block files"):
        ingest_block_files([tmp_path], index)
    (tmp_path / "blk00000.dat").write_bytes(b"\x01\x02\x03\x04" + bytes(100))
    with pytest.raises(IngestError, match="not the magic of a Bitcoin network"):
        ingest_block_files([tmp_path], index)
    (tmp_path / "blk00000.dat").write_bytes(MAINNET_MAGIC + bytes(100))
    (tmp_path / "xor.dat").write_bytes(b"\x01\x02")
    with pytest.raises(IngestError, match="xor.dat: holds 2 bytes"):
        ingest_block_files([tmp_path], index)


def test_the_command_ingests_reports_and_feeds_qday_sql(
    tmp_path: Path, conformance_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "blocks"
    folder.mkdir()
    write_conformance_block_file(conformance_dir, folder / "blk00000.dat", xor_key=KEY)
    data = ["--data-dir", str(tmp_path / "data")]
    assert qday(["bitcoin", "ingest-blocks", str(folder), *data]) == 0
    out = capsys.readouterr().out
    assert "[1/1] blk00000.dat: 3 blocks" in out and "mainnet: 3 blocks, not from genesis" in out
    assert qday(["bitcoin", "ingest-blocks", str(folder), *data, "--workers", "2"]) == 0
    assert "unchanged, skipped" in capsys.readouterr().out
    assert qday(["bitcoin", "status", *data]) == 0
    assert "highest known height 702,861" in capsys.readouterr().out
    assert qday(["bitcoin", "compact", *data]) == 0
    assert "mainnet: 37,512 key hashes compacted into the lookup buckets" in capsys.readouterr().out
    p2pkh = BitcoinAddress.decode("12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S", network=Network.MAINNET).payload
    sql = f"SELECT txid, kind FROM bitcoin_key_exposure WHERE hash160_uncompressed = from_hex('{p2pkh.hex()}')"
    assert qday(["sql", *data, "-c", sql]) == 0
    assert capsys.readouterr().out.splitlines() == ["txid,kind", f"{BLOCK170_SPEND},output"]
    assert qday(["bitcoin", "ingest-blocks", str(tmp_path / "nowhere"), *data]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_a_part_spilled_in_pieces_is_the_same_sorted_part(tmp_path: Path, conformance_dir: Path) -> None:
    """Past one spill, the key hashes are merge-sorted by DuckDB within a memory limit (not by
    a sort holding every row): the files equal those written in one piece."""
    blocks = [parse_block(raw) for raw in write_conformance_block_file(conformance_dir, tmp_path / "b.dat").values()]
    written = {}
    for flush_rows in (500, 1_000_000):
        index = BitcoinIndexStore(tmp_path / f"analytics-{flush_rows}")
        with PartWriter(index, "mainnet", FILES, "blk00000", flush_rows=flush_rows) as writer:
            for block in blocks:
                writer.add_block(block.header, len(block.transactions), None, list(block_revelations(block, None)), 0)
        path = index.part_path("bitcoin_key_hashes", "mainnet", FILES, "blk00000")
        rows = index.part_path("bitcoin_revelations", "mainnet", FILES, "blk00000")
        written[flush_rows] = (pl.read_parquet(path), pl.read_parquet(rows))
    (spilled, spilled_rows), (whole, whole_rows) = written[500], written[1_000_000]
    assert spilled.height == whole.height > 25_000
    assert spilled["hash"].to_list() == sorted(spilled["hash"].to_list()) == whole["hash"].to_list()
    assert spilled.sort(spilled.columns).equals(whole.sort(whole.columns))
    assert spilled_rows.equals(whole_rows)
