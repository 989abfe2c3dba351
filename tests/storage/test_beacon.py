"""Change stamps: memory-cached rows are served without SQL, and changes from any process
or node (announced at once, or unannounced plain SQL within a second) are seen. The
caches run on both engines (``peer`` is another process's or node's connections to the
same store); the memory-mapped beacon file is SQLite's (PostgreSQL's ``NotifyFeed``:
``test_postgres_engine``)."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chains.environment import Environment
from storage.beacon import ChangeBeacon
from storage.database import Database, Row, Topic
from storage.errors import ConstraintViolation
from storage.models import Account, ApiKey, KeyOrigin, KeyType, Plan, PqKey, ScanResult
from storage.postgres_db import PostgresDatabase
from storage.sql_accounts import SqlStore
from storage.sql_attestations import SqlAttestationStore
from storage.sql_scans import SqlScanStore
from storage.sqlite_engine import SqliteDatabase

NOW = datetime(2026, 11, 22, tzinfo=UTC)
KEY_HASH = b"h" * 32
#: How soon another process's or node's announced change must be seen: well under the
#: one second after which caches look again anyway.
ANNOUNCED_WITHIN = 0.5


class ReadLog:
    """A database that records the reads made through it (everything else passes through)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._db, name)

    async def fetch_one(self, sql: str, args: Sequence[object] = ()) -> Row | None:
        self.reads.append(sql)
        return await self._db.fetch_one(sql, args)

    async def fetch_all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        self.reads.append(sql)
        return await self._db.fetch_all(sql, args)


@pytest.fixture
async def peer(database: Database, engine_url: str) -> AsyncIterator[Database]:
    """Another process's (SQLite) or node's (PostgreSQL) connections to the store of ``database``."""
    other: Database
    if isinstance(database, SqliteDatabase):
        other = SqliteDatabase(database.path)
    else:
        other = await PostgresDatabase.open(engine_url, pool_size=2)
    yield other
    await other.aclose()


async def quiet(*dbs: Database, within: float = 5.0) -> None:
    """Wait until announcements in flight have arrived: no stamp of ``dbs`` moves for a
    tenth of a second (a PostgreSQL node also hears its own ``NOTIFY``, a moment after it
    moved its stamp itself; SQLite's are quiet at once)."""
    deadline = time.monotonic() + within
    stamps = [[db.changes.stamp(t) for t in Topic] for db in dbs]
    while True:
        await asyncio.sleep(0.1)
        now = [[db.changes.stamp(t) for t in Topic] for db in dbs]
        if now == stamps:
            return
        assert time.monotonic() < deadline, f"change stamps still moving after {within} s"
        stamps = now


