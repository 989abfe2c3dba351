"""``storage.database.Database`` on PostgreSQL (``QDAY_DATABASE_URL``): several API nodes
and the pipelines share one database.

* psycopg 3 async connections from a pool (``psycopg_pool.AsyncConnectionPool``), in
  autocommit for reads; each write is one transaction on one pooled connection. The
  repositories' SQL is shared with SQLite: ``?`` placeholders become ``%s`` here
  (``postgres_sql``), and read-then-write operations take ``Tx.lock`` (a transaction
  advisory lock), which SQLite's single writer makes unnecessary.
* Change stamps (``NotifyFeed``): a write that changes cached rows sends ``NOTIFY`` in
  its transaction, so every node hears of it when it commits; the writing node bumps its
  own stamp at once. A node that loses its listening connection treats every topic as
  changed, and caches revalidate at least every second anyway (``storage.beacon.StampWatch``).
* Migrations: ``storage/migrations/postgres/`` holds the PostgreSQL form of every SQLite
  migration under the same name; all pending ones apply in one transaction under an
  advisory lock, so nodes starting together apply each once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from storage.database import Changes, Dialect, Operation, Row, Topic
from storage.errors import ConstraintViolation, StorageError, StoreUnavailable
from storage.sql import ts

T = TypeVar("T")
log = logging.getLogger(__name__)

#: The channel of change announcements (payload: a ``Topic`` name).
CHANNEL = "qday_changes"
#: The advisory lock migrations run under (any fixed 64-bit number, "qday" in ASCII).
_MIGRATION_LOCK = 0x71646179
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")
_RECONNECT_SECONDS = (0.1, 0.5, 1.0, 2.0, 5.0)
#: How long closing waits for bookkeeping writes in flight before dropping them.
BOOKKEEPING_SECONDS = 5.0

Connection = psycopg.AsyncConnection[tuple[Any, ...]]


@functools.lru_cache(maxsize=2048)
def postgres_sql(sql: str) -> str:
    """A statement written for both engines (``?`` placeholders) in psycopg's form: ``?``
    becomes ``%s`` outside quoted text, and every ``%`` is doubled (psycopg reads them
    everywhere, quoted text included)."""
    out: list[str] = []
    quote = ""
    for char in sql:
        if char == "%":
            out.append("%%")
            continue
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "?":
            out.append("%s")
            continue
        out.append(char)
    return "".join(out)


@contextmanager
def _mapped() -> Iterator[None]:
    """psycopg's errors as the store's: a broken constraint is ``ConstraintViolation``;
    a lost or refused connection, or a pool with none free in time, ``StoreUnavailable``
    (its message names no server)."""
    try:
        yield
    except psycopg.errors.IntegrityError as exc:
        raise ConstraintViolation(str(exc)) from exc
    except (psycopg.OperationalError, PoolTimeout) as exc:
        # The driver's text names the server's host, port and database: logged here, never
        # answered to a client.
        log.warning("operational store unavailable: %s", exc)
        raise StoreUnavailable("operational store unavailable (the node's log says why)") from exc


class PostgresTx:
    """``storage.database.Tx`` on a pooled connection inside a transaction."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    async def fetch_one(self, sql: str, args: Sequence[object] = ()) -> Row | None:
        """The first row of a query, or None."""
        cursor = await self._conn.execute(postgres_sql(sql), args)
        return await cursor.fetchone()

    async def fetch_all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """Every row of a query."""
        cursor = await self._conn.execute(postgres_sql(sql), args)
        return await cursor.fetchall()

    async def execute(self, sql: str, args: Sequence[object] = ()) -> int:
        """Run a statement; the number of rows it changed."""
        cursor = await self._conn.execute(postgres_sql(sql), args)
        return cursor.rowcount

    async def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> int:
        """Run a statement once per row of arguments (pipelined by psycopg); the rows
        changed in all."""
        async with self._conn.cursor() as cursor:
            await cursor.executemany(postgres_sql(sql), rows)
            return cursor.rowcount

    async def lock(self, key: str) -> None:
        """A transaction-scoped advisory lock on ``key`` (released at commit or rollback)."""
        await self._conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))


