"""Who commits SQLite writes: the writer protocol and its direct form.

A ``storage.sqlite_engine.SqliteDatabase`` writes through a ``Writer``. The API and the
pipelines use ``GroupCommitWriter`` (``storage/group_commit.py``: a thread that commits
concurrent writes together, so an event loop never waits for SQLite's write lock);
tools and tests use ``DirectWriter``, which commits on the caller's connection.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, Protocol, TypeVar

from storage.database import Operation
from storage.errors import StoreUnavailable
from storage.sqlite_db import SqliteTx, run_inline, write_transaction

T = TypeVar("T")
log = logging.getLogger(__name__)


class Writer(Protocol):
    """Runs write operations in durable transactions on a SQLite file."""

    async def write(self, operation: Operation[T]) -> T:
        """Run ``operation`` in a write transaction and return its result once the
        transaction is committed (raise its error, and keep nothing of it, if it failed)."""
        ...

    def submit(self, operation: Operation[Any]) -> None:
        """Queue a write nobody waits for (bookkeeping); a failure is logged, not raised."""
        ...

    def close(self) -> None:
        """Finish what is queued and release what the writer holds."""
        ...


class DirectWriter:
    """A ``Writer`` that commits on the caller's own connection, in the caller's
    thread: for tools, the CLI and tests, which have no event loop to protect."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def write(self, operation: Operation[T]) -> T:
        """Run ``operation`` in one ``BEGIN IMMEDIATE`` transaction on the connection."""
        with write_transaction(self._conn) as c:
            return run_inline(operation(SqliteTx(c)))

    def submit(self, operation: Operation[Any]) -> None:
        """Run ``operation`` now; a store that cannot take the write is logged, not raised."""
        try:
            with write_transaction(self._conn) as c:
                run_inline(operation(SqliteTx(c)))
        except StoreUnavailable as exc:
            log.warning("bookkeeping write not recorded: %s", exc)

    def close(self) -> None:
        """Nothing to release: the connection is the caller's."""
