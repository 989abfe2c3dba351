"""The PostgreSQL engine (``storage.postgres_db``): statements in psycopg's parameter style,
change stamps moved by ``NOTIFY`` between nodes (and again after the listening connection
is lost), caps, counters and the managed keys' audit chain exact across two nodes writing
at once, errors in the store's terms, and migrations applied once by nodes starting
together. Every test is bounded in time (``LIMIT`` seconds)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import psycopg
import pytest

from chains.environment import Environment
from storage import postgres_db
from storage.database import Database, Topic, Tx
from storage.errors import StoreUnavailable
from storage.models import ApiKey, KeyType, ManagedKeyState, WatchedAddress
from storage.postgres_db import PostgresDatabase, migration_files, postgres_sql
from storage.sql_accounts import SqlStore
from storage.sql_managed_keys import SqlManagedKeyStore
from storage.sql_scans import SqlScanStore
from storage.sql_window_counters import SqlWindowCounters
from tests.postgres import PostgresServer
from tests.processes import free_port
from tests.storage.test_beacon import quiet
from tests.storage.test_engine_parity import accounts, key_event, managed_key

NOW = datetime(2026, 11, 21, tzinfo=UTC)
#: The longest any test here may take, its fixtures' set-up aside.
LIMIT = 60
#: How soon another node must see an announced change.
NOTIFIED_WITHIN = 1.0
#: Two nodes writing at once: this many attempts against a cap of ``CAP``.
ATTEMPTS, CAP = 40, 10


@pytest.fixture
async def nodes(postgres_url: str) -> AsyncIterator[tuple[PostgresDatabase, PostgresDatabase]]:
    """Two API nodes on one fresh database, each with its own pool and listening connection."""
    first = await PostgresDatabase.open(postgres_url, pool_size=5)
    second = await PostgresDatabase.open(postgres_url, pool_size=5)
    yield first, second
    await second.aclose()
    await first.aclose()


async def _admin(url: str) -> psycopg.AsyncConnection[tuple[object, ...]]:
    """A connection of an operator's, outside both nodes."""
    return await psycopg.AsyncConnection.connect(url, autocommit=True)


async def _count(db: Database, sql: str) -> int:
    row = await db.fetch_one(sql)
    assert row is not None
    return int(row[0])


# ---- postgres_sql


@pytest.mark.parametrize(
    ("shared", "psycopg_form"),
    [
        ("SELECT a FROM t WHERE b = ? AND c IN (?, ?)", "SELECT a FROM t WHERE b = %s AND c IN (%s, %s)"),
        ("SELECT a % ? FROM t", "SELECT a %% %s FROM t"),
        ("SELECT 'why?' FROM t WHERE a = ?", "SELECT 'why?' FROM t WHERE a = %s"),
        (
            "SELECT a FROM t WHERE b LIKE '5%' AND c = ?",
            "SELECT a FROM t WHERE b LIKE '5%%' AND c = %s",
        ),  # psycopg reads quoted % too
        ("SELECT 'it''s ?', ? FROM t", "SELECT 'it''s ?', %s FROM t"),
        ('SELECT "odd?name" FROM t WHERE a = ?', 'SELECT "odd?name" FROM t WHERE a = %s'),
        ("SELECT 1", "SELECT 1"),
    ],
)
def test_statements_take_psycopgs_placeholders(shared: str, psycopg_form: str) -> None:
    assert postgres_sql(shared) == psycopg_form


# ---- change stamps (NotifyFeed)


async def _announce_and_see(writer: Database, other: Database, topic: Topic) -> None:
    """Once no announcement is in flight, ``writer`` announces ``topic``: its own stamp
    moves at once, ``other``'s within ``NOTIFIED_WITHIN`` seconds, and the other topics'
    stamps stay."""
    await quiet(writer, other)
    before_writer = writer.changes.stamp(topic)
    before_other = {t: other.changes.stamp(t) for t in Topic}
    await writer.write(lambda tx: tx.execute("SELECT 1"), announce=topic)
    assert writer.changes.stamp(topic) != before_writer
    deadline = time.monotonic() + NOTIFIED_WITHIN
    while other.changes.stamp(topic) == before_other[topic]:
        assert time.monotonic() < deadline, f"{topic.name} was not notified within {NOTIFIED_WITHIN} s"
        await asyncio.sleep(0.01)
    assert {t: other.changes.stamp(t) for t in Topic if t is not topic} == {
        t: stamp for t, stamp in before_other.items() if t is not topic
    }


