"""What the pipelines read and write through ``storage`` (they run no SQL themselves), the
table schemas derived from the scorer's, the risk check's use of the scorer's formula, and
the injected clock."""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from dagster import materialize

from chains.codecs.detect import parse_address
from chains.environment import Environment
from chains.registry import Chain
from pipelines.assets import RESCORING_ASSETS, risk_checks
from pipelines.rescore import DAILY, FAMILY_TARGET_ORDER, Batch, export_family_targets, export_watchlist, risk_problems
from pipelines.resources import FixedClockResource, OperationalStoreResource
from scoring import load_readiness, observations_to_frame, score_frame
from storage.analytics import BALANCE, EVIDENCE_DTYPE, TABLES, UTC_TS
from storage.database import Row
from storage.models import ScanResult, WatchedAddress
from storage.sql_scans import WATCH_EXPORT_COLUMNS, SqlScanStore
from tests.pipelines.support import DataDir, evm_address, evm_observation, partition

# The statement ``pipelines.rescore`` ran itself before the export moved into the store.
OLD_EXPORT_SQL = (
    "SELECT id, account_id, environment, chain, address, label, created_at FROM watchlist"
    " WHERE chain = ? ORDER BY environment, address, account_id"
)


def _watch_many(data_dir: DataDir) -> list[WatchedAddress]:
    """Two tenants, both environments, three chains, one address watched twice."""
    a, b = data_dir.account("a@example.com"), data_dir.account("b@example.com")
    at = datetime(2026, 11, 22, 1, tzinfo=UTC)
    entries = []
    for n in (5, 3, 9, 1):
        entries.append(data_dir.watch(a, "ethereum", evm_address(n), label=f"w{n}", created_at=at))
    entries.append(data_dir.watch(b, "ethereum", evm_address(3), created_at=at + timedelta(seconds=1)))
    entries.append(data_dir.watch(a, "ethereum", evm_address(2), Environment.TEST, created_at=at))
    entries.append(data_dir.watch(a, "base", evm_address(4), created_at=at))
    return entries


async def _chunks(stream: AsyncGenerator[list[Row], None]) -> list[list[Row]]:
    return [rows async for rows in stream]


