"""SIGKILL a Dagster run in the middle of a chain-day partition, rerun it: exactly one copy
of each row everywhere, and no partial or temporary file ever visible to readers.

The same partition (2,000 watched addresses replayed from a snapshot) is run in a spawned
process and killed twice, found by watching what the run leaves behind:

1. the moment ``address_observations`` is published: the run is then in ``native_prices``
   or scoring ``address_risk``;
2. the moment a rerun commits its first group of scan results to the operational store.

After each kill an analyst's DuckDB session still reads every table, and each table holds
no rows or all of them. A last, complete run then leaves exactly one row per address in
each Parquet table, one scan result per (tenant, environment, chain, address) in SQLite,
and an intact SQLite file.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime
from multiprocessing.synchronize import Event
from pathlib import Path

import duckdb
import pytest
from dagster import materialize

from pipelines.assets import RESCORING_ASSETS, risk_checks
from pipelines.resources import SnapshotChainDataResource
from tests.pipelines.support import DataDir, partition

pytestmark = pytest.mark.slow
ADDRESSES = 2_000  # two publish batches of PUBLISH_BATCH, so a kill can fall between them
STAGE_DEADLINE = 90.0  # seconds a child may take to reach its kill point
TABLES = ("watchlist", "address_observations", "native_prices", "address_risk")


def run_partition(root: str, now: str, snapshot: str, go: Event) -> None:
    """The child process: once ``go`` is set, one run of the partition of ``now``'s date
    with its clock stopped at ``now`` (imports are done by then, so a second child can be
    readied while the first one runs)."""
    if go.wait(STAGE_DEADLINE):
        data = DataDir(Path(root), datetime.fromisoformat(now))
        resources = data.resources(chain_data=SnapshotChainDataResource(snapshot_file=snapshot))
        materialize(
            [*RESCORING_ASSETS, *risk_checks], partition_key=partition("ethereum", data.today), resources=resources
        )


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _replaced(path: Path) -> Callable[[], bool]:
    """True once ``path`` is a new file (the atomic rename changes its inode)."""
    before = _inode(path)
    return lambda: _inode(path) not in (None, before)


def _committed(db: Path) -> Callable[[], bool]:
    """True once another connection has committed to the SQLite file."""
    conn = sqlite3.connect(db)
    (before,) = conn.execute("PRAGMA data_version").fetchone()
    return lambda: conn.execute("PRAGMA data_version").fetchone()[0] != before


class Run:
    """A spawned child that runs the partition when told to."""

    def __init__(self, data: DataDir, snapshot: str) -> None:
        spawn = multiprocessing.get_context("spawn")
        self.go = spawn.Event()
        args = (str(data.root), data.now.isoformat(), snapshot, self.go)
        self.process = spawn.Process(target=run_partition, args=args)
        self.process.start()

    def kill_at(self, stage: Callable[[], bool]) -> None:
        """Start the run and SIGKILL it as soon as ``stage()`` holds (bounded in time)."""
        child = self.process
        self.go.set()
        try:
            deadline = time.monotonic() + STAGE_DEADLINE
            while not stage() and child.is_alive() and time.monotonic() < deadline:
                time.sleep(0.002)
            assert child.is_alive(), f"the run ended (exit {child.exitcode}) before its kill point"
            assert time.monotonic() < deadline, "the run did not reach its kill point in time"
            os.kill(child.pid, signal.SIGKILL)
        finally:
            self.stop()
        assert child.exitcode == -signal.SIGKILL

    def stop(self) -> None:
        """Make sure the child is gone."""
        self.process.join(timeout=30 if self.go.is_set() else 0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)


def _raw_counts(data: DataDir) -> dict[str, tuple[int, int]]:
    """Per table: rows and distinct keys in every file a reader's glob sees, read fresh."""
    con = duckdb.connect(":memory:")
    keys = {
        "watchlist": "watch_id",
        "address_observations": "address",
        "native_prices": "environment",
        "address_risk": "address",
    }
    try:
        return {
            table: con.execute(
                f"SELECT count(*), count(DISTINCT {keys[table]}) FROM read_parquet("
                f"'{data.root / 'analytics' / table}/**/*.parquet', union_by_name = true)"
            ).fetchone()
            for table in TABLES
        }
    finally:
        con.close()


def _assert_readers_see_whole_partitions(data: DataDir) -> None:
    full = {"watchlist": ADDRESSES, "address_observations": ADDRESSES, "native_prices": 1, "address_risk": ADDRESSES}
    for table, (rows, distinct) in _raw_counts(data).items():
        assert rows == distinct and rows in (0, full[table]), f"{table}: {rows} rows, {distinct} distinct"
    con = data.analytics.connect()
    try:
        (risk,) = con.execute("SELECT count(*) FROM address_risk").fetchone()
        assert risk in (0, ADDRESSES)
    finally:
        con.close()


def test_killed_runs_then_a_rerun_leave_exactly_one_copy_of_each_row(snapshot_world):
    data, resources = snapshot_world(ADDRESSES)
    snapshot = resources["chain_data"].snapshot_file
    observations = data.analytics.daily_file("address_observations", data.today, "ethereum")
    first, second = Run(data, snapshot), Run(data, snapshot)
    try:
        first.kill_at(_replaced(observations))  # 1: scoring the partition
        _assert_readers_see_whole_partitions(data)
        second.kill_at(_committed(data.db))  # 2: publishing scan results
        _assert_readers_see_whole_partitions(data)
    finally:
        first.stop()
        second.stop()
    conn = sqlite3.connect(data.db)
    try:
        (published,) = conn.execute("SELECT count(*) FROM scan_results WHERE source = 'pipeline'").fetchone()
        assert 0 < published <= ADDRESSES  # the kill came after at least one commit
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()

    key = partition("ethereum", data.today)
    result = materialize([*RESCORING_ASSETS, *risk_checks], partition_key=key, resources=resources)
    assert result.success
    assert _raw_counts(data) == {
        "watchlist": (ADDRESSES, ADDRESSES),
        "address_observations": (ADDRESSES, ADDRESSES),
        "native_prices": (1, 1),
        "address_risk": (ADDRESSES, ADDRESSES),
    }
    conn = sqlite3.connect(data.db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute(
            "SELECT count(*), count(DISTINCT address) FROM scan_results WHERE source = 'pipeline'"
        ).fetchone() == (ADDRESSES, ADDRESSES)
        assert conn.execute("SELECT count(*) FROM watchlist").fetchone()[0] == ADDRESSES
    finally:
        conn.close()