async def _listeners(admin: psycopg.AsyncConnection[tuple[object, ...]], besides: Sequence[int] = ()) -> list[int]:
    cursor = await admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
        " AND state = 'idle' AND NOT pid = ANY(%s)",
        (list(besides),),
    )
    return [int(row[0]) for row in await cursor.fetchall()]


async def test_a_change_on_one_node_moves_the_stamps_of_every_node_even_after_a_lost_listener(nodes, postgres_url):
    first, second = nodes
    async with asyncio.timeout(LIMIT):
        await _announce_and_see(first, second, Topic.AUTH)
        await _announce_and_see(second, first, Topic.SCANS)
        async with await _admin(postgres_url) as admin:
            cursor = await admin.execute(
                "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query LIKE 'LISTEN%'"
            )
            killed = [int(row[0]) for row in await cursor.fetchall()]
            assert len(killed) == 2  # each node's listening connection
            while len(await _listeners(admin, besides=killed)) < 2:
                await asyncio.sleep(0.05)
        await _announce_and_see(first, second, Topic.SCANS)
        await _announce_and_see(second, first, Topic.AUTH)


async def _refuse(tx: Tx) -> None:
    await tx.execute("UPDATE auth_generation SET value = value + 1")
    raise ValueError("refused")


async def test_a_failed_write_keeps_nothing_and_still_moves_the_writers_stamp(postgres_url):
    """What was announced may have been committed before the error reached the caller."""
    db = await PostgresDatabase.open(postgres_url, pool_size=1)
    try:
        before = db.changes.stamp(Topic.AUTH)
        with pytest.raises(ValueError):
            await db.write(_refuse, announce=Topic.AUTH)
        assert db.changes.stamp(Topic.AUTH) != before
        assert await db.fetch_one("SELECT value FROM auth_generation") == (0,)
    finally:
        await db.aclose()


async def test_closing_drops_a_bookkeeping_write_the_server_does_not_finish(postgres_url, monkeypatch, caplog):
    """With the server gone, a bookkeeping write waits out the pool's timeout (30 s): closing
    waits ``BOOKKEEPING_SECONDS`` for it, not that long (here a statement that never ends)."""
    monkeypatch.setattr(postgres_db, "BOOKKEEPING_SECONDS", 0.2)
    db = await PostgresDatabase.open(postgres_url, pool_size=2)
    db.submit(lambda tx: tx.execute("SELECT pg_sleep(600)"))
    await asyncio.sleep(0.1)  # the statement is on the server
    await asyncio.wait_for(db.aclose(), LIMIT)
    assert "1 bookkeeping writes not recorded" in caplog.text


# ---- two nodes writing at once


def _key(n: int) -> ApiKey:
    return ApiKey(f"key_{n}", "usr_1", "k", KeyType.SECRET, Environment.LIVE, bytes([n]) * 32, "p", NOW)


async def test_two_nodes_cannot_overshoot_the_api_key_cap(nodes):
    first, second = nodes
    await accounts(first, "usr_1")
    stores = (SqlStore(first), SqlStore(second))
    async with asyncio.timeout(LIMIT):
        created = await asyncio.gather(*(stores[n % 2].create_api_key(_key(n), cap=CAP) for n in range(ATTEMPTS)))
    assert created.count(True) == CAP
    assert await _count(second, "SELECT COUNT(*) FROM api_keys") == CAP


async def test_two_nodes_cannot_overshoot_the_watch_cap(nodes):
    first, second = nodes
    await accounts(first, "usr_1")
    stores = (SqlScanStore(first), SqlScanStore(second))

    def entry(n: int) -> WatchedAddress:
        return WatchedAddress(f"wat_{n}", "usr_1", Environment.LIVE, "ethereum", f"0x{n:040x}", None, NOW)

    async with asyncio.timeout(LIMIT):
        stored = await asyncio.gather(*(stores[n % 2].watch(entry(n), cap=CAP) for n in range(ATTEMPTS)))
    assert sum(1 for s in stored if s is not None) == CAP
    assert await _count(first, "SELECT COUNT(*) FROM watchlist") == CAP
    assert await stores[1].watch_count("usr_1") == CAP