def test_the_watchlist_export_returns_the_rows_of_the_old_query_in_chunks(data_dir: DataDir) -> None:
    _watch_many(data_dir)
    conn = data_dir.connect()
    try:
        for chain, count in (("ethereum", 6), ("base", 1), ("bitcoin", 0)):
            old = conn.execute(OLD_EXPORT_SQL, (chain,)).fetchall()
            chunks = data_dir.run(lambda db, chain=chain: _chunks(SqlScanStore(db).export_watchlist(chain, chunk=2)))
            assert len(old) == count and [row for rows in chunks for row in rows] == old, chain
            assert [len(rows) for rows in chunks] == [2] * (count // 2) + [1] * (count % 2)
            assert all(len(row) == len(WATCH_EXPORT_COLUMNS) for row in old)
    finally:
        conn.close()


def test_the_watchlist_export_is_one_snapshot_even_while_entries_are_added(data_dir: DataDir) -> None:
    _watch_many(data_dir)
    account = data_dir.account("a@example.com")
    with OperationalStoreResource(database=str(data_dir.db)).open(writer=False) as op:
        export = op.export_watchlist("ethereum", 1)
        first = next(export)
        added = data_dir.watch(account, "ethereum", evm_address(0))  # sorts first: already read past
        later = data_dir.watch(account, "ethereum", evm_address(99))  # sorts last: still ahead of the cursor
        rest = [row for rows in export for row in rows]
        ids = {row[0] for row in [*first, *rest]}
        assert len(ids) == 6 and added.id not in ids and later.id not in ids
        assert sum(len(rows) for rows in op.export_watchlist("ethereum", 10_000)) == 8  # a new read sees them


def test_exporting_through_the_store_writes_the_old_frame(data_dir: DataDir) -> None:
    _watch_many(data_dir)
    store = data_dir.analytics
    target = store.daily_file("watchlist", data_dir.today, "ethereum")
    batch = Batch(data_dir.today, DAILY, "run-1")
    resource = OperationalStoreResource(database=str(data_dir.db))
    with resource.open(writer=False) as op, store.writer("watchlist", target) as writer:
        rows, distinct = export_watchlist(op, Chain.ETHEREUM, writer, batch, data_dir.now, chunk=4)
    assert (rows, distinct) == (6, 5)  # evm_address(3) is watched by both tenants
    frame = pl.read_parquet(target)
    assert frame.schema == TABLES["watchlist"].schema
    conn = data_dir.connect()
    try:
        old = conn.execute(OLD_EXPORT_SQL, ("ethereum",)).fetchall()
    finally:
        conn.close()
    assert frame.select("watch_id", "account_id", "environment", "chain", "address", "label").rows() == [
        row[:6] for row in old
    ]
    assert frame["created_at"].to_list() == [datetime.fromisoformat(row[6]) for row in old]
    assert set(frame["exported_at"].to_list()) == {data_dir.now}


def test_family_targets_are_the_siblings_of_addresses_watched_on_the_family_chains(data_dir: DataDir) -> None:
    _watch_many(data_dir)
    store = data_dir.analytics
    batch = Batch(data_dir.today, DAILY, "run-1")
    found = {}
    resource = OperationalStoreResource(database=str(data_dir.db))
    for chain in (Chain.ETHEREUM, Chain.BASE, Chain.TRON, Chain.BITCOIN):
        target = store.daily_file("family_targets", data_dir.today, chain.value)
        with (
            resource.open(writer=False) as op,
            store.writer("family_targets", target, sort_by=FAMILY_TARGET_ORDER) as writer,
        ):
            read, invalid = export_family_targets(op, chain, writer, batch, chunk=2)
        assert invalid == 0 and read == {"ethereum": 1, "base": 5, "tron": 6, "bitcoin": 0}[chain.value]
        found[chain] = pl.read_parquet(target)
    # the ethereum watch list's own addresses are no targets there; base's one is
    assert found[Chain.ETHEREUM].select("environment", "address").rows() == [("live", evm_address(4))]
    assert found[Chain.BASE].select("environment", "address").rows() == [
        *sorted(("live", evm_address(n)) for n in (1, 3, 5, 9)),
        ("test", evm_address(2)),
    ]
    tron = found[Chain.TRON]
    assert tron.height == 6 and set(tron["chain"]) == {"tron"} and all(a.startswith("T") for a in tron["address"])
    assert tron["family"].to_list() == [
        f"keccak:{parse_address(a, 'tron', Environment(e).network).payload.hex()}"
        for e, a in tron.select("environment", "address").rows()
    ]
    assert tron.select("environment", "address").rows() == sorted(tron.select("environment", "address").rows())
    assert found[Chain.BITCOIN].height == 0


def _threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name in ("qday-pipeline-loop", "qday-group-commit"))


def _result(account: str, address: str, data_as_of: datetime, risk_value: int) -> ScanResult:
    return ScanResult(
        account, Environment.LIVE, "ethereum", address, "{}", risk_value, "W1", "v", data_as_of, data_as_of, "pipeline"
    )


def test_the_operational_store_resource_owns_its_loop_connection_and_writer(data_dir: DataDir) -> None:
    resource = OperationalStoreResource(database=str(data_dir.db))
    before = _threads()
    with resource.open(writer=False) as op:
        assert op.watched() == []
        assert _threads() == sorted([*before, "qday-pipeline-loop"])  # no writer thread
        with pytest.raises(RuntimeError, match="read-only"):
            op.publish([])
    assert _threads() == before
    account = data_dir.account("a@example.com")
    entry = data_dir.watch(account, "ethereum", evm_address(7))
    at = datetime(2026, 11, 22, 2, tzinfo=UTC)
    with resource.open() as op:
        assert _threads() == sorted([*before, "qday-group-commit", "qday-pipeline-loop"])
        assert [e.id for e in op.watched()] == [entry.id]
        assert op.publish([]) == (0, 0)
        assert op.publish([_result(account, entry.address, at, 40)]) == (1, 0)
        # a result of older chain data than the stored one (an API refresh since the run observed it) is kept
        assert op.publish([_result(account, entry.address, at - timedelta(hours=1), 90)]) == (0, 1)
    assert _threads() == before
    assert [(row[3], row[5]) for row in data_dir.results()] == [(entry.address, 40)]


