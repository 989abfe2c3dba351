"""What scans make of the exposure index: its state, its evidence, and a damaged index."""

from __future__ import annotations

from pathlib import Path

import pytest

from chains.environment import Environment
from pqc.hashes import hash160
from services.bitcoin_ingest import ingest_block_files
from services.exposure_index import NO_INDEX_LIMIT, UNREADABLE_LIMIT, ExposureIndex
from storage.bitcoin_index import FILES, BitcoinIndexStore
from storage.errors import IndexUnreadable
from tests.bitcoin_chain import ChainBuilder, public_key, revealing_blocks, write_block_file

REGTEST_MAGIC = bytes.fromhex("fabfb5da")


@pytest.fixture
def index(tmp_path: Path) -> BitcoinIndexStore:
    chain = ChainBuilder()
    start = chain.extend(None, 3)
    write_block_file(
        tmp_path / "blk00000.dat", [*start, *revealing_blocks(chain, start[-1]).blocks], magic=REGTEST_MAGIC
    )
    store = BitcoinIndexStore(tmp_path / "analytics")
    ingest_block_files([tmp_path / "blk00000.dat"], store)
    return store


async def test_each_environment_reads_its_networks(index: BitcoinIndexStore) -> None:
    scans = ExposureIndex(index)
    live = await scans.revealed(Environment.LIVE, [hash160(public_key(5))])
    assert (live.indexed, live.evidence, live.limit(4)) == (False, (), NO_INDEX_LIMIT)  # no mainnet index here
    test = await scans.revealed(Environment.TEST, [hash160(public_key(5))])
    assert test.indexed and test.complete_to == 4 and test.limit(4) is None
    (evidence,) = test.evidence
    assert (evidence.kind.value, evidence.address, evidence.block_height) == ("index", public_key(5).hex(), 4)


async def test_a_damaged_index_never_fails_a_scan(index: BitcoinIndexStore) -> None:
    part = index.part_path("bitcoin_key_hashes", "regtest", FILES, "blk00000")
    part.write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(IndexUnreadable):
        index.lookup(["regtest"], [hash160(public_key(5))])
    answer = await ExposureIndex(index).revealed(Environment.TEST, [hash160(public_key(5))])
    assert answer.unreadable and answer.evidence == () and answer.limit(4) == UNREADABLE_LIMIT