async def test_two_nodes_appending_managed_key_events_keep_one_chain(nodes):
    first, second = nodes
    await accounts(first, "usr_1")
    stores = (SqlManagedKeyStore(first), SqlManagedKeyStore(second))
    async with asyncio.timeout(LIMIT):
        await asyncio.gather(
            *(
                stores[n % 2].create(
                    managed_key(n), key_event(f"mke_{n}", f"mk_{n}", "created", ManagedKeyState.ACTIVE), None
                )
                for n in range(ATTEMPTS)
            )
        )
    assert await stores[0].verify_event_chain("usr_1")
    prev_hashes = await first.fetch_all("SELECT prev_hash FROM managed_key_events WHERE account_id = 'usr_1'")
    assert len({bytes(row[0]) for row in prev_hashes}) == ATTEMPTS  # no two events chained to one predecessor


async def test_two_nodes_admit_exactly_the_limit(nodes):
    first, second = nodes
    counters = (await SqlWindowCounters.open(first), await SqlWindowCounters.open(second))
    # the same two buckets named in either order: locks are taken in one order, never in a cycle
    orders = (("ip:127.0.0.1", "acct:usr_1"), ("acct:usr_1", "ip:127.0.0.1"))
    async with asyncio.timeout(LIMIT):
        seen = await asyncio.gather(*(counters[n % 2].admit(orders[n // 2 % 2], 1_000, CAP, 0) for n in range(3 * CAP)))
    admitted = [before for before in seen if max(before) < CAP]
    assert len(admitted) == CAP
    assert sorted(before[0] for before in admitted) == list(range(CAP))
    rows = await first.fetch_all("SELECT bucket, start, count FROM rate_windows ORDER BY bucket")
    assert rows == [("acct:usr_1", 1_000, CAP), ("ip:127.0.0.1", 1_000, CAP)]


async def test_two_nodes_opening_the_rate_counters_at_once_both_succeed(nodes):
    """API nodes start together: each makes the counters' table when it is missing."""
    first, second = nodes
    async with asyncio.timeout(LIMIT):
        counters = await asyncio.gather(SqlWindowCounters.open(first), SqlWindowCounters.open(second))
        assert [await c.admit(("ip:1",), 1, 2, 0) for c in counters] == [[0], [1]]


# ---- errors


async def test_a_server_that_cannot_be_reached_is_store_unavailable():
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"  # nothing listens there
    started = time.monotonic()
    async with asyncio.timeout(LIMIT):
        with pytest.raises(StoreUnavailable):
            await PostgresDatabase.open(url, timeout=2)
    assert time.monotonic() - started < 15


async def test_lost_server_connections_are_store_unavailable_until_the_pool_replaces_them(postgres_url):
    db = await PostgresDatabase.open(postgres_url, pool_size=2)
    try:
        async with asyncio.timeout(LIMIT), await _admin(postgres_url) as admin:
            for attempt in (lambda: db.fetch_one("SELECT 1"), lambda: db.write(lambda tx: tx.execute("SELECT 1"))):
                await db.fetch_one("SELECT 1")  # a pooled connection exists
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
                with pytest.raises(StoreUnavailable):
                    await attempt()
                for _ in range(10):  # each dead connection fails once, then leaves the pool
                    try:
                        assert await db.fetch_one("SELECT 1") == (1,)
                        break
                    except StoreUnavailable:
                        await asyncio.sleep(0.1)
                else:
                    pytest.fail("the pool did not replace its lost connections")
    finally:
        await db.aclose()


async def test_reclaim_refuses_what_is_not_a_table_name(postgres_url):
    db = await PostgresDatabase.open(postgres_url, pool_size=1)
    try:
        await db.reclaim("managed_keys")
        for name in ("x; drop", "managed_keys; DROP TABLE accounts", "Managed_Keys", ""):
            with pytest.raises(ValueError):
                await db.reclaim(name)
        assert await _count(db, "SELECT COUNT(*) FROM accounts") == 0  # still there
    finally:
        await db.aclose()


# ---- migrations


async def test_nodes_starting_together_on_an_empty_database_apply_each_migration_once(
    postgres_server: PostgresServer,
):
    name = f"qday_empty_{os.getpid()}"
    url = postgres_server.create_database(name)
    try:
        async with asyncio.timeout(LIMIT):
            results = await asyncio.gather(
                *(PostgresDatabase.open(url, pool_size=1) for _ in range(2)), return_exceptions=True
            )
            opened = [db for db in results if isinstance(db, PostgresDatabase)]
            try:
                assert len(opened) == 2, results
                rows = await opened[0].fetch_all("SELECT name FROM schema_migrations ORDER BY name")
                assert [row[0] for row in rows] == migration_files()
                assert await _count(opened[1], "SELECT COUNT(*) FROM watch_counts") == 0  # the schema is there
            finally:
                for db in opened:
                    await db.aclose()
    finally:
        postgres_server.drop_database(name)
