"""``storage.database.Database`` on a SQLite file (WAL): the embedded default.

Reads run on one connection in the caller's thread: a point lookup costs tens of
microseconds, less than handing it to another thread would. Writes go through a writer:
the group-commit thread for the API and the pipelines (an event loop never waits for
SQLite's write lock, which another process may hold), or the caller's own connection
for tools and tests. Change stamps live in a memory-mapped file beside the database
(``storage.beacon``), which every process opening the file shares.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from storage.beacon import ChangeBeacon
from storage.database import Changes, Dialect, Operation, Row, Topic
from storage.errors import StoreUnavailable
from storage.group_commit import GroupCommitWriter
from storage.sqlite_db import connect, open_connection
from storage.writers import DirectWriter, Writer

T = TypeVar("T")
log = logging.getLogger(__name__)


class SqliteDatabase:
    """The operational store in one SQLite file, with every migration applied.

    ``group_commit``: writes go through a ``GroupCommitWriter`` thread (the API, the
    pipelines); otherwise they commit on the read connection (tools, tests).
    ``migrate=False``: a file that is not the operational store (the rate-limit counters'),
    whose owner makes its own tables. Every
    connection runs with ``secure_delete``, so erased values (destroyed managed keys'
    material) are overwritten in their pages rather than left in free space.
    """

    def __init__(
        self, path: Path, synchronous: str = "FULL", *, group_commit: bool = False, migrate: bool = True
    ) -> None:
        self.path = path
        self._conn = open_connection(path, synchronous) if migrate else connect(path, synchronous)
        self._conn.execute("PRAGMA secure_delete = ON")
        self._writer: Writer = (
            GroupCommitWriter(path, synchronous, secure_delete=True) if group_commit else DirectWriter(self._conn)
        )
        self._beacon = ChangeBeacon.beside(path)

    @property
    def dialect(self) -> Dialect:
        """``sqlite``."""
        return "sqlite"

    @property
    def changes(self) -> Changes:
        """The memory-mapped stamps beside the file (``<file>.beacon``)."""
        return self._beacon

    async def fetch_one(self, sql: str, args: Sequence[object] = ()) -> Row | None:
        """The first row of a read on this process's connection, or None."""
        row: Row | None = self._conn.execute(sql, args).fetchone()
        return row

    async def fetch_all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """Every row of a read on this process's connection."""
        return self._conn.execute(sql, args).fetchall()

    async def stream(self, sql: str, args: Sequence[object], chunk: int) -> AsyncGenerator[list[Row], None]:
        """The rows of one statement ``chunk`` at a time: SQLite reads a statement in one
        read transaction (a consistent snapshot) until its cursor is exhausted or closed."""
        cursor = self._conn.execute(sql, args)
        try:
            while rows := cursor.fetchmany(chunk):
                yield rows
        finally:
            cursor.close()

    async def write(self, operation: Operation[T], announce: Topic | None = None) -> T:
        """Run ``operation`` through the writer; announce ``announce`` after the commit."""
        try:
            return await self._writer.write(operation)
        finally:
            if announce is not None:
                self._beacon.announce(announce)

    def submit(self, operation: Operation[Any]) -> None:
        """Queue bookkeeping nobody waits for on the writer."""
        self._writer.submit(operation)

    async def reclaim(self, table: str) -> None:
        """Checkpoint the WAL into the file and truncate it: freed pages were overwritten
        (``secure_delete``), but the WAL still holds older images of them. Best effort (a
        busy reader leaves the rest to SQLite's next checkpoint); ``StoreUnavailable``
        when SQLite refuses."""
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"checkpoint failed: {exc}") from None

    async def aclose(self) -> None:
        """Commit what is queued, stop the writer, close the connection and the beacon."""
        self.close()

    def close(self) -> None:
        """``aclose`` for callers without an event loop (SQLite's close never waits on one)."""
        self._writer.close()
        self._conn.close()
        self._beacon.close()
