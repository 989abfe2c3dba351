"""Who commits a repository's writes: the writer protocol and its direct form.

Every SQLite repository writes through a ``Writer``. The API and the pipelines
use ``GroupCommitWriter`` (``storage/group_commit.py``: a thread that commits
concurrent writes together, so an event loop never waits for SQLite's write lock);
tools and tests use ``DirectWriter``, which commits on the caller's connection.
Repositories never choose: they are handed one, or make a ``DirectWriter`` of
their connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from storage.errors import StoreUnavailable
from storage.sqlite_db import Connection, write_transaction

T = TypeVar("T")
log = logging.getLogger(__name__)


class Writer(Protocol):
    """Runs write operations in durable transactions on the operational store."""

    async def write(self, operation: Callable[[Connection], T]) -> T:
        """Run ``operation`` in a write transaction and return its result once the
        transaction is committed (raise its error, and keep nothing of it, if it failed)."""
        ...

    def submit(self, operation: Callable[[Connection], Any]) -> None:
        """Queue a write nobody waits for (bookkeeping); a failure is logged, not raised."""
        ...


class DirectWriter:
    """A ``Writer`` that commits on the caller's own connection, in the caller's
    thread: for tools, the CLI and tests, which have no event loop to protect."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    async def write(self, operation: Callable[[Connection], T]) -> T:
        """Run ``operation`` in one ``BEGIN IMMEDIATE`` transaction on the connection."""
        with write_transaction(self._conn) as c:
            return operation(c)

    def submit(self, operation: Callable[[Connection], Any]) -> None:
        """Run ``operation`` now; a store that cannot take the write is logged, not raised."""
        try:
            with write_transaction(self._conn) as c:
                operation(c)
        except StoreUnavailable as exc:
            log.warning("bookkeeping write not recorded: %s", exc)
