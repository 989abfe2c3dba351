"""Fixtures of the pipeline tests, a pytest plugin (``pytest_plugins`` in ``tests/conftest.py``)
so that any test module uses them by name, without importing them: the runs' stopped clock
and its date, a data directory with accounts, a loopback Esplora server (on its own
event-loop thread, since Dagster runs synchronously), and a watched world replayed from a
snapshot. Plain helpers are in ``tests/pipelines/support.py``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from chains.environment import Environment
from core.ids import new_id
from pipelines.resources import SnapshotChainDataResource
from pipelines.runner import LoopThread
from pipelines.sources import write_snapshot
from storage.sql import ts
from storage.sql_scans import SqlScanStore
from storage.sqlite_db import open_connection
from tests.chain_clients.loopback import Loopback
from tests.pipelines.support import DataDir, ThreadedLoopback, evm_address, evm_observation


@pytest.fixture
def pipeline_now() -> datetime:
    """The time of every run a test makes (their ``clock`` resource is stopped at it): the
    wall clock's time when the test starts, so a test running across midnight still runs,
    and looks up, one day's partition."""
    return datetime.now(UTC)


@pytest.fixture
def today(pipeline_now: datetime) -> date:
    """The runs' today: the date of ``pipeline_now``."""
    return pipeline_now.date()


@pytest.fixture
def data_dir(tmp_path: Path, pipeline_now: datetime) -> DataDir:
    root = tmp_path / "data"
    root.mkdir()
    open_connection(root / "qday.sqlite").close()
    return DataDir(root, pipeline_now)


@pytest.fixture(scope="session")
def esplora() -> Iterator[ThreadedLoopback]:
    loop = LoopThread("loopback").__enter__()
    server = loop.run(Loopback().start())
    yield ThreadedLoopback(server, loop)
    loop.run(server.stop())
    loop.close()


@pytest.fixture
def snapshot_world(data_dir: DataDir, tmp_path: Path):
    """``count`` watched Ethereum addresses (account a@…) with a replay snapshot of them."""

    def make(count: int = 20, account: str = "a@example.com", start: int = 1) -> tuple[DataDir, dict]:
        account_id = data_dir.account(account)
        observations = []
        conn = data_dir.connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for n in range(start, start + count):
                address = evm_address(n)
                created = datetime.now(UTC) - timedelta(minutes=10)
                conn.execute(
                    "INSERT INTO watchlist VALUES (?,?,?,?,?,?,?)",
                    (new_id("wat"), account_id, "live", "ethereum", address, None, ts(created)),
                )
                observations.append(evm_observation(address, balance=n * 10**17, nonce=n % 7))
            conn.execute("COMMIT")
        finally:
            conn.close()
        watched = data_dir.run(lambda db: SqlScanStore(db).watchlist(account_id, Environment.LIVE))
        assert len(watched) >= count
        snapshot = tmp_path / f"snapshot-{start}-{count}.jsonl"
        write_snapshot(snapshot, observations)
        return data_dir, data_dir.resources(chain_data=SnapshotChainDataResource(snapshot_file=str(snapshot)))

    return make
