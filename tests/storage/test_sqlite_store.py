"""The SQLite operational store: migrations, constraints, multi-process use,
and disk faults mapped to a clear error."""

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
from storage.sqlite import SqliteStore
from storage.sqlite_db import connect, migrate, open_database

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


async def test_duplicate_email_and_unknown_plan_target(tmp_path):
    store = SqliteStore(open_database(tmp_path / "db.sqlite"))
    await store.create_account(_account(1), "hash")
    with pytest.raises(DuplicateEmail):
        await store.create_account(Account("usr_2", "u1@example.com", None, Plan.FREE, NOW), "hash")
    with pytest.raises(AccountNotFound):
        store.set_plan("ghost@example.com", Plan.PRO)
    assert store.set_plan("u1@example.com", Plan.PRO).plan is Plan.PRO


async def test_rotation_is_atomic_and_once(tmp_path):
    store = SqliteStore(open_database(tmp_path / "db.sqlite"))
    await store.create_account(_account(1), "hash")
    await store.create_api_key(_key(1, "usr_1"))
    expires = NOW + timedelta(hours=24)
    assert await store.rotate_api_key("usr_1", "key_1", _key(2, "usr_1"), expires)
    assert not await store.rotate_api_key("usr_1", "key_1", _key(3, "usr_1"), expires)
    assert store.get_api_key("usr_1", "key_3") is None
    old = store.get_api_key("usr_1", "key_1")
    assert old is not None and old.expires_at == expires and old.replaced_by == "key_2"


def _insert_accounts(path: str, start: int, count: int) -> None:
    store = SqliteStore(open_database(Path(path)))
    for n in range(start, start + count):
        asyncio.run(store.create_account(_account(n), "hash"))
    store.close()


def test_several_processes_write_one_file_without_losing_rows(tmp_path):
    path = tmp_path / "db.sqlite"
    SqliteStore(open_database(path)).close()
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
    path = tmp_path / "db.sqlite"
    SqliteStore(open_database(path)).close()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    store = SqliteStore(conn)  # a connection that cannot write, as on a read-only volume
    with pytest.raises(StoreUnavailable):
        await store.create_api_key(_key(1, "usr_1"))


async def test_remembered_credentials_follow_writes_from_other_processes(tmp_path):
    path = tmp_path / "db.sqlite"
    api = SqliteStore(open_database(path))
    admin = SqliteStore(open_database(path))  # another worker or the admin CLI
    await api.create_account(_account(1), "hash")
    await api.create_api_key(_key(1, "usr_1"))
    key_hash = _key(1, "usr_1").key_hash
    assert api.api_key_by_hash(key_hash)[1].plan is Plan.FREE
    assert api.api_key_by_hash(key_hash)[1].plan is Plan.FREE  # served from memory
    admin.set_plan("u1@example.com", Plan.PRO)
    assert api.api_key_by_hash(key_hash)[1].plan is Plan.PRO
    assert await admin.delete_api_key("usr_1", "key_1", NOW)
    assert api.api_key_by_hash(key_hash)[0].deleted_at == NOW
    await api.rotate_api_key("usr_1", "key_1", _key(2, "usr_1"), NOW)  # own writes forget too
    assert api.api_key_by_hash(key_hash)[0].deleted_at == NOW


def test_a_chains_watch_list_export_reads_one_ordered_index_range(tmp_path):
    from storage.scans_sqlite import _WATCH_EXPORT_SQL as _WATCH_SQL

    conn = open_database(tmp_path / "db.sqlite")
    plan = " | ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {_WATCH_SQL}", ("ethereum",)))
    assert "USING INDEX watchlist_by_chain (chain=?)" in plan and "TEMP B-TREE" not in plan, plan