class NotifyFeed:
    """Change stamps of this process, moved by ``NOTIFY`` from every node (``Changes``).

    One dedicated connection listens; a notification, or a reconnection (which may have
    missed some), gives the topic a fresh random stamp."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._stamps = [os.urandom(8) for _ in Topic]
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()

    def stamp(self, topic: Topic) -> bytes:
        """The current stamp of ``topic``."""
        return self._stamps[topic]

    def bump(self, topic: Topic | None = None) -> None:
        """A fresh stamp for ``topic`` (None: every topic)."""
        for each in Topic if topic is None else (topic,):
            self._stamps[each] = os.urandom(8)

    async def start(self, timeout: float = 10.0) -> None:
        """Start listening; returns once the first ``LISTEN`` is in place (or after
        ``timeout``: the stamps' one-second revalidation covers the gap)."""
        self._task = asyncio.get_running_loop().create_task(self._listen(), name="qday-notify-feed")
        try:
            await asyncio.wait_for(self._listening.wait(), timeout)
        except TimeoutError:
            log.warning("not listening for change notifications yet; caches revalidate every second")

    async def _listen(self) -> None:
        attempt = 0
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self._url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.bump()  # anything may have changed while nobody listened
                    self._listening.set()
                    attempt = 0
                    async for note in conn.notifies():
                        topic = Topic.__members__.get(note.payload)
                        self.bump(topic)  # an unknown payload: everything
            except psycopg.Error as exc:
                self.bump()
                wait = _RECONNECT_SECONDS[min(attempt, len(_RECONNECT_SECONDS) - 1)]
                attempt += 1
                log.warning("change notifications lost (%s); listening again in %.1f s", exc, wait)
                await asyncio.sleep(wait)

    async def aclose(self) -> None:
        """Stop listening."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


class PostgresDatabase:
    """The operational store in a PostgreSQL database; open with ``PostgresDatabase.open``."""

    def __init__(self, pool: AsyncConnectionPool[Connection], feed: NotifyFeed) -> None:
        self._pool = pool
        self._feed = feed
        self._bookkeeping: set[asyncio.Task[None]] = set()

    @classmethod
    async def open(cls, url: str, pool_size: int = 10, timeout: float = 30.0) -> PostgresDatabase:
        """Connect (at most ``pool_size`` connections, plus one listening), apply pending
        migrations and start listening for changes; ``StoreUnavailable`` when the server
        cannot be reached within ``timeout`` seconds."""
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            open=False,
            timeout=timeout,
            name="qday",
        )
        with _mapped():
            await pool.open(wait=True, timeout=timeout)
        try:
            with _mapped():
                await migrate(pool)
            feed = NotifyFeed(url)
            await feed.start()
        except BaseException:
            await pool.close()
            raise
        return cls(pool, feed)

    @property
    def dialect(self) -> Dialect:
        """``postgresql``."""
        return "postgresql"

    @property
    def changes(self) -> Changes:
        """Stamps moved by ``NOTIFY`` from every node."""
        return self._feed

    async def fetch_one(self, sql: str, args: Sequence[object] = ()) -> Row | None:
        """The first row of a read (autocommit), or None."""
        with _mapped():
            async with self._pool.connection() as conn:
                cursor = await conn.execute(postgres_sql(sql), args)
                return await cursor.fetchone()

    async def fetch_all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """Every row of a read (autocommit)."""
        with _mapped():
            async with self._pool.connection() as conn:
                cursor = await conn.execute(postgres_sql(sql), args)
                return await cursor.fetchall()

    async def stream(self, sql: str, args: Sequence[object], chunk: int) -> AsyncGenerator[list[Row], None]:
        """The rows of one query through a server-side cursor, ``chunk`` at a time; one
        statement in one transaction is one snapshot, however long the consumer takes."""
        with _mapped():
            async with self._pool.connection() as conn, conn.transaction():
                async with conn.cursor(name="qday_stream") as cursor:
                    await cursor.execute(postgres_sql(sql), args)
                    while rows := await cursor.fetchmany(chunk):
                        yield rows

    async def write(self, operation: Operation[T], announce: Topic | None = None) -> T:
        """Run ``operation`` in one transaction (durable at commit, the server's
        ``synchronous_commit``); ``announce`` is notified in the same transaction."""
        try:
            with _mapped():
                async with self._pool.connection() as conn, conn.transaction():
                    result = await operation(PostgresTx(conn))
                    if announce is not None:
                        await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, announce.name))
            return result
        finally:
            if announce is not None:
                self._feed.bump(announce)

    def submit(self, operation: Operation[Any]) -> None:
        """Run ``operation`` as a task of the running loop; nobody waits for it, and a
        failure is logged. Pending ones finish before ``aclose`` releases the pool (or are
        dropped after ``BOOKKEEPING_SECONDS`` when the server does not answer)."""
        task = asyncio.get_running_loop().create_task(self._bookkeep(operation))
        self._bookkeeping.add(task)
        task.add_done_callback(self._bookkeeping.discard)

    async def _bookkeep(self, operation: Operation[Any]) -> None:
        try:
            await self.write(operation)
        except StorageError as exc:
            log.warning("bookkeeping write not recorded: %s", exc)

    async def reclaim(self, table: str) -> None:
        """``VACUUM`` the table: the old row versions that still held erased values are
        removed and their space overwritten by later writes."""
        if not _TABLE_NAME.match(table):
            raise ValueError(f"not a table name: {table!r}")
        with _mapped():
            async with self._pool.connection() as conn:
                await conn.execute(f"VACUUM {table}")

    async def aclose(self) -> None:
        """Finish bookkeeping writes (at most ``BOOKKEEPING_SECONDS``: with the server down
        each would wait out the pool's timeout), stop listening, close the pool."""
        if self._bookkeeping:
            _, late = await asyncio.wait(set(self._bookkeeping), timeout=BOOKKEEPING_SECONDS)
            for task in late:
                task.cancel()
            if late:
                log.warning("%d bookkeeping writes not recorded: the server did not answer", len(late))
                await asyncio.gather(*late, return_exceptions=True)
        await self._feed.aclose()
        await self._pool.close()


def migration_files() -> list[str]:
    """The names of the PostgreSQL migrations, in the order they apply."""
    folder = resources.files("storage.migrations.postgres")
    return sorted(f.name for f in folder.iterdir() if f.name.endswith(".sql"))


async def migrate(pool: AsyncConnectionPool[Connection]) -> list[str]:
    """Apply the migrations not applied yet, all in one transaction under an advisory
    lock (PostgreSQL's DDL is transactional: all of them or none); the names applied now."""
    folder = resources.files("storage.migrations.postgres")
    applied: list[str] = []
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        cursor = await conn.execute("SELECT name FROM schema_migrations")
        done = {row[0] for row in await cursor.fetchall()}
        for name in migration_files():
            if name in done:
                continue
            await conn.execute(folder.joinpath(name).read_text())  # no parameters: the script as written
            await conn.execute("INSERT INTO schema_migrations VALUES (%s, %s)", (name, ts(datetime.now(UTC))))
            applied.append(name)
    return applied


def create_schema(url: str, name: str) -> None:
    """Create schema ``name`` in the database at ``url`` when missing (another program's
    tables beside qday's, such as Dagster's instance storage); ``StoreUnavailable`` when the
    server cannot be reached."""
    if not _TABLE_NAME.match(name):
        raise ValueError(f"not a schema name: {name!r}")
    with _mapped(), psycopg.connect(url, autocommit=True, connect_timeout=30) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")


def create_database(admin_url: str, name: str) -> bool:
    """Create database ``name`` through the server at ``admin_url`` (a role allowed to)
    unless it exists; True when created now. For local set-ups (``make run-pg``)."""
    if not _TABLE_NAME.match(name):
        raise ValueError(f"not a database name: {name!r}")
    with _mapped(), psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return False
        conn.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
        return True


def accepts_connections(url: str) -> bool:
    """True when the server at ``url`` answers a query now."""
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True
