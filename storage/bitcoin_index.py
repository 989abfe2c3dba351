"""The chain-wide Bitcoin exposure index on disk: Parquet parts, the best chain, lookups.

Layout under ``<data_dir>/analytics/`` (docs/analytics.md)::

    bitcoin_blocks/network=N/<origin>/<part>.parquet        one row per ingested block
    bitcoin_revelations/network=N/<origin>/<part>.parquet   one row per revealed key (per tx, kind)
    bitcoin_key_hashes/network=N/<origin>/<part>.parquet    one row per HASH160 of a revealed key,
                                                            sorted by hash (the lookup table)
    bitcoin_best_chain/network=N/best.parquet               height of every best-chain block
    bitcoin_utxo/network=N/snapshot.parquet                 a dumptxoutset snapshot's coins
    bitcoin_supply_exposure/network=N/supply.parquet        the snapshot's supply by type and cause
    bitcoin_state/N/files/<part>.json, chain.json           ingest progress, index completeness

``origin`` is ``files`` (a part per ``blk*.dat`` file, named by its stem) or ``rpc`` (a part per
height range read from a node). Each part has one writer and is replaced whole (temp + rename):
re-ingesting a file or a range after a reorg rewrites exactly its rows. A part's revelations and
key hashes are published before its blocks file; the ``bitcoin_key_exposure`` view shows the rows
of blocks whose blocks file exists, so a crash between the two leaves nothing half-visible there
(lookups still see the revealed keys: a revelation is real whichever file holds it). A block
ingested twice (two parts, e.g. a file and a range) is shown once, from the first part by name.

Heights: the ``bitcoin_best_chain`` file gives each ingested block its height, rewritten after
each ingest (``link``): its place on the most-work chain from genesis through every ingested
block (``chains.bitcoin.heights.best_chain``), else the height its source gave (a node's
``getblockhash`` for ranges, BIP-34 for files) when no linked block holds that height, else
none: a stale block, or a block before BIP-34 whose ancestors were not ingested, has a null
height (its revelations still count: they were broadcast).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import duckdb
import polars as pl

from chains.bitcoin.heights import HeaderLink, best_chain, complete_height
from chains.bitcoin.revelations import Revelation, address_hashes
from chains.bitcoin.tx import BlockHeader
from storage.errors import IndexUnreadable
from storage.parquet_files import (
    EMPTY_FILE,
    CommitOnExit,
    ParquetFileWriter,
    Table,
    publish,
    temp_name,
    write_schema_file,
)

FILES: Final = "files"
RPC: Final = "rpc"
ORIGINS: Final = (FILES, RPC)
COMPACT_AFTER: Final = 32
"""Parts left out of the lookup buckets before an ingest (or a node range) compacts them: a lookup
reads each such part's footer (~0.7 ms), a compaction re-sorts every key hash (~1.6 s per
million here), so re-ingesting Core's newest file does not recompact the chain."""

_HASH = pl.Binary()

BITCOIN_TABLES: Final = MappingProxyType(
    {
        t.name: t
        for t in (
            Table(
                "bitcoin_blocks",
                pl.Schema(
                    {
                        "network": pl.String(),
                        "source": pl.String(),
                        "block_hash": _HASH,
                        "prev_hash": _HASH,
                        "height": pl.Int32(),
                        "time": pl.Int64(),
                        "bits": pl.Int64(),
                        "tx_count": pl.Int32(),
                        "revelations": pl.Int32(),
                        "file_offset": pl.Int64(),
                    }
                ),
                ("network", "block_hash"),
                "Every ingested block: hash and parent (32 bytes, display order), the height its source "
                "gave (null when it gave none), time, compact target, counts, and its part.",
            ),
            Table(
                "bitcoin_revelations",
                pl.Schema(
                    {
                        "network": pl.String(),
                        "source": pl.String(),
                        "block_hash": _HASH,
                        "txid": _HASH,
                        "pubkey": _HASH,
                        "hash160": _HASH,
                        "hash160_uncompressed": _HASH,
                        "kind": pl.String(),
                    }
                ),
                ("network", "txid", "pubkey", "kind"),
                "One row per key a transaction revealed (chains.bitcoin.revelations).",
            ),
            Table(
                "bitcoin_key_hashes",
                pl.Schema(
                    {
                        "network": pl.String(),
                        "source": pl.String(),
                        "hash": _HASH,
                        "pubkey": _HASH,
                        "block_hash": _HASH,
                        "txid": _HASH,
                        "kind": pl.String(),
                    }
                ),
                ("network", "hash"),
                "Every HASH160 an address of a revealed key commits to (chains.bitcoin.revelations."
                "address_hashes: both encodings, the nested P2SH-P2WPKH script, both parities of an "
                "x-only key), sorted by hash: what scans and the supply table look up.",
            ),
            Table(
                "bitcoin_best_chain",
                pl.Schema({"network": pl.String(), "block_hash": _HASH, "height": pl.Int32(), "linked": pl.Boolean()}),
                ("network", "block_hash"),
                "Each ingested block's height: on the most-work chain from genesis (linked), else the "
                "height its source gave where no linked block holds that height.",
            ),
        )
    }
)
"""The index's Parquet tables (``storage.analytics.TABLES`` includes them)."""


