"""``qday sql`` reads the operational tables beside the analytics views (issue 18): a
snapshot in schema ``ops``, from the SQLite file or from PostgreSQL with
``QDAY_DATABASE_URL``, that analysts join with the risk tables; secrets never copied."""

from __future__ import annotations

import asyncio
import csv
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chains.environment import Environment
from cli.main import main
from storage.engines import open_database
from storage.models import Account, Plan, ScanResult, WatchedAddress
from storage.operational_snapshot import OPERATIONAL_TABLES
from storage.sql_accounts import SqlStore
from storage.sql_scans import SqlScanStore

NOW = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
SECRET_KEY = "7a" * 32


async def _seed(url: str, data: Path) -> None:
    db = await open_database(url, data / "qday.sqlite")
    try:
        await SqlStore(db).create_account(Account("usr_a", "a@example.com", None, Plan.PRO, NOW), "argon2-HASH-SECRET")
        scans = SqlScanStore(db)
        for n in range(3):
            entry = WatchedAddress(f"wat_{n}", "usr_a", Environment.LIVE, "ethereum", f"0x{n:040x}", f"cold {n}", NOW)
            await scans.watch(entry)
        await scans.save_results(
            [
                ScanResult(
                    "usr_a", Environment.LIVE, "ethereum", "0x" + "0" * 40, "{}", 70, "W3", "2026.1", NOW, NOW, "api"
                )
            ]
        )
    finally:
        await db.aclose()


def _csv(out: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(out)))


@pytest.fixture
def seeded(engine_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data directory whose store (SQLite there, or PostgreSQL named by the environment)
    holds one account, three watched addresses and one result."""
    data = tmp_path / "data"
    data.mkdir()
    asyncio.run(_seed(engine_url, data))
    if engine_url:
        monkeypatch.setenv("QDAY_DATABASE_URL", engine_url)
        monkeypatch.setenv("QDAY_SECRET_KEY", SECRET_KEY)
    return data


def test_operational_tables_join_the_analytics_views(
    seeded: Path, engine_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = seeded
    query = (
        "SELECT w.address, w.label, r.risk_score, a.plan, typeof(w.created_at) AS t"
        " FROM ops.watchlist w JOIN ops.accounts a ON a.id = w.account_id"
        " LEFT JOIN ops.scan_results r ON r.account_id = w.account_id AND r.address = w.address"
        " LEFT JOIN address_risk_latest x ON x.address = w.address"  # the analytics views are there too
        " ORDER BY w.address"
    )
    assert main(["sql", "--data-dir", str(data), "-c", query]) == 0
    rows = _csv(capsys.readouterr().out)
    assert rows[0] == ["address", "label", "risk_score", "plan", "t"]
    assert rows[1] == ["0x" + "0" * 40, "cold 0", "W3", "pro", "TIMESTAMP WITH TIME ZONE"]
    assert [r[0] for r in rows[1:]] == [f"0x{n:040x}" for n in range(3)]
    assert not (data / "qday.sqlite").exists() if engine_url else (data / "qday.sqlite").exists()


def test_no_secret_column_is_copied(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = seeded
    query = "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'ops'"
    assert main(["sql", "--data-dir", str(data), "-c", query]) == 0
    columns = {(t, c) for t, c in _csv(capsys.readouterr().out)[1:]}
    assert {t for t, _ in columns} == set(OPERATIONAL_TABLES)
    secrets = ("password_hash", "key_hash", "key_ref", "wrapping_key", "pqc_signature", "ecdsa_signature")
    for secret in (*secrets, "secret", "previous_secret", "url", "body"):
        assert not any(c == secret for _, c in columns), secret
    assert main(["sql", "--data-dir", str(data), "-c", "SELECT * FROM ops.accounts"]) == 0
    assert "argon2-HASH-SECRET" not in capsys.readouterr().out