def test_analytics_tables_store_the_scorer_columns_as_declared() -> None:
    """``storage.analytics`` derives these from ``scoring``'s schemas: the stored types are pinned here."""
    risk = TABLES["address_risk"].schema
    assert list(risk.items())[:21] == [
        ("environment", pl.String()),
        ("chain", pl.String()),
        ("address", pl.String()),
        ("address_type", pl.String()),
        ("account_type", pl.String()),
        ("balance", BALANCE),
        ("balance_native", pl.Float64()),
        ("decimals", pl.UInt8()),
        ("symbol", pl.String()),
        ("tx_count", pl.Int64()),
        ("outbound_tx_count", pl.Int64()),
        ("exposure", pl.String()),
        ("public_key", pl.Binary()),
        ("address_reuse_count", pl.Int64()),
        ("first_activity", UTC_TS),
        ("last_activity", UTC_TS),
        ("source", pl.String()),
        ("height", pl.Int64()),
        ("observed_at", UTC_TS),
        ("has_activity", pl.Boolean()),
        ("family", pl.String()),
    ]
    scores = [f"{f}_score" for f in ("public_key_exposure", "balance_at_risk", "transaction_frequency")]
    scores += ["address_type_score", "address_reuse_score"]
    assert list(risk.items())[21:] == [
        ("observed_exposure", pl.String()),
        ("exposure_evidence", pl.List(EVIDENCE_DTYPE)),
        ("coverage_checked", pl.List(pl.String())),
        ("coverage_unavailable", pl.List(pl.String())),
        ("exposure_complete", pl.Boolean()),
        ("price_usd", pl.Float64()),
        ("price_as_of", UTC_TS),
        ("public_key_basis", pl.String()),
        ("public_key_exposed", pl.Boolean()),
        ("balance_usd", pl.Float64()),
        *((name, pl.UInt8()) for name in scores),
        ("risk_value", pl.UInt8()),
        ("risk_score", pl.String()),
        ("chain_grade", pl.String()),
        ("scoring_version", pl.String()),
        ("scanned_at", UTC_TS),
        ("scan_date", pl.Date()),
        ("batch", pl.String()),
        ("run_id", pl.String()),
    ]
    assert TABLES["address_observations"].schema.names() == [*risk.names()[:21], "scan_date", "batch", "run_id"]


def test_the_risk_check_uses_the_scorers_weighted_sum() -> None:
    observations = [evm_observation(evm_address(n), n * 10**18, n % 4)[1] for n in range(1, 21)]
    scored = score_frame(observations_to_frame(observations), load_readiness())
    assert risk_problems(scored) == {"null_scores": 0, "risk_value_mismatch": 0}
    off = scored.with_columns(
        pl.when(pl.int_range(pl.len()) < 3).then(pl.col("risk_value") + 1).otherwise(pl.col("risk_value"))
    )
    assert risk_problems(off) == {"null_scores": 0, "risk_value_mismatch": 3}
    missing = scored.with_columns(
        pl.when(pl.int_range(pl.len()) < 2)
        .then(None)
        .otherwise(pl.col("address_reuse_score"))
        .alias("address_reuse_score")
    )
    assert risk_problems(missing) == {"null_scores": 2, "risk_value_mismatch": 0}  # counted once, as null


def test_a_run_takes_its_times_from_the_clock_resource(snapshot_world, data_dir: DataDir) -> None:
    _, resources = snapshot_world(5)
    at = data_dir.now.replace(hour=0, minute=0, second=1, microsecond=0)  # the clock's day, not the wall's time
    resources = {**resources, "clock": FixedClockResource(at=at.isoformat())}
    assert materialize(
        [*RESCORING_ASSETS, *risk_checks], partition_key=partition("ethereum", at.date()), resources=resources
    ).success
    store = data_dir.analytics
    stamps = {
        "watchlist": "exported_at",
        "native_prices": "fetched_at",
        "address_risk": "scanned_at",
    }
    for table, column in stamps.items():
        assert set(pl.read_parquet(store.daily_file(table, at.date(), "ethereum"))[column].to_list()) == {at}, table
    assert {row[6] for row in data_dir.results()} == {at.isoformat(timespec="microseconds")}
