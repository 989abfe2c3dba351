"""The pipelines on PostgreSQL (``QDAY_DATABASE_URL``): the operational store resource reads
the watch list from, and publishes scan results to, the database the API nodes share, and
never creates the SQLite file of the data directory."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from dagster import DagsterInstance, build_sensor_context, materialize

from chains.environment import Environment
from pipelines.assets import RESCORING_ASSETS, risk_checks
from pipelines.automation import new_watched_sensor
from pipelines.resources import SnapshotChainDataResource
from pipelines.sources import write_snapshot
from storage.database import Database
from storage.models import ScanResult
from storage.sql_scans import SqlScanStore
from tests.pipelines.support import DataDir, evm_address, evm_observation, partition

ResultKey = tuple[str, Environment, str, str]


@pytest.fixture
def pg_dir(tmp_path: Path, pipeline_now: datetime, postgres_url: str) -> DataDir:
    """A data directory whose operational store is a fresh PostgreSQL database: its SQLite
    file (``DataDir.db``) is never created."""
    root = tmp_path / "data"
    root.mkdir()
    return DataDir(root, pipeline_now, postgres_url)


def _sqlite_files(data: DataDir) -> list[Path]:
    return sorted(data.root.rglob(f"{data.db.name}*"))


def test_a_daily_run_reads_the_watch_list_from_postgresql_and_publishes_there(pg_dir: DataDir, tmp_path: Path) -> None:
    a, b = pg_dir.account("a@example.com"), pg_dir.account("b@example.com")
    created = datetime.now(UTC) - timedelta(minutes=10)
    live = [evm_address(n) for n in range(1, 6)]
    empty = evm_address(6)  # no balance, never sent: not published (a scan answers SCAN_003)
    for address in [*live, empty]:
        pg_dir.watch(a, "ethereum", address, created_at=created)
    pg_dir.watch(b, "ethereum", live[1], created_at=created)  # one address, two tenants
    pg_dir.watch(a, "ethereum", live[2], Environment.TEST, created_at=created)
    snapshot = tmp_path / "snapshot.jsonl"
    write_snapshot(
        snapshot,
        [evm_observation(address, balance=n * 10**17, nonce=n % 3) for n, address in enumerate(live, 1)]
        + [evm_observation(empty, balance=0, nonce=0), evm_observation(live[2], 10**18, 1, Environment.TEST)],
    )
    resources = pg_dir.resources(chain_data=SnapshotChainDataResource(snapshot_file=str(snapshot)))

    result = materialize(
        [*RESCORING_ASSETS, *risk_checks], partition_key=partition("ethereum", pg_dir.today), resources=resources
    )

    assert result.success
    assert all(check.passed for check in result.get_asset_check_evaluations())
    expected: list[ResultKey] = [
        *((a, Environment.LIVE, "ethereum", address) for address in live),
        (b, Environment.LIVE, "ethereum", live[1]),
        (a, Environment.TEST, "ethereum", live[2]),
    ]
    unpublished: ResultKey = (a, Environment.LIVE, "ethereum", empty)

    async def read_back(db: Database) -> tuple[dict[ResultKey, ScanResult | None], int]:
        scans = SqlScanStore(db)
        found = {key: await scans.latest_result(*key) for key in [*expected, unpublished]}
        row = await db.fetch_one("SELECT count(*) FROM scan_results")
        assert row is not None
        return found, int(row[0])

    stored, count = pg_dir.run(read_back)  # a PostgresDatabase of its own, opened after the run
    assert count == len(expected) and stored[unpublished] is None
    risk = pl.read_parquet(pg_dir.analytics.daily_file("address_risk", pg_dir.today, "ethereum"))
    risk_values = {(Environment(r["environment"]), r["address"]): r["risk_value"] for r in risk.iter_rows(named=True)}
    for key in expected:
        found = stored[key]
        assert found is not None, key
        assert found.source == "pipeline" and found.scanned_at == pg_dir.now, key
        assert found.risk_value == risk_values[(key[1], key[3])], key
    assert _sqlite_files(pg_dir) == []


def test_the_new_watched_sensor_reads_its_candidates_from_postgresql(pg_dir: DataDir) -> None:
    account = pg_dir.account("a@example.com")
    old = pg_dir.watch(account, "ethereum", evm_address(1), created_at=datetime.now(UTC) - timedelta(days=2))
    recent = pg_dir.watch(account, "ethereum", evm_address(2), created_at=datetime.now(UTC) - timedelta(minutes=5))
    resources = pg_dir.resources()
    sensor_resources = {"operational_store": resources["operational_store"], "clock": resources["clock"]}

    with DagsterInstance.ephemeral() as instance:

        def tick(cursor: str | None):
            context = build_sensor_context(instance=instance, cursor=cursor, resources=sensor_resources)
            return new_watched_sensor(context)

        first = tick(None)  # first start: the last hour only
        ids = [r.run_config["ops"]["newly_watched_scores"]["config"]["watch_ids"] for r in first.run_requests]
        assert ids == [[recent.id]] and old.id not in first.cursor
        later = pg_dir.watch(account, "base", evm_address(3))
        second = tick(first.cursor)
        ids = [r.run_config["ops"]["newly_watched_scores"]["config"]["watch_ids"] for r in second.run_requests]
        assert ids == [[later.id]]
    assert _sqlite_files(pg_dir) == []
