"""Change beacons: memory-cached rows are served without SQL, and changes from any
process (announced at once, or unannounced plain SQL within a second) are seen."""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chains.environment import Environment
from storage.beacon import ChangeBeacon, Topic
from storage.models import Account, ApiKey, KeyType, Plan, ScanResult
from storage.scans_sqlite import SqliteScanStore
from storage.sqlite import SqliteStore
from storage.sqlite_db import open_database

NOW = datetime(2026, 11, 22, tzinfo=UTC)


def _statements(conn: sqlite3.Connection) -> list[str]:
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    return seen


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


async def test_a_remembered_credential_costs_no_sql_until_something_changes(tmp_path):
    path = tmp_path / "db.sqlite"
    conn = open_database(path)
    api, admin = SqliteStore(conn), SqliteStore(open_database(path))
    await api.create_account(Account("usr_1", "u1@example.com", None, Plan.FREE, NOW), "hash")
    await api.create_api_key(ApiKey("key_1", "usr_1", "k", KeyType.SECRET, Environment.LIVE, b"h" * 32, "p", NOW))
    api.api_key_by_hash(b"h" * 32)
    statements = _statements(conn)
    assert api.api_key_by_hash(b"h" * 32)[1].plan is Plan.FREE
    assert statements == []
    admin.set_plan("u1@example.com", Plan.PRO)
    assert api.api_key_by_hash(b"h" * 32)[1].plan is Plan.PRO
    assert statements  # the announcement made it look again


async def test_plain_sql_without_an_announcement_is_seen_within_a_second(tmp_path):
    path = tmp_path / "db.sqlite"
    api = SqliteStore(open_database(path))
    await api.create_account(Account("usr_1", "u1@example.com", None, Plan.FREE, NOW), "hash")
    await api.create_api_key(ApiKey("key_1", "usr_1", "k", KeyType.SECRET, Environment.LIVE, b"h" * 32, "p", NOW))
    api.api_key_by_hash(b"h" * 32)
    operator = sqlite3.connect(path, isolation_level=None)
    operator.execute("UPDATE api_keys SET deleted_at = ? WHERE id = 'key_1'", (NOW.isoformat(),))
    deadline = time.monotonic() + 3
    while api.api_key_by_hash(b"h" * 32)[0].deleted_at is None:
        assert time.monotonic() < deadline, "an unannounced deletion was not seen within the recheck interval"
        time.sleep(0.05)


def _result(account: str, scanned_at: datetime, risk: int) -> ScanResult:
    return ScanResult(
        account, Environment.LIVE, "ethereum", "0xabc", "{}", risk, "W1", "v1", scanned_at, scanned_at, "api"
    )


async def test_a_remembered_scan_result_follows_newer_results_saved_elsewhere(tmp_path):
    path = tmp_path / "db.sqlite"
    conn = open_database(path)
    api, pipeline = SqliteScanStore(conn), SqliteScanStore(open_database(path))
    await SqliteStore(conn).create_account(Account("usr_1", "u1@example.com", None, Plan.FREE, NOW), "hash")
    await api.save_results([_result("usr_1", NOW, 10)])
    assert api.latest_result("usr_1", Environment.LIVE, "ethereum", "0xabc").risk_value == 10
    statements = _statements(conn)
    assert api.latest_result("usr_1", Environment.LIVE, "ethereum", "0xabc").risk_value == 10
    assert statements == []
    await pipeline.save_results([_result("usr_1", NOW + timedelta(hours=1), 60)])
    assert api.latest_result("usr_1", Environment.LIVE, "ethereum", "0xabc").risk_value == 60
    assert api.latest_result("usr_2", Environment.LIVE, "ethereum", "0xabc") is None


async def test_registered_keys_are_append_only_so_remembering_them_is_safe(tmp_path):
    conn = open_database(tmp_path / "db.sqlite")
    await SqliteStore(conn).create_account(Account("usr_1", "u1@example.com", None, Plan.FREE, NOW), "hash")
    conn.execute(
        "INSERT INTO pq_keys (id, account_id, environment, algorithm, chain, public_key, fingerprint,"
        " origin, created_at) VALUES ('key_1', 'usr_1', 'live', 'ml-dsa-44', 'ethereum', x'00', 'f',"
        " 'generated', ?)",
        (NOW.isoformat(),),
    )
    for statement in ("UPDATE pq_keys SET fingerprint = 'g'", "DELETE FROM pq_keys"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement)
