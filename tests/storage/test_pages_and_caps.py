"""The store's side of issue 15: keyset pages on (created_at, id) read by index, the
watch-list count kept by triggers (migration 0009, backfilled), and caps checked in the
inserting transaction, exact across connections. Repository behaviour runs on both
engines (the ``database`` fixture); the query plans, the backfill and the threads sharing
one file are SQLite's (PostgreSQL's two nodes: ``test_postgres_engine``)."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from importlib import resources

from chains.environment import Environment
from storage.database import Database
from storage.models import Account, ApiKey, KeyType, Plan, WatchedAddress
from storage.sql import ts
from storage.sql_accounts import SqlStore
from storage.sql_scans import SqlScanStore
from storage.sqlite_db import connect, migrate, split_statements
from storage.sqlite_engine import SqliteDatabase

NOW = datetime(2026, 11, 21, tzinfo=UTC)


def _entry(n: int, account: str = "usr_1", env: Environment = Environment.LIVE, at: datetime = NOW) -> WatchedAddress:
    return WatchedAddress(f"wat_{n:04d}", account, env, "ethereum", f"0x{n:040x}", None, at)


async def _accounts(db: Database, *ids: str) -> None:
    store = SqlStore(db)
    for account_id in ids:
        await store.create_account(Account(account_id, f"{account_id}@example.com", None, Plan.FREE, NOW), "h")


async def _count(db: Database, sql: str) -> int:
    row = await db.fetch_one(sql)
    assert row is not None
    return int(row[0])


async def test_watch_cap_counts_both_environments_and_ignores_idempotent_adds(database):
    await _accounts(database, "usr_1", "usr_2")
    store = SqlScanStore(database)
    for n in range(2):
        assert await store.watch(_entry(n), cap=3) is not None
    assert await store.watch(_entry(2, env=Environment.TEST), cap=3) is not None
    assert await store.watch(_entry(3), cap=3) is None  # the fourth: refused, nothing stored
    again = await store.watch(
        WatchedAddress("wat_new", "usr_1", Environment.LIVE, "ethereum", _entry(0).address, None, NOW), cap=3
    )
    assert again is not None and again.id == "wat_0000"  # already watched: answered at the cap
    assert await store.watch(_entry(9, account="usr_2"), cap=3) is not None  # another account's count
    assert await store.watch(_entry(4), cap=None) is not None  # no cap: tools and tests
    assert await store.watch_count("usr_1") == 4
    assert await store.unwatch("usr_1", Environment.LIVE, "wat_0004")
    assert await store.unwatch("usr_1", Environment.LIVE, "wat_0001")
    assert not await store.unwatch("usr_2", Environment.LIVE, "wat_0000")  # not usr_2's
    assert await store.watch_count("usr_1") == 2
    assert await store.watch(_entry(5), cap=3) is not None
    assert await _count(database, "SELECT COUNT(*) FROM watchlist WHERE account_id = 'usr_1'") == 3
    counts = [await store.watch_count(account) for account in ("usr_1", "usr_2", "nobody")]
    assert counts == [3, 1, 0]


def test_concurrent_connections_cannot_overshoot_the_watch_cap(tmp_path):
    path = tmp_path / "db.sqlite"
    first = SqliteDatabase(path)
    asyncio.run(_accounts(first, "usr_1"))
    first.close()
    added: list[int] = []

    def worker(offset: int) -> None:
        db = SqliteDatabase(path)  # a connection of its own, as another process has
        store = SqlScanStore(db)

        async def run() -> int:
            stored = [await store.watch(_entry(offset + n), cap=100) for n in range(70)]
            return sum(1 for s in stored if s is not None)

        try:
            added.append(asyncio.run(run()))
        finally:
            db.close()

    threads = [threading.Thread(target=worker, args=(offset,)) for offset in (0, 1000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(added) == 100
    conn = connect(path)
    assert conn.execute("SELECT COUNT(*) FROM watchlist").fetchone()[0] == 100
    assert conn.execute("SELECT n FROM watch_counts WHERE account_id = 'usr_1'").fetchone()[0] == 100


def test_migration_0009_backfills_the_watch_counts(tmp_path):
    conn = connect(tmp_path / "db.sqlite")
    conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    files = sorted(
        (f for f in resources.files("storage.migrations").iterdir() if f.name.endswith(".sql")), key=lambda f: f.name
    )
    for file in files:
        if file.name >= "0009":
            break
        for statement in split_statements(file.read_text()):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (file.name, ts(NOW)))
    for account_id in ("usr_1", "usr_2"):
        conn.execute(
            "INSERT INTO accounts (id, email, name, plan, password_hash, created_at) VALUES (?,?,NULL,'free','h',?)",
            (account_id, f"{account_id}@example.com", ts(NOW)),
        )
    for n in range(5):
        e = _entry(n, "usr_1" if n < 3 else "usr_2", Environment.LIVE if n % 2 else Environment.TEST)
        conn.execute(
            "INSERT INTO watchlist (id, account_id, environment, chain, address, label, created_at)"
            " VALUES (?,?,?,?,?,NULL,?)",
            (e.id, e.account_id, e.environment.value, e.chain, e.address, ts(e.created_at)),
        )
    applied = migrate(conn)
    assert applied[:2] == ["0009_list_pages_and_caps.sql", "0010_watched_descriptors.sql"]
    assert applied == [file.name for file in files if file.name >= "0009"]
    assert dict(conn.execute("SELECT account_id, n FROM watch_counts")) == {"usr_1": 3, "usr_2": 2}


async def test_watchlist_pages_by_keyset(database):
    await _accounts(database, "usr_1")
    store = SqlScanStore(database)
    entries = [_entry(n, at=NOW + timedelta(seconds=n // 2)) for n in range(7)]  # pairs share a time
    for e in reversed(entries):
        await store.watch(e)
    pages, after = [], None
    while True:
        page = await store.watchlist("usr_1", Environment.LIVE, after, 3)
        if not page:
            break
        pages.append([w.id for w in page])
        after = (page[-1].created_at, page[-1].id)
    assert pages == [["wat_0000", "wat_0001", "wat_0002"], ["wat_0003", "wat_0004", "wat_0005"], ["wat_0006"]]
    assert await store.watchlist("usr_1", Environment.LIVE) == entries
    assert await store.watchlist("usr_1", Environment.TEST) == []


def test_a_watchlist_page_is_one_range_of_the_account_index(tmp_path):
    db = SqliteDatabase(tmp_path / "db.sqlite")
    plan = " ".join(
        row[3]
        for row in asyncio.run(
            db.fetch_all(
                "EXPLAIN QUERY PLAN SELECT id FROM watchlist WHERE account_id = ? AND environment = ?"
                " AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT 3",
                ("usr_1", "live", ts(NOW), "wat_0001"),
            )
        )
    )
    db.close()
    assert "watchlist_by_account" in plan and "TEMP B-TREE" not in plan


async def test_api_key_cap_counts_current_keys_only(database):
    await _accounts(database, "usr_1")
    store = SqlStore(database)

    def key(n: int, **extra) -> ApiKey:
        return ApiKey(f"key_{n}", "usr_1", "k", KeyType.SECRET, Environment.LIVE, bytes([n]) * 32, "p", NOW, **extra)

    assert await store.create_api_key(key(1), cap=3)
    assert await store.create_api_key(key(2, deleted_at=NOW), cap=3)  # deleted: never counts
    assert await store.create_api_key(key(3, expires_at=NOW - timedelta(seconds=1)), cap=3)  # expired
    assert await store.create_api_key(key(4), cap=3)
    assert await store.rotate_api_key("usr_1", "key_4", key(5), NOW + timedelta(days=1))  # key_4 rotated out
    assert await store.create_api_key(key(6), cap=3)  # key_1, key_5, key_6
    assert not await store.create_api_key(key(7), cap=3)
    assert await store.create_api_key(key(7))  # no cap: tools and tests
    assert await _count(database, "SELECT COUNT(*) FROM api_keys") == 7
    usable = await store.list_api_keys("usr_1", None, usable_at=NOW)
    assert [k.id for k in usable] == ["key_1", "key_4", "key_5", "key_6", "key_7"]  # key_4 in its grace period
    assert [k.id for k in await store.list_api_keys("usr_1", None, NOW, (NOW, "key_4"), 2)] == ["key_5", "key_6"]
    assert [k.id for k in await store.list_api_keys("usr_1", Environment.TEST)] == []