BITCOIN_PART_TABLES: Final = ("bitcoin_revelations", "bitcoin_key_hashes", "bitcoin_blocks")
"""The tables each part writes, in publication order (blocks last)."""

BITCOIN_VIEWS: Final = ("bitcoin_blocks", "bitcoin_key_exposure")
"""The index's ``qday sql`` views."""


def bitcoin_view_statements(scan: Callable[[str], str]) -> list[str]:
    """``CREATE OR REPLACE VIEW`` statements of the index's views; ``scan(table)`` gives the
    ``read_parquet`` expression of every file of a table.

    ``bitcoin_blocks`` shows hashes as hex (display order) and the height resolved as the
    module docstring says; ``bitcoin_key_exposure`` has one row per revelation, from the first
    part (by name) holding its block."""
    blocks, best = scan("bitcoin_blocks"), scan("bitcoin_best_chain")
    return [
        "CREATE OR REPLACE VIEW bitcoin_blocks AS"
        " SELECT b.network, lower(hex(b.block_hash)) AS block_hash, lower(hex(b.prev_hash)) AS prev_hash,"
        "  c.height, coalesce(c.linked, false) AS linked, b.height AS source_height,"
        "  make_timestamp(b.time * 1000000) AS time, b.bits, b.tx_count, b.revelations, b.source, b.file_offset"
        f" FROM {blocks} b LEFT JOIN {best} c ON c.network = b.network AND c.block_hash = b.block_hash",
        "CREATE OR REPLACE VIEW bitcoin_key_exposure AS"
        f" WITH chosen AS (SELECT network, block_hash, min(source) AS source FROM {blocks} GROUP BY ALL)"
        " SELECT r.network, r.pubkey, r.hash160, r.hash160_uncompressed, lower(hex(r.txid)) AS txid,"
        "  c.height, r.kind, lower(hex(r.block_hash)) AS block_hash"
        f" FROM {scan('bitcoin_revelations')} r"
        " JOIN chosen ON chosen.network = r.network AND chosen.block_hash = r.block_hash"
        "  AND chosen.source = r.source"
        f" LEFT JOIN {best} c ON c.network = r.network AND c.block_hash = r.block_hash",
    ]


@dataclass(frozen=True, slots=True)
class IndexHit:
    """One revelation of a looked-up HASH160: which hash matched, the key as revealed, the
    revealing transaction (hex, display order), its block height (None when unknown) and
    kind (output / input)."""

    hash: bytes
    pubkey: bytes
    txid: str
    height: int | None
    kind: str


@dataclass(frozen=True, slots=True)
class ChainState:
    """How far a network's index reaches: every block 0..``complete_to`` is ingested (None
    without the genesis block), the highest known height, and how many blocks are ingested."""

    network: str
    complete_to: int | None
    tip_height: int | None
    blocks: int
    linked_at: str


def _hex(value: str) -> bytes:
    return bytes.fromhex(value)


_BLOCK_COLUMNS: Final = ("block_hash", "prev_hash", "height", "time", "bits", "tx_count", "revelations", "file_offset")
_REVELATION_COLUMNS: Final = ("block_hash", "txid", "pubkey", "hash160", "hash160_uncompressed", "kind")
_HASH_COLUMNS: Final = ("hash", "pubkey", "block_hash", "txid", "kind")


_LOOKUP_ROW_GROUP: Final = 16_384


def _quoted(path: Path) -> str:
    """A path as a SQL string literal."""
    return _quoted_text(str(path))


