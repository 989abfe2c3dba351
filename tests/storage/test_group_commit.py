"""Group commit: many concurrent writes, one transaction; results only after commit;
one failing write does not take the others with it."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from storage.database import Operation, Tx
from storage.errors import ConstraintViolation, StoreUnavailable
from storage.group_commit import GroupCommitWriter
from storage.sqlite_db import connect


@pytest.fixture
def writer(tmp_path):
    path = tmp_path / "db.sqlite"
    conn = connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    conn.close()
    w = GroupCommitWriter(path)
    yield w, path
    w.close()


def _insert(value: str) -> Operation[int]:
    async def operation(tx: Tx) -> int:
        row = await tx.fetch_one("INSERT INTO t (v) VALUES (?) RETURNING id", (value,))
        assert row is not None
        return int(row[0])

    return operation


async def test_concurrent_writes_all_land_and_are_visible_when_acknowledged(writer):
    w, path = writer
    reader = sqlite3.connect(path)
    ids = await asyncio.gather(*(w.write(_insert(f"v{i}")) for i in range(300)))
    assert len(set(ids)) == 300
    assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 300


async def test_a_failing_write_does_not_undo_its_batch_neighbours(writer):
    w, path = writer

    async def broken(tx: Tx) -> None:
        await tx.execute("INSERT INTO t (v) VALUES ('partial')")
        raise ValueError("rejected by the caller's rule")

    results = await asyncio.gather(
        w.write(_insert("a")), w.write(broken), w.write(_insert("b")), return_exceptions=True
    )
    assert isinstance(results[1], ValueError)
    values = [r[0] for r in sqlite3.connect(path).execute("SELECT v FROM t ORDER BY id")]
    assert values == ["a", "b"]


async def test_integrity_errors_reach_the_caller(writer):
    w, _ = writer
    with pytest.raises(ConstraintViolation, match="NOT NULL"):
        await w.write(lambda tx: tx.execute("INSERT INTO t (v) VALUES (NULL)"))


async def test_read_only_database_gives_store_unavailable(tmp_path):
    path = tmp_path / "db.sqlite"
    conn = connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.close()
    w = GroupCommitWriter(path)
    w._conn.execute("PRAGMA query_only = ON")  # behaves like a read-only volume for writes
    try:
        with pytest.raises(StoreUnavailable):
            await w.write(_insert("x"))
    finally:
        w.close()


async def test_submitted_writes_commit_in_order_and_their_failures_are_logged(writer, caplog):
    w, path = writer

    async def broken(tx: Tx) -> None:
        raise ValueError("bookkeeping rejected")

    w.submit(_insert("queued"))
    w.submit(broken)
    last = await w.write(_insert("awaited"))  # queued after both: they are committed by now
    values = [r[0] for r in sqlite3.connect(path).execute("SELECT v FROM t ORDER BY id")]
    assert values == ["queued", "awaited"] and last == 2
    assert "bookkeeping rejected" in caplog.text


async def test_an_operation_that_awaits_anything_but_its_transaction_fails_alone(writer):
    w, path = writer

    async def suspends(tx: Tx) -> None:
        await tx.execute("INSERT INTO t (v) VALUES ('never')")
        await asyncio.sleep(0)  # an operation on SQLite must never suspend

    results = await asyncio.gather(w.write(suspends), w.write(_insert("kept")), return_exceptions=True)
    assert isinstance(results[0], RuntimeError) and results[1] == 1
    assert sqlite3.connect(path).execute("SELECT v FROM t").fetchall() == [("kept",)]


def test_submit_outside_an_event_loop_wakes_the_writer(writer):
    w, path = writer
    w.submit(_insert("from a plain thread"))
    w.close()  # commits what is queued
    assert sqlite3.connect(path).execute("SELECT v FROM t").fetchall() == [("from a plain thread",)]
