"""Following a node's tip into the exposure index: ranges, growth, reorgs (to a longer and to
a shorter chain), and continuing after block files; against the loopback Core node."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest

from chains.bitcoin.revelations import Revelation, address_hashes, block_revelations
from chains.bitcoin.tx import parse_block
from chains.clients.bitcoin_core import BitcoinCoreClient
from chains.endpoints import EndpointConfig
from pqc.hashes import hash160
from services.bitcoin_follow import follow_once, parse_part, part_name, range_of
from services.bitcoin_ingest import ingest_block_files
from storage.analytics import AnalyticsStore
from storage.bitcoin_index import RPC, BitcoinIndexStore
from tests.bitcoin_chain import BuiltBlock, ChainBuilder, revealing_blocks, write_block_file
from tests.core_rpc import CoreRpcServer

SIZE = 5
REGTEST_MAGIC = bytes.fromhex("fabfb5da")


@pytest.fixture
async def node() -> AsyncIterator[tuple[CoreRpcServer, BitcoinCoreClient]]:
    async with CoreRpcServer() as server, httpx.AsyncClient() as http:
        yield server, BitcoinCoreClient(EndpointConfig(server.url), http)


def all_revelations(blocks: list[BuiltBlock]) -> list[Revelation]:
    return [r for b in blocks for r in block_revelations(parse_block(b.raw), b.height)]


def revealed(blocks: list[BuiltBlock]) -> set[tuple[bytes, str, str, int]]:
    return {
        (r.pubkey, r.txid, r.kind.value, b.height)
        for b in blocks
        for r in block_revelations(parse_block(b.raw), b.height)
    }


def exposure(root: Path) -> set[tuple[bytes, str, str, int]]:
    con = AnalyticsStore(root).connect()
    try:
        rows = con.execute("SELECT pubkey, txid, kind, height FROM bitcoin_key_exposure").fetchall()
    finally:
        con.close()
    return {(bytes(p), t, k, h) for p, t, k, h in rows}


def build() -> tuple[ChainBuilder, list[BuiltBlock]]:
    """12 blocks: genesis, 2 coinbase-only, 2 revealing keys (heights 3, 4), 7 more."""
    chain = ChainBuilder()
    start = chain.extend(None, 3)
    reveal = revealing_blocks(chain, start[-1])
    return chain, chain.branch(chain.extend(reveal.blocks[1], 7)[-1])


def test_ranges_and_part_names() -> None:
    assert range_of(0) == (0, 999) and range_of(1999) == (1000, 1999) and range_of(7, 5) == (5, 9)
    assert part_name(1000, 1999) == "000001000-000001999"
    assert parse_part("000001000-000001999") == (1000, 1999)
    for bad in ("1000-1999", "000001999-000001000", "00000100a-000001999", "../x"):
        with pytest.raises(ValueError):
            parse_part(bad)


async def test_a_fresh_index_follows_from_genesis_and_then_only_what_changed(tmp_path: Path, node: Any) -> None:
    server, core = node
    chain, blocks = build()
    server.set_chain([b.raw for b in blocks])
    index = BitcoinIndexStore(tmp_path)
    first = await follow_once(core, index, size=SIZE)
    assert [r.part for r in first.ranges] == ["000000000-000000004", "000000005-000000009", "000000010-000000014"]
    assert sum(r.fetched for r in first.ranges) == 12
    assert first.state is not None and (first.state.complete_to, first.state.tip_height) == (11, 11)
    assert exposure(tmp_path) == revealed(blocks) != set()

    posts = server.post_count
    again = await follow_once(core, index, size=SIZE)
    assert [(r.part, r.unchanged) for r in again.ranges] == [("000000010-000000014", True)]
    assert server.post_count - posts <= 4  # tip, one compare window, the top range's hashes

    grown = chain.extend(blocks[-1], 4)  # heights 12..15: the top range fills, a new one starts
    server.set_chain([b.raw for b in [*blocks, *grown]])
    third = await follow_once(core, index, size=SIZE)
    assert [(r.part, r.fetched, r.kept) for r in third.ranges] == [
        ("000000010-000000014", 3, 2),
        ("000000015-000000019", 1, 0),
    ]
    assert third.state is not None and third.state.complete_to == 15 and not third.plan.reorg


async def test_a_reorg_rewrites_the_ranges_from_the_fork(tmp_path: Path, node: Any) -> None:
    server, core = node
    chain, blocks = build()
    server.set_chain([b.raw for b in blocks])
    index = BitcoinIndexStore(tmp_path)
    await follow_once(core, index, size=SIZE)
    # branch B leaves the chain after height 3: the block whose spends revealed keys at height 4
    # goes stale (its keys are no longer in the index), and B is longer
    fork = chain.block(blocks[3])
    b_blocks = chain.branch(chain.extend(fork, 9)[-1])
    server.set_chain([b.raw for b in b_blocks])
    report = await follow_once(core, index, size=SIZE)
    assert report.plan.reorg and report.plan.from_height == 4
    assert [r.part for r in report.ranges] == ["000000000-000000004", "000000005-000000009", "000000010-000000014"]
    assert report.ranges[0].kept == 4 and report.ranges[0].fetched == 1
    assert report.state is not None and report.state.complete_to == 13
    assert exposure(tmp_path) == revealed(b_blocks)
    assert not any(k for k in exposure(tmp_path) if k[3] == 4 and k[2] == "input")  # block 4's spends are gone

    server.set_chain([b.raw for b in b_blocks[:8]])  # a reorg to a shorter chain: heights 8.. disappear
    shorter = await follow_once(core, index, size=SIZE)
    assert shorter.plan.reorg and shorter.state is not None and shorter.state.tip_height == 7
    assert index.parts("regtest", RPC) == ["000000000-000000004", "000000005-000000009"]
    assert exposure(tmp_path) == revealed(b_blocks[:8])


async def test_following_continues_where_block_files_end(tmp_path: Path, node: Any) -> None:
    server, core = node
    _, blocks = build()
    write_block_file(tmp_path / "blk00000.dat", blocks[:7], magic=REGTEST_MAGIC)
    index = BitcoinIndexStore(tmp_path / "analytics")
    ingest_block_files([tmp_path / "blk00000.dat"], index)
    server.set_chain([b.raw for b in blocks])
    report = await follow_once(core, index, size=SIZE)
    assert report.plan.from_height == 7 and sum(r.fetched for r in report.ranges) == 5
    assert report.state is not None and report.state.complete_to == 11
    assert exposure(tmp_path / "analytics") == revealed(blocks)


async def test_lookups_read_the_compacted_buckets_and_the_parts_newer_than_them(tmp_path: Path, node: Any) -> None:
    server, core = node
    _, blocks = build()
    write_block_file(tmp_path / "blk00000.dat", blocks[:4], magic=REGTEST_MAGIC)  # heights 0..3
    index = BitcoinIndexStore(tmp_path / "analytics")
    summary = ingest_block_files([tmp_path / "blk00000.dat"], index, compact_after=1)
    assert index.uncompacted("regtest") == []
    buckets = sorted((tmp_path / "analytics" / "bitcoin_key_lookup" / "network=regtest" / "gen=1").glob("bucket=*"))
    assert summary.compacted["regtest"] == sum(
        pl.scan_parquet(b / "*.parquet").select(pl.len()).collect().item() for b in buckets
    )
    for bucket in buckets:
        hashes = pl.read_parquet(bucket / "*.parquet")["hash"].to_list()
        assert hashes == sorted(hashes) and {h[:1].hex().upper() for h in hashes} == {bucket.name[-2:]}
    server.set_chain([b.raw for b in blocks])
    await follow_once(core, index, size=SIZE)  # heights 4..11 from the node: not compacted
    found = revealed(blocks)
    assert {h for *_, h in found} == {3, 4}  # height 3 from the buckets, 4 from the node's range
    assert index.uncompacted("regtest") == [
        "rpc/000000000-000000004",
        "rpc/000000005-000000009",
        "rpc/000000010-000000014",
    ]
    for compacted in (False, True):
        if compacted:
            assert index.compact("regtest") > summary.compacted["regtest"] and index.uncompacted("regtest") == []
        for key, txid, kind, height in found:  # every key is revealed once in this chain
            (hit,) = index.lookup(["regtest"], [hash160(b"\x02" + key if len(key) == 32 else key)])
            assert (hit.pubkey, hit.txid, hit.kind, hit.height) == (key, txid, kind, height)


async def test_a_due_compaction_runs_once_and_never_beside_another(tmp_path: Path, node: Any) -> None:
    server, core = node
    _, blocks = build()
    server.set_chain([b.raw for b in blocks])
    index = BitcoinIndexStore(tmp_path)
    await follow_once(core, index, size=SIZE)  # three node ranges, none compacted
    assert index.compact_if_due("regtest", 4) is None  # not due yet
    with index._lock("regtest", "compact"):  # another process compacting (flock: per open file)
        assert index.compact_if_due("regtest", 1) is None
    assert index.compact_if_due("regtest", 1) == sum(len(address_hashes(r)) for r in all_revelations(blocks))
    assert index.compact_if_due("regtest", 1) is None and index.uncompacted("regtest") == []