def _quoted_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class SpillingSortWriter(ParquetFileWriter):
    """A ``ParquetFileWriter`` whose file is sorted by ``sort_by`` in bounded memory: past one
    part, DuckDB merges the spilled parts within ``memory_limit``, spilling to the writer's
    scratch folder (a Polars sort would hold every row of a 128 MiB block file's key hashes,
    about 1.8 GB; with this one a worker's peak stays about 380 MB whatever the file's size,
    measured by bench/bench_bitcoin_index.py). Rows are kept as they are: no key is dropped for repeating."""

    def __init__(self, *args: Any, memory_limit: str = "128MB", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._memory_limit = memory_limit

    def _sorted(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        return frame.sort(self._sort_by)

    def _merge(self, temp: Path) -> None:
        files = ", ".join(_quoted(p) for p in self._parts)
        con = duckdb.connect(":memory:")
        try:
            con.execute(f"SET memory_limit = '{self._memory_limit}'")
            con.execute(f"SET temp_directory = {_quoted(self._scratch / 'duckdb')}")
            con.execute("SET preserve_insertion_order = false")
            con.execute("SET threads = 1")  # files are ingested in parallel already
            con.execute("SET enable_progress_bar = false")
            con.execute(
                f"COPY (SELECT * FROM read_parquet([{files}]) ORDER BY {', '.join(self._sort_by)})"
                f" TO {_quoted(temp)} (FORMAT parquet, ROW_GROUP_SIZE {self._row_group_size})"
            )
        finally:
            con.close()


class PartWriter(CommitOnExit):
    """Writes one part (a block file or a height range) of a network's index: its blocks,
    revelations and key hashes, with bounded memory (rows are flushed every ``flush_rows``).
    ``commit`` publishes the three files (revelations and hashes first, blocks last)."""

    def __init__(self, index: BitcoinIndexStore, network: str, origin: str, part: str, flush_rows: int = 50_000):
        self.network, self.source = network, f"{origin}/{part}"
        self.blocks = 0
        self.revelations = 0
        self._flush_rows = flush_rows

        def writer(name: str) -> ParquetFileWriter:
            target, table = index.part_path(name, network, origin, part), BITCOIN_TABLES[name]
            if name == "bitcoin_key_hashes":  # sorted: a lookup reads the row groups its hash falls in
                return SpillingSortWriter(
                    target, table, index.scratch, rows_per_part=flush_rows, row_group_size=8_192, sort_by=("hash",)
                )
            return ParquetFileWriter(target, table, index.scratch, rows_per_part=flush_rows, row_group_size=65_536)

        self._writers = {name: writer(name) for name in BITCOIN_PART_TABLES}
        self._blocks: dict[str, list[Any]] = {name: [] for name in _BLOCK_COLUMNS}
        self._rows: dict[str, list[Any]] = {name: [] for name in _REVELATION_COLUMNS}
        self._hashes: dict[str, list[Any]] = {name: [] for name in _HASH_COLUMNS}

    def add_block(
        self,
        header: BlockHeader,
        tx_count: int,
        height: int | None,
        revelations: Sequence[Revelation],
        offset: int | None,
    ) -> None:
        """Add one block and the keys it revealed (``height``: what the source says, or None;
        ``offset``: its record's place in a block file, None from a node)."""
        block_hash = _hex(header.hash)
        block = (block_hash, _hex(header.prev_block), height, header.time, header.bits, tx_count)
        for column, value in zip(self._blocks.values(), (*block, len(revelations), offset), strict=True):
            column.append(value)
        blocks, txids, keys, compressed, uncompressed, kinds = self._rows.values()
        hashes, hash_keys, hash_blocks, hash_txids, hash_kinds = self._hashes.values()
        for r in revelations:
            txid, kind = _hex(r.txid), r.kind.value
            blocks.append(block_hash)
            txids.append(txid)
            keys.append(r.pubkey)
            compressed.append(r.hash160)
            uncompressed.append(r.hash160_uncompressed)
            kinds.append(kind)
            found = address_hashes(r)
            n = len(found)
            hashes += found
            hash_keys += [r.pubkey] * n
            hash_blocks += [block_hash] * n
            hash_txids += [txid] * n
            hash_kinds += [kind] * n
        self.blocks += 1
        self.revelations += len(revelations)
        if len(txids) >= self._flush_rows or len(self._blocks["block_hash"]) >= self._flush_rows:
            self._flush()

    def carry(self, table: str, rows: pl.DataFrame) -> None:
        """Add rows of the part's previous version of ``table`` as they are."""
        self._writers[table].write(rows)
        if table == "bitcoin_blocks":
            self.blocks += rows.height
            self.revelations += int(rows["revelations"].sum())

    def _flush(self) -> None:
        literals = {"network": pl.lit(self.network), "source": pl.lit(self.source)}
        for table, columns in (
            ("bitcoin_revelations", self._rows),
            ("bitcoin_key_hashes", self._hashes),
            ("bitcoin_blocks", self._blocks),
        ):
            if columns[next(iter(columns))]:
                schema = BITCOIN_TABLES[table].schema
                frame = pl.DataFrame(columns, schema={name: schema[name] for name in columns})
                self._writers[table].write(frame.with_columns(**literals))
                for values in columns.values():
                    values.clear()

    def commit(self) -> None:
        """Publish the part (replacing an earlier version of it)."""
        self._flush()
        for writer in self._writers.values():
            writer.commit()

    def abort(self) -> None:
        """Drop everything written; the previous version of the part stays."""
        for writer in self._writers.values():
            writer.abort()


class BitcoinIndexStore:
    """The index's files under an analytics root: part paths, progress, the best chain, lookups."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def scratch(self) -> Path:
        """Writers' private scratch space (shared with ``AnalyticsStore``)."""
        return self.root / "_scratch"

    def part_path(self, table: str, network: str, origin: str, part: str) -> Path:
        """The Parquet file of one part of ``table``."""
        if origin not in ORIGINS or "/" in part or part.startswith("."):
            raise ValueError(f"bad index part {origin}/{part}")
        return self.root / table / f"network={network}" / origin / f"{part}.parquet"

    def writer(self, network: str, origin: str, part: str, keep: Collection[bytes] = ()) -> PartWriter:
        """A ``PartWriter`` replacing the part ``origin/part`` of ``network``, starting with the
        rows the current version holds for the blocks whose hashes are in ``keep`` (a range
        that grew, or lost its top blocks to a reorg, is rewritten without refetching the rest)."""
        writer = PartWriter(self, network, origin, part)
        if keep:
            wanted = list(keep)
            for table in BITCOIN_PART_TABLES:
                path = self.part_path(table, network, origin, part)
                if path.exists():
                    rows = pl.scan_parquet(path).filter(pl.col("block_hash").is_in(wanted)).collect()
                    writer.carry(table, rows)
        return writer

    def part_heights(self, network: str, origin: str, part: str) -> dict[int, bytes]:
        """Block hash by source height of the blocks a part holds (blocks without a height are left out)."""
        path = self.part_path("bitcoin_blocks", network, origin, part)
        if not path.exists():
            return {}
        frame = pl.read_parquet(path, columns=["height", "block_hash"]).drop_nulls("height")
        return dict(zip(frame["height"].to_list(), frame["block_hash"].to_list(), strict=True))

    def remove_part(self, network: str, origin: str, part: str) -> None:
        """Delete a part (blocks first, so no view shows half of it); absent parts are ignored."""
        for table in reversed(BITCOIN_PART_TABLES):
            self.part_path(table, network, origin, part).unlink(missing_ok=True)
        self._state_path(network, origin, part).unlink(missing_ok=True)  # the part's progress record

    def parts(self, network: str, origin: str) -> list[str]:
        """The names of the published parts of ``origin`` (by their blocks file), sorted."""
        folder = self.root / "bitcoin_blocks" / f"network={network}" / origin
        return sorted(p.stem for p in folder.glob("*.parquet")) if folder.is_dir() else []

    # --- progress ------------------------------------------------------------------------

    def _state_path(self, network: str, *names: str) -> Path:
        return self.root / "bitcoin_state" / network / Path(*names[:-1]) / f"{names[-1]}.json"

    def state(self, network: str, *names: str) -> dict[str, Any] | None:
        """A progress record of ``network`` (``bitcoin_state/<network>/<names…>.json``; None:
        never written, or unreadable)."""
        try:
            value = json.loads(self._state_path(network, *names).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def save_state(self, network: str, value: dict[str, Any], *names: str) -> None:
        """Write a progress record (atomically: temp + rename)."""
        path = self._state_path(network, *names)
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = temp_name(path)
        try:
            temp.write_text(json.dumps(value, sort_keys=True), encoding="utf-8")
            publish(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise

    def chain_state(self, network: str) -> ChainState | None:
        """The network's completeness as of the last ``link`` (None before the first)."""
        try:
            return ChainState(**(self.state(network, "chain") or {}))
        except TypeError:
            return None

    def height_of(self, network: str, block_hash: str) -> int | None:
        """The height of a block the index holds on its best chain (None: unknown)."""
        con = duckdb.connect(":memory:")
        try:
            found = con.execute(
                f"SELECT height FROM {self._read('bitcoin_best_chain')} WHERE network = ? AND block_hash = ?",
                [network, bytes.fromhex(block_hash)],
            ).fetchone()
        finally:
            con.close()
        return None if found is None else int(found[0])

    def networks(self) -> list[str]:
        """The networks that have at least one ingested part."""
        folder = self.root / "bitcoin_blocks"
        found = (p.name.removeprefix("network=") for p in folder.glob("network=*")) if folder.is_dir() else ()
        return sorted(n for n in found if any(self.parts(n, o) for o in ORIGINS))

    # --- the best chain --------------------------------------------------------------------

    def ensure_layout(self) -> None:
        """Create each index table's folder and zero-row schema file when missing."""
        for table in BITCOIN_TABLES.values():
            write_schema_file(self.root / table.name / EMPTY_FILE, table)

    def _read(self, table: str) -> str:
        """A ``read_parquet`` of every part of ``table`` (its schema file keeps it non-empty)."""
        self.ensure_layout()
        glob = str((self.root / table).resolve() / "**" / "*.parquet").replace("'", "''")
        return f"read_parquet('{glob}', union_by_name = true, hive_partitioning = false)"

    def link(self, network: str) -> ChainState:
        """Recompute the best chain of ``network`` from every ingested block, write it, and
        record how far the index is complete. Linear in the number of blocks. Serialised per
        network by an exclusive lock on ``bitcoin_state/<network>/link.lock`` (several ingest
        or range runs may end together): a link that read the parts before another writer
        published one must not write its best chain after that writer's link."""
        with self._lock(network, "link"):
            return self._link(network)

    @contextmanager
    def _lock(self, network: str, name: str, wait: bool = True) -> Iterator[bool]:
        """An exclusive lock on ``bitcoin_state/<network>/<name>.lock`` (``flock``, released
        with the file, so a killed holder never leaves it taken): yields True once held, or
        False at once when ``wait`` is off and another process holds it."""
        path = self.root / "bitcoin_state" / network / f"{name}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True

    def _link(self, network: str) -> ChainState:
        con = duckdb.connect(":memory:")
        try:
            query = f"SELECT block_hash, prev_hash, bits, height FROM {self._read('bitcoin_blocks')} WHERE network = ?"
            rows = con.execute(query, [network]).fetchall()
        finally:
            con.close()
        chain = best_chain(HeaderLink(b.hex(), p.hex(), bits) for b, p, bits, _ in rows)
        heights = dict(chain.heights)
        linked = len(heights)
        taken = set(heights.values())
        for block_hash, _, _, height in rows:  # heights a node or BIP-34 gave, outside the linked chain
            key = block_hash.hex()
            if height is not None and key not in heights and height not in taken:
                heights[key] = height
                taken.add(height)
        frame = pl.DataFrame(
            {
                "network": [network] * len(heights),
                "block_hash": [bytes.fromhex(h) for h in heights],
                "height": list(heights.values()),
                "linked": [i < linked for i in range(len(heights))],
            },
            schema=BITCOIN_TABLES["bitcoin_best_chain"].schema,
        )
        target = self.root / "bitcoin_best_chain" / f"network={network}" / "best.parquet"
        with ParquetFileWriter(target, BITCOIN_TABLES["bitcoin_best_chain"], self.scratch) as writer:
            writer.write(frame)
        state = ChainState(
            network=network,
            complete_to=complete_height(taken),
            tip_height=max(taken) if taken else None,
            blocks=len(rows),
            linked_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        self.save_state(network, asdict(state), "chain")
        return state

    # --- lookups -----------------------------------------------------------------------------

    # --- the compacted lookup table --------------------------------------------------------

    def _part_marks(self, network: str) -> dict[str, int]:
        """Each published part (``origin/part``) and its blocks file's modification time:
        a part rewritten since a compaction has another mark."""
        marks = {}
        for origin in ORIGINS:
            for part in self.parts(network, origin):
                path = self.part_path("bitcoin_blocks", network, origin, part)
                try:
                    marks[f"{origin}/{part}"] = path.stat().st_mtime_ns
                except FileNotFoundError:
                    continue  # removed meanwhile
        return marks

    def compact(self, network: str, memory_limit: str = "512MB") -> int:
        """``_compact`` under the network's compaction lock (waiting for one running)."""
        with self._lock(network, "compact"):
            return self._compact(network, memory_limit)

    def compact_if_due(self, network: str, after: int) -> int | None:
        """Compact when at least ``after`` parts are left out of the lookup buckets and no
        other process is compacting (then None: that one will do); the rows compacted, or None."""
        with self._lock(network, "compact", wait=False) as held:
            if not held or len(self.uncompacted(network)) < after:
                return None
            return self._compact(network)

    def _compact(self, network: str, memory_limit: str = "512MB") -> int:
        """Merge the key hashes of every part of ``network`` into 256 files by the
        hash's first byte, each sorted by hash (``bitcoin_key_lookup/network=N/gen=G/
        bucket=XX/``), so a lookup reads one small file per hash instead of a footer per block
        file (thousands on mainnet). Two DuckDB passes within ``memory_limit``, spilling to
        scratch: the rows split by bucket (streaming), then each bucket sorted alone (1/256 of
        the rows). The new generation is published by the ``lookup`` record, the one before it
        kept for readers still on it, older ones removed. Returns the rows compacted."""
        marks = self._part_marks(network)
        previous = self.state(network, "lookup") or {}
        generation = int(previous.get("generation", 0)) + 1
        folder = self.root / "bitcoin_key_lookup" / f"network={network}"
        target = folder / f"gen={generation}"
        shutil.rmtree(target, ignore_errors=True)  # a compaction that crashed before publishing
        folder.mkdir(parents=True, exist_ok=True)
        self.scratch.mkdir(parents=True, exist_ok=True)
        parts = [self.part_path("bitcoin_key_hashes", network, *name.split("/")) for name in marks]
        rows = 0
        if parts:
            split = self.scratch / f"lookup-{network}-{generation}"
            shutil.rmtree(split, ignore_errors=True)
            con = duckdb.connect(":memory:")
            try:
                con.execute(f"SET memory_limit = '{memory_limit}'")
                con.execute(f"SET temp_directory = {_quoted(self.scratch / 'duckdb')}")
                con.execute("SET enable_progress_bar = false")
                con.execute("SET preserve_insertion_order = false")
                con.execute("SET threads = 1")  # one writer per bucket is open at a time per thread
                con.execute(f"SET partitioned_write_flush_threshold = {_LOOKUP_ROW_GROUP}")
                con.execute(
                    "COPY (SELECT hash, pubkey, block_hash, txid, kind, substr(hex(hash), 1, 2) AS bucket"
                    f" FROM read_parquet([{', '.join(_quoted(p) for p in parts)}])) TO {_quoted(split)}"
                    " (FORMAT parquet, PARTITION_BY (bucket))"
                )
                for bucket in sorted(split.glob("bucket=*")):
                    (target / bucket.name).mkdir(parents=True)
                    found = con.execute(
                        f"COPY (SELECT * FROM read_parquet({_quoted(bucket / '*.parquet')},"
                        " hive_partitioning = false) ORDER BY hash)"
                        f" TO {_quoted(target / bucket.name / 'data.parquet')}"
                        f" (FORMAT parquet, ROW_GROUP_SIZE {_LOOKUP_ROW_GROUP})"
                    ).fetchone()
                    rows += int(found[0]) if found else 0
            finally:
                con.close()
                shutil.rmtree(split, ignore_errors=True)
        self.save_state(network, {"generation": generation, "parts": marks, "rows": rows}, "lookup")
        for old in folder.glob("gen=*"):
            if old.name.removeprefix("gen=").isdigit() and int(old.name.removeprefix("gen=")) < generation - 1:
                shutil.rmtree(old, ignore_errors=True)
        return rows

    def uncompacted(self, network: str) -> list[str]:
        """The parts (``origin/part``) a lookup reads one by one: published or rewritten
        since the last compaction."""
        parts = (self.state(network, "lookup") or {}).get("parts")
        compacted: dict[str, Any] = parts if isinstance(parts, dict) else {}
        return [name for name, mark in self._part_marks(network).items() if compacted.get(name) != mark]

    def _lookup_sources(self, network: str, hashes: Sequence[bytes]) -> list[str]:
        """``SELECT``s of the rows a lookup of ``hashes`` on ``network`` reads: the compacted
        buckets the hashes fall in, and the key-hash files of every part newer than the
        compaction (the node's ranges, block files ingested or rewritten since)."""
        record = self.state(network, "lookup") or {}
        parts = record.get("parts")
        compacted: dict[str, Any] = parts if isinstance(parts, dict) else {}
        buckets: list[Path] = []
        if compacted:
            folder = self.root / "bitcoin_key_lookup" / f"network={network}" / f"gen={record.get('generation')}"
            for bucket in sorted({h[:1].hex().upper() for h in hashes}):
                buckets += sorted((folder / f"bucket={bucket}").glob("*.parquet"))
        fresh = [
            path
            for name in self.uncompacted(network)
            if (path := self.part_path("bitcoin_key_hashes", network, *name.split("/"))).exists()
        ]
        columns, where = "hash, pubkey, block_hash, txid, kind", "WHERE hash IN (SELECT unnest($wanted::BLOB[]))"
        selects = []
        if buckets:
            files = ", ".join(_quoted(f) for f in buckets)
            selects.append(f"SELECT {_quoted_text(network)} AS network, {columns} FROM read_parquet([{files}]) {where}")
        if fresh:
            files = ", ".join(_quoted(f) for f in fresh)
            selects.append(f"SELECT network, {columns} FROM read_parquet([{files}]) {where}")
        return selects

    def lookup(self, networks: Sequence[str], hashes: Sequence[bytes], per_hash: int = 3) -> list[IndexHit]:
        """The earliest revelations (at most ``per_hash`` each, lowest height first, unknown
        heights last) of keys with an address committing to one of ``hashes``
        (``chains.bitcoin.revelations.address_hashes``), on any of ``networks``. One DuckDB
        query over the compacted buckets and the parts newer than them; row groups whose
        hash range misses are skipped. A part superseded since the compaction (a reorg) may
        still answer from the buckets until the next one: a revelation, if stale, was still
        broadcast."""
        wanted = list(dict.fromkeys(hashes))
        selects = [q for n in networks for q in self._lookup_sources(n, wanted)] if wanted else []
        if not selects:
            return []
        con = duckdb.connect(":memory:")
        try:
            hits = self._query(con, selects, wanted, per_hash)
        except (duckdb.Error, OSError) as exc:
            raise IndexUnreadable(f"the Bitcoin exposure index could not be read: {exc}") from exc
        finally:
            con.close()
        return [IndexHit(h, key, txid.hex(), height, kind) for h, key, txid, height, kind in hits]

    def _query(
        self, con: duckdb.DuckDBPyConnection, selects: list[str], wanted: list[bytes], per_hash: int
    ) -> list[tuple[Any, ...]]:
        return con.execute(
            f"""
                WITH k AS ({" UNION ALL ".join(selects)}),
                     c AS (SELECT network, block_hash, height FROM {self._read("bitcoin_best_chain")}
                           WHERE block_hash IN (SELECT block_hash FROM k))
                , found AS (SELECT DISTINCT k.hash, k.pubkey, k.txid, c.height AS revealed_at, k.kind
                FROM k LEFT JOIN c USING (network, block_hash))
                SELECT hash, pubkey, txid, revealed_at, kind FROM found
                QUALIFY row_number() OVER (PARTITION BY hash ORDER BY revealed_at ASC NULLS LAST, txid, kind) <= $per
                ORDER BY hash, revealed_at ASC NULLS LAST, txid, kind
                """,
            {"wanted": wanted, "per": per_hash},
        ).fetchall()

    def iter_networks_state(self) -> Iterator[ChainState]:
        """The chain state of every network with an index."""
        for network in self.networks():
            state = self.chain_state(network)
            if state is not None:
                yield state


def fingerprint(path: Path) -> dict[str, int]:
    """Size and modification time of a source file: a changed fingerprint means re-ingest
    (Bitcoin Core appends to its newest block file)."""
    stat = os.stat(path)
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
