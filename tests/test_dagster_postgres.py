"""Dagster's instance storage on the operational PostgreSQL database (``qday up`` with
``QDAY_DATABASE_URL``): the run, event-log and schedule storage are PostgreSQL's, in the
``dagster`` schema, and a run materialized through the instance is recorded there, where
any other process on that database sees it."""

from __future__ import annotations

import psycopg
import pytest
from dagster import DagsterInstance, asset, materialize

from cli.supervisor import DAGSTER_SCHEMA, create_dagster_schema, dagster_postgres_url, prepare_dagster_home


@asset
def answer() -> int:
    """A trivial asset: what is recorded is the run, not the work."""
    return 42


def test_the_dagster_url_selects_its_schema_and_keeps_the_rest() -> None:
    url = dagster_postgres_url("postgresql://qday:p%40ss@db.internal:5432/qday?sslmode=require&options=-c%20x%3D1")
    assert url.startswith("postgresql+psycopg2://qday:p%40ss@db.internal:5432/qday?")
    assert "sslmode=require" in url
    assert "options=-c%20search_path%3Ddagster" in url
    assert "x%3D1" not in url  # one options value: the schema's


def test_the_instance_stores_runs_in_postgresql(tmp_path, postgres_url, monkeypatch: pytest.MonkeyPatch) -> None:
    create_dagster_schema(postgres_url)
    create_dagster_schema(postgres_url)  # idempotent: every `qday up` runs it
    monkeypatch.setenv("QDAY_DAGSTER_POSTGRES_URL", dagster_postgres_url(postgres_url))
    home = prepare_dagster_home(tmp_path / "data", postgres=True)
    assert "QDAY_DAGSTER_POSTGRES_URL" in (home / "dagster.yaml").read_text()
    assert "telemetry" in (home / "dagster.yaml").read_text()  # the rest of qday's instance settings stay
    with DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"
        result = materialize([answer], instance=instance)
        assert result.success
        run_id = result.run_id
    with DagsterInstance.from_config(str(home)) as other:  # another process's view of the same storage
        record = other.get_run_record_by_id(run_id)
        assert record is not None and record.dagster_run.is_success
    assert not list(home.rglob("*.db"))  # no SQLite run, event-log or schedule storage
    with psycopg.connect(postgres_url) as conn:
        (runs,) = conn.execute(f"SELECT count(*) FROM {DAGSTER_SCHEMA}.runs WHERE run_id = %s", (run_id,)).fetchone()
        (public,) = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name = 'runs'"
        ).fetchone()
    assert runs == 1
    assert public == 0  # Dagster's tables stay out of qday's schema
