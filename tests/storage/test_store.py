"""The operational store: accounts and API keys on both engines (the ``database``
fixture); migrations, multi-process use of one file, disk faults mapped to a clear error
and the export's query plan on SQLite."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chains.environment import Environment
from storage.errors import AccountNotFound, DuplicateEmail, StoreUnavailable
from storage.models import Account, ApiKey, KeyType, Plan
from storage.sql_accounts import SqlStore
from storage.sql_scans import _WATCH_EXPORT_SQL
from storage.sqlite_db import connect, migrate
from storage.sqlite_engine import SqliteDatabase

NOW = datetime(2026, 11, 21, tzinfo=UTC)


def _account(n: int) -> Account:
    return Account(f"usr_{n}", f"u{n}@example.com", None, Plan.FREE, NOW)


def _key(n: int, account_id: str) -> ApiKey:
    return ApiKey(
        f"key_{n}", account_id, "k", KeyType.SECRET, Environment.LIVE, bytes([n]) * 32, "svc_sec_live_sk_x", NOW
    )


def test_migrations_apply_once(tmp_path):
    conn = connect(tmp_path / "db.sqlite")
    assert migrate(conn)[0] == "0001_accounts_and_api_keys.sql"
    assert migrate(conn) == []
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_duplicate_email_and_unknown_plan_target(database):
    store = SqlStore(database)
    await store.create_account(_account(1), "hash")
    with pytest.raises(DuplicateEmail):
        await store.create_account(Account("usr_2", "u1@example.com", None, Plan.FREE, NOW), "hash")
    assert await store.account_by_id("usr_2") is None  # nothing of the refused account kept
    with pytest.raises(AccountNotFound):
        await store.set_plan("ghost@example.com", Plan.PRO)
    assert (await store.set_plan("U1@Example.com", Plan.PRO)).plan is Plan.PRO  # emails compare in email_form
    found = await store.account_by_email("u1@example.com")
    assert found is not None and found == (Account("usr_1", "u1@example.com", None, Plan.PRO, NOW), "hash")


async def test_rotation_is_atomic_and_once(database):
    store = SqlStore(database)
    await store.create_account(_account(1), "hash")
    await store.create_api_key(_key(1, "usr_1"))
    expires = NOW + timedelta(hours=24)
    assert await store.rotate_api_key("usr_1", "key_1", _key(2, "usr_1"), expires)
    assert not await store.rotate_api_key("usr_1", "key_1", _key(3, "usr_1"), expires)
    assert await store.get_api_key("usr_1", "key_3") is None
    old = await store.get_api_key("usr_1", "key_1")
    assert old is not None and old.expires_at == expires and old.replaced_by == "key_2"
    assert await store.get_api_key("usr_2", "key_2") is None  # another account's key


async def test_deleted_keys_and_revoked_sessions(database):
    store = SqlStore(database)
    await store.create_account(_account(1), "hash")
    await store.create_api_key(_key(1, "usr_1"))
    assert not await store.delete_api_key("usr_2", "key_1", NOW)  # not usr_2's
    assert await store.delete_api_key("usr_1", "key_1", NOW)
    assert not await store.delete_api_key("usr_1", "key_1", NOW)  # once
    assert await store.list_api_keys("usr_1", None) == []
    assert not await store.session_revoked("ses_1")
    await store.revoke_session("ses_1", "usr_1", NOW, NOW + timedelta(hours=1))
    await store.revoke_session("ses_1", "usr_1", NOW, NOW + timedelta(hours=1))  # idempotent
    assert await store.session_revoked("ses_1")
    await store.revoke_session("ses_2", "usr_1", NOW + timedelta(hours=2), NOW + timedelta(hours=3))
    rows = await database.fetch_all("SELECT session_id FROM revoked_sessions ORDER BY session_id")
    assert rows == [("ses_2",)]  # ses_1 had expired by then: dropped


async def test_a_touch_is_bookkeeping_nobody_waits_for(database):
    store = SqlStore(database)
    await store.create_account(_account(1), "hash")
    await store.create_api_key(_key(1, "usr_1"))
    store.touch_api_key("key_1", NOW + timedelta(minutes=5))
    store.touch_api_key("key_missing", NOW)  # changes nothing, raises nothing

    async def touched() -> datetime | None:
        key = await store.get_api_key("usr_1", "key_1")
        assert key is not None
        return key.last_used_at

    for _ in range(100):  # PostgreSQL runs it as a task of the loop: done within a few passes
        if await touched() is not None:
            break
        await asyncio.sleep(0.01)
    assert await touched() == NOW + timedelta(minutes=5)


def _insert_accounts(path: str, start: int, count: int) -> None:
    db = SqliteDatabase(Path(path))
    store = SqlStore(db)
    for n in range(start, start + count):
        asyncio.run(store.create_account(_account(n), "hash"))
    db.close()


def test_several_processes_write_one_file_without_losing_rows(tmp_path):
    path = tmp_path / "db.sqlite"
    SqliteDatabase(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_insert_accounts, args=(str(path), i * 1000, 200)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    count = sqlite3.connect(path).execute("SELECT count(*) FROM accounts").fetchone()[0]
    assert count == 600


async def test_read_only_store_gives_store_unavailable(tmp_path):
    db = SqliteDatabase(tmp_path / "db.sqlite")
    db._conn.execute("PRAGMA query_only = ON")  # its writes now fail as on a read-only volume
    try:
        with pytest.raises(StoreUnavailable):
            await SqlStore(db).create_account(_account(1), "hash")
    finally:
        db.close()


def test_a_chains_watch_list_export_reads_one_ordered_index_range(tmp_path):
    db = SqliteDatabase(tmp_path / "db.sqlite")
    rows = asyncio.run(db.fetch_all(f"EXPLAIN QUERY PLAN {_WATCH_EXPORT_SQL['sqlite']}", ("ethereum",)))
    db.close()
    plan = " | ".join(row[3] for row in rows)
    assert "USING INDEX watchlist_by_chain (chain=?)" in plan and "TEMP B-TREE" not in plan, plan