async def _eventually(check: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, f"{what} within {within} s"
        await asyncio.sleep(0.01)


def _account(n: int) -> Account:
    return Account(f"usr_{n}", f"u{n}@example.com", None, Plan.FREE, NOW)


def _key(n: int, account_id: str = "usr_1", key_hash: bytes | None = None) -> ApiKey:
    return ApiKey(f"key_{n}", account_id, "k", KeyType.SECRET, Environment.LIVE, key_hash or bytes([n]) * 32, "p", NOW)


def _announce_from_another_process(path: str) -> None:
    ChangeBeacon(Path(path)).announce(Topic.SCANS)


def test_an_announcement_in_another_process_changes_only_its_topic(tmp_path):
    path = tmp_path / "db.sqlite.beacon"
    beacon = ChangeBeacon(path)
    before = {t: beacon.stamp(t) for t in Topic}
    child = multiprocessing.get_context("spawn").Process(target=_announce_from_another_process, args=(str(path),))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert beacon.stamp(Topic.SCANS) != before[Topic.SCANS]
    assert beacon.stamp(Topic.AUTH) == before[Topic.AUTH]


async def test_a_sqlite_write_announces_through_the_file_beside_the_database(tmp_path):
    path = tmp_path / "db.sqlite"
    db = SqliteDatabase(path)
    beacon = ChangeBeacon.beside(path)  # what any other process opening the file maps
    before = {t: beacon.stamp(t) for t in Topic}
    try:
        await db.write(lambda tx: tx.execute("UPDATE auth_generation SET value = value"), announce=Topic.AUTH)
        assert beacon.stamp(Topic.AUTH) != before[Topic.AUTH]
        assert beacon.stamp(Topic.SCANS) == before[Topic.SCANS]
        await db.write(lambda tx: tx.execute("UPDATE auth_generation SET value = value"))  # nothing announced
        assert {t: db.changes.stamp(t) for t in Topic} == {t: beacon.stamp(t) for t in Topic}
    finally:
        db.close()
        beacon.close()


async def test_a_remembered_credential_costs_no_sql_until_something_changes(database, peer):
    log = ReadLog(database)
    api, admin = SqlStore(log), SqlStore(peer)
    await api.create_account(_account(1), "hash")
    await api.create_api_key(_key(1, key_hash=KEY_HASH))
    await quiet(database)
    await api.api_key_by_hash(KEY_HASH)
    log.reads.clear()
    found = await api.api_key_by_hash(KEY_HASH)
    assert found is not None and found[1].plan is Plan.FREE
    assert log.reads == []
    await admin.set_plan("u1@example.com", Plan.PRO)

    async def pro() -> bool:
        found = await api.api_key_by_hash(KEY_HASH)
        return found is not None and found[1].plan is Plan.PRO

    await _eventually(pro, ANNOUNCED_WITHIN, "another process's plan change was not seen")
    assert log.reads  # the announcement made it look again


async def test_remembered_credentials_follow_writes_from_other_processes(database, peer):
    api = SqlStore(database)
    admin = SqlStore(peer)  # another worker, node or the admin CLI
    await api.create_account(_account(1), "hash")
    await api.create_api_key(_key(1))
    key_hash = _key(1).key_hash

    async def stored() -> tuple[ApiKey, Account]:
        found = await api.api_key_by_hash(key_hash)
        assert found is not None
        return found

    assert (await stored())[1].plan is Plan.FREE
    assert (await stored())[1].plan is Plan.FREE  # served from memory
    await admin.set_plan("u1@example.com", Plan.PRO)

    async def pro() -> bool:
        return (await stored())[1].plan is Plan.PRO

    await _eventually(pro, ANNOUNCED_WITHIN, "a plan change was not seen")
    assert await admin.delete_api_key("usr_1", "key_1", NOW)

    async def deleted() -> bool:
        return (await stored())[0].deleted_at == NOW

    await _eventually(deleted, ANNOUNCED_WITHIN, "a deletion was not seen")
    await api.rotate_api_key("usr_1", "key_1", _key(2), NOW)  # own writes forget at once
    assert (await stored())[0].deleted_at == NOW


async def test_plain_sql_without_an_announcement_is_seen_within_a_second(database, peer):
    api = SqlStore(database)
    await api.create_account(_account(1), "hash")
    await api.create_api_key(_key(1, key_hash=KEY_HASH))
    await api.api_key_by_hash(KEY_HASH)
    # an operator's hand-written SQL: nothing announces it
    await peer.write(lambda tx: tx.execute("UPDATE api_keys SET deleted_at = ? WHERE id = 'key_1'", (NOW.isoformat(),)))

    async def deleted() -> bool:
        found = await api.api_key_by_hash(KEY_HASH)
        return found is not None and found[0].deleted_at is not None

    await _eventually(deleted, 3.0, "an unannounced deletion was not seen after the recheck interval")


def _result(account: str, scanned_at: datetime, risk: int) -> ScanResult:
    return ScanResult(
        account, Environment.LIVE, "ethereum", "0xabc", "{}", risk, "W1", "v1", scanned_at, scanned_at, "api"
    )


async def test_a_remembered_scan_result_follows_newer_results_saved_elsewhere(database, peer):
    log = ReadLog(database)
    api, pipeline = SqlScanStore(log), SqlScanStore(peer)
    await SqlStore(database).create_account(_account(1), "hash")
    await api.save_results([_result("usr_1", NOW, 10)])
    await quiet(database)

    async def risk() -> int | None:
        found = await api.latest_result("usr_1", Environment.LIVE, "ethereum", "0xabc")
        return None if found is None else found.risk_value

    assert await risk() == 10
    log.reads.clear()
    assert await risk() == 10
    assert log.reads == []
    await pipeline.save_results([_result("usr_1", NOW + timedelta(hours=1), 60)])

    async def newer() -> bool:
        return await risk() == 60

    await _eventually(newer, ANNOUNCED_WITHIN, "a result saved by another process was not seen")
    assert await api.latest_result("usr_2", Environment.LIVE, "ethereum", "0xabc") is None


async def test_registered_keys_are_append_only_so_remembering_them_is_safe(database):
    await SqlStore(database).create_account(_account(1), "hash")
    key = PqKey("pqk_1", "usr_1", Environment.LIVE, "ml-dsa-44", "ethereum", b"\x00", "f", KeyOrigin.GENERATED, NOW)
    assert await SqlAttestationStore(database).add_pq_key(key) == key
    for statement in ("UPDATE pq_keys SET fingerprint = 'g'", "DELETE FROM pq_keys"):
        with pytest.raises(ConstraintViolation, match="append-only"):
            await database.write(lambda tx, statement=statement: tx.execute(statement))
    row = await database.fetch_one("SELECT fingerprint FROM pq_keys WHERE id = 'pqk_1'")
    assert row == ("f",)
