"""The operational store's engines behind one interface.

Repositories (``storage/sql_*.py``) are written once, against ``Database`` and ``Tx``, in
SQL both engines run (``?`` placeholders, ``ON CONFLICT``, ``RETURNING``, row values).
Two engines implement them:

* SQLite (``storage.sqlite_db.SqliteDatabase``), the embedded default: reads on one
  connection of the calling thread (a point lookup is ~15 µs, cheaper than any hand-off),
  writes through a writer (the API's group-commit thread, or the caller's connection).
  Its calls never suspend, so a write operation runs to completion on the writer thread.
* PostgreSQL (``storage.postgres_db.PostgresDatabase``, ``QDAY_DATABASE_URL``): psycopg 3
  async connections from a pool; several API nodes share it.

Timestamps are ISO 8601 UTC text with microseconds on both engines (``ts``/``dt``), so
ordering and comparisons are the same SQL everywhere.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar

T = TypeVar("T")
#: A row as a driver returns it.
Row = tuple[Any, ...]
#: What an engine is, for the few statements that differ (``Database.dialect``).
Dialect = Literal["sqlite", "postgresql"]


class Topic(enum.IntEnum):
    """Kinds of rows that processes cache, announced when they change."""

    AUTH = 0  # accounts' plans, API keys' deletion, expiry or replacement
    SCANS = 1  # stored scan results


class Tx(Protocol):
    """An open transaction. Statements use ``?`` placeholders on both engines."""

    async def fetch_one(self, sql: str, args: Sequence[object] = ()) -> Row | None:
        """The first row of a query, or None."""
        ...

    async def fetch_all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """Every row of a query."""
        ...

    async def execute(self, sql: str, args: Sequence[object] = ()) -> int:
        """Run a statement; the number of rows it changed."""
        ...

    async def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> int:
        """Run a statement once per row of arguments; the rows changed in all."""
        ...

    async def lock(self, key: str) -> None:
        """Serialise with every other transaction locking ``key`` until this one ends (a
        read-then-write such as a cap check). SQLite already runs one writer at a time."""
        ...


#: A write: a function of the transaction it runs in.
Operation = Callable[[Tx], Awaitable[T]]


class Changes(Protocol):
    """Per-topic change stamps every process sharing the store sees."""

    def stamp(self, topic: Topic) -> bytes:
        """The current stamp of ``topic``; it differs after every announced change."""
        ...


class Database(Protocol):
    """One engine's connections to the operational store."""

    @property
    def dialect(self) -> Dialect:
        """Which engine this is."""
        ...

    @property
    def changes(self) -> Changes:
        """The change stamps of cached kinds of rows."""
        ...

    async def fetch_one(self, sql: str, args: Sequence[object] = ()) -> Row | None:
        """The first row of a read outside any write transaction, or None."""
        ...

    async def fetch_all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """Every row of a read outside any write transaction."""
        ...

    def stream(self, sql: str, args: Sequence[object], chunk: int) -> AsyncGenerator[list[Row], None]:
        """The rows of one query, ``chunk`` at a time, read as one consistent snapshot
        however long the consumer takes."""
        ...

    async def write(self, operation: Operation[T], announce: Topic | None = None) -> T:
        """Run ``operation`` in one write transaction and return its result once it is
        durably committed (its error, and nothing of it kept, when it failed); then tell
        every process that ``announce`` rows changed."""
        ...

    def submit(self, operation: Operation[Any]) -> None:
        """Queue a write nobody waits for (bookkeeping); a failure is logged, not raised."""
        ...

    async def reclaim(self, table: str) -> None:
        """Give back the space of rows and values erased from ``table`` (managed custody's
        destroyed key material), so it is not left readable in free pages."""
        ...

    async def aclose(self) -> None:
        """Finish queued writes and release every connection."""
        ...
