"""Parquet files written atomically, and the DuckDB views over them."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from storage.analytics import TABLES, VIEWS, AnalyticsStore, ParquetFileWriter

DAY = date(2026, 11, 22)


def readiness_rows(n: int, run: str = "r1", day: date = DAY) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "chain": f"chain{i}",
                "category": "major",
                "family": "evm",
                "grade": "F",
                "grade_label": "x",
                "factor": "signature_scheme",
                "status": "vulnerable",
                "detail": "d",
                "source": "https://example.org",
                "scoring_version": "v",
                "readiness_as_of": DAY,
                "scan_date": day,
                "run_id": run,
            }
            for i in range(n)
        ],
        schema=TABLES["chain_readiness"].schema,
    )


def test_views_exist_and_are_empty_before_any_run(tmp_path: Path) -> None:
    con = AnalyticsStore(tmp_path / "analytics").connect()
    names = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert names == set(VIEWS)
    for view in VIEWS:
        assert con.execute(f"SELECT count(*) FROM {view}").fetchall() == [(0,)]
    columns = [r[0] for r in con.execute("DESCRIBE address_risk").fetchall()]
    assert columns[:3] == ["environment", "chain", "address"] and "risk_value" in columns


def test_a_failed_write_keeps_the_previous_file(tmp_path: Path) -> None:
    store = AnalyticsStore(tmp_path)
    target = store.daily_file("chain_readiness", DAY)
    store.write_frame("chain_readiness", target, readiness_rows(3))
    with pytest.raises(RuntimeError), store.writer("chain_readiness", target) as writer:
        writer.write(readiness_rows(5, "r2"))
        raise RuntimeError("upstream went away mid-run")
    assert pl.read_parquet(target)["run_id"].to_list() == ["r1"] * 3
    assert sorted(p.name for p in target.parent.iterdir()) == ["daily.parquet"]
    assert not store.scratch.exists() or not any(store.scratch.iterdir())


def test_a_file_written_in_parts_equals_one_written_at_once(tmp_path: Path) -> None:
    store = AnalyticsStore(tmp_path)
    store.ensure_layout()
    rows = readiness_rows(1000)
    target = tmp_path / "parts.parquet"
    with ParquetFileWriter(target, TABLES["chain_readiness"], store.scratch, rows_per_part=64) as writer:
        for start in range(0, 1000, 100):
            writer.write(rows.slice(start, 100))
    assert pl.read_parquet(target).equals(rows)


def test_nothing_to_write_still_replaces_the_partition(tmp_path: Path) -> None:
    store = AnalyticsStore(tmp_path)
    target = store.daily_file("chain_readiness", DAY)
    store.write_frame("chain_readiness", target, readiness_rows(3))
    with store.writer("chain_readiness", target):
        pass
    assert pl.read_parquet(target).height == 0


def test_newly_watched_rows_count_until_a_daily_file_covers_them(tmp_path: Path) -> None:
    store = AnalyticsStore(tmp_path)
    schema = TABLES["native_prices"].schema
    at = datetime(2026, 11, 22, 3, tzinfo=UTC)

    def prices(env: str, batch: str, run: str) -> pl.DataFrame:
        return pl.DataFrame(
            [
                {
                    "environment": env,
                    "chain": "ethereum",
                    "symbol": "ETH",
                    "price_usd": 1.0,
                    "price_as_of": at,
                    "price_source": "s",
                    "scan_date": DAY,
                    "batch": batch,
                    "run_id": run,
                    "fetched_at": at,
                }
            ],
            schema=schema,
        )

    store.write_frame(
        "native_prices", store.new_file("native_prices", DAY, "ethereum", "run1"), prices("live", "new", "run1")
    )
    store.write_frame(
        "native_prices",
        store.new_file("native_prices", DAY, "ethereum", "run2"),
        pl.concat([prices("live", "new", "run2"), prices("test", "new", "run2")]),
    )
    con = store.connect()
    query = "SELECT environment, batch, run_id FROM native_prices ORDER BY environment"
    assert con.execute(query).fetchall() == [("live", "new", "run2"), ("test", "new", "run2")]
    store.write_frame("native_prices", store.daily_file("native_prices", DAY, "ethereum"), prices("live", "daily", "d"))
    assert con.execute(query).fetchall() == [("live", "daily", "d"), ("test", "new", "run2")]


def test_a_catalog_file_holds_only_views_and_opens_read_only_many_times(tmp_path: Path) -> None:
    store = AnalyticsStore(tmp_path / "analytics")
    store.write_frame("chain_readiness", store.daily_file("chain_readiness", DAY), readiness_rows(2))
    catalog = store.write_catalog(tmp_path / "catalog.duckdb")
    first = duckdb.connect(str(catalog), read_only=True)
    second = duckdb.connect(str(catalog), read_only=True)
    assert first.execute("SELECT count(*) FROM chain_readiness").fetchall() == [(2,)]
    later = date(2026, 11, 23)
    store.write_frame("chain_readiness", store.daily_file("chain_readiness", later), readiness_rows(4, day=later))
    assert second.execute("SELECT count(*) FROM chain_readiness_latest").fetchall() == [(4,)]
    first.close()
    second.close()
