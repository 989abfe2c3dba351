"""``qday watch import`` with ``QDAY_DATABASE_URL``: rows go to the PostgreSQL database the
API nodes share (nothing to the data directory), within the account's plan cap."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chains.environment import Environment
from cli.main import main
from storage.models import Account, Plan
from storage.postgres_db import PostgresDatabase
from storage.sql_accounts import SqlStore
from storage.sql_scans import SqlScanStore

ADDRESSES = [f"0x{n:040x}" for n in range(1, 4)]


async def _account(url: str) -> str:
    db = await PostgresDatabase.open(url, pool_size=1)
    try:
        await SqlStore(db).create_account(
            Account("usr_ops", "ops@example.com", None, Plan.FREE, datetime.now(UTC)), "h"
        )
        return "usr_ops"
    finally:
        await db.aclose()


async def _watched(url: str, account_id: str) -> list[tuple[str, str, str | None]]:
    db = await PostgresDatabase.open(url, pool_size=1)
    try:
        entries = await SqlScanStore(db).watchlist(account_id, Environment.LIVE)
        return [(e.chain, e.address, e.label) for e in entries]
    finally:
        await db.aclose()


def test_watch_import_writes_to_postgresql(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    account_id = asyncio.run(_account(postgres_url))
    monkeypatch.setenv("QDAY_DATABASE_URL", postgres_url)
    monkeypatch.setenv("QDAY_SECRET_KEY", "c4" * 32)
    source = tmp_path / "watch.csv"
    rows = "".join(f"{address},ethereum,cold {n}\n" for n, address in enumerate(ADDRESSES))
    source.write_text("address,chain,label\n" + rows + "0x1234,,bad\n", encoding="utf-8")
    data = tmp_path / "data"  # never created: the command needs no data directory with a URL
    argv = ["watch", "import", str(source), "--account", "ops@example.com", "--environment", "live"]
    assert main([*argv, "--data-dir", str(data)]) == 1  # one row rejected, the others imported
    captured = capsys.readouterr()
    assert "imported 3, already watched 0, rejected 1" in captured.out
    assert f"{source}:5:" in captured.err
    watched = asyncio.run(_watched(postgres_url, account_id))
    assert sorted(watched) == sorted(("ethereum", a, f"cold {n}") for n, a in enumerate(ADDRESSES))
    assert not data.exists()
    assert main([*argv, "--data-dir", str(data)]) == 1
    assert "imported 0, already watched 3, rejected 1" in capsys.readouterr().out  # idempotent
