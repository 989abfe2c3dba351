"""The SQLite file of the operational store: connections, write transactions,
migrations, and ``SqliteTx``, the repositories' transaction on a SQLite connection.
Nothing here knows a table but ``schema_migrations``."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TypeVar

from storage.database import Row
from storage.errors import ConstraintViolation, StoreUnavailable
from storage.sql import ts

log = logging.getLogger(__name__)

_BUSY_TIMEOUT_MS = 5000
#: The umask of qday's processes (``qday serve``, ``qday up`` and the programs it runs):
#: what they create is their owner's alone, folders 0700 and files 0600.
PRIVATE_UMASK = 0o077
#: The files SQLite keeps beside a database; it creates them with the database's mode.
_SIDE_FILES = ("-wal", "-shm", "-journal")
T = TypeVar("T")


def make_private(path: Path) -> None:
    """Take group and other access away from ``path`` (a folder keeps at most 0700, a
    file 0600). Left as it is: a missing path, one another user owns, a sticky shared
    folder such as /tmp; a refused change is logged, not raised."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return
    mode = stat.S_IMODE(found.st_mode)
    if not mode & 0o077 or mode & stat.S_ISVTX or found.st_uid != os.geteuid():
        return
    try:
        os.chmod(path, mode & 0o700)
    except OSError as exc:
        log.warning("could not make %s owner-only (mode %o): %s", path, mode, exc)


def _private_database(path: Path) -> None:
    """The folder of a SQLite file (the data directory) and the file owner-only before
    SQLite opens it: SQLite gives the ``-wal``, ``-shm`` and ``-journal`` files it creates
    later the database file's mode. Files an older version left readable are fixed too."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    make_private(path.parent)
    if not path.exists():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:  # another process created it meanwhile
            pass
    for file in (path, *(path.with_name(path.name + suffix) for suffix in _SIDE_FILES)):
        make_private(file)


def connect(path: Path, synchronous: str = "FULL") -> sqlite3.Connection:
    """Open a SQLite file for concurrent multi-process use (WAL, busy timeout), with its
    folder and files owner-only (``_private_database``)."""
    _private_database(path)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=_BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the block in one ``BEGIN IMMEDIATE`` transaction; map disk faults
    (full, read-only, locked too long) to ``StoreUnavailable`` so the API answers
    503 instead of 500. Nothing of a failed block is kept."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            _rollback(conn)
            raise
        conn.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        _rollback(conn)
        raise StoreUnavailable(f"operational store unavailable: {exc}") from exc


def split_statements(script: str) -> list[str]:
    """The statements of a SQL script. Splitting at every ``;`` would cut a
    trigger body (``BEGIN ...; END``) apart; a piece is a statement only once
    SQLite says it is complete."""
    statements: list[str] = []
    current = ""
    for piece in script.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \t\r\n;"):
                statements.append(current.strip())
            current = ""
    if current.strip(" \t\r\n;"):
        statements.append(current.strip().rstrip(";"))
    return statements


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply the versioned SQL files in ``storage/migrations`` not applied yet,
    each in its own transaction; return the names applied now."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    done = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
    applied: list[str] = []
    files = sorted(
        (f for f in resources.files("storage.migrations").iterdir() if f.name.endswith(".sql")),
        key=lambda f: f.name,
    )
    for file in files:
        if file.name in done:
            continue
        statements = split_statements(file.read_text())
        with write_transaction(conn):
            # Re-check under the write lock: another process may have just applied it.
            if conn.execute("SELECT 1 FROM schema_migrations WHERE name = ?", (file.name,)).fetchone():
                continue
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (file.name, ts(datetime.now(UTC))))
        applied.append(file.name)
    return applied


def open_connection(path: Path, synchronous: str = "FULL") -> sqlite3.Connection:
    """A connection to the operational store with every migration applied; one
    per process (or worker), shared by that process's repositories."""
    conn = connect(path, synchronous)
    migrate(conn)
    return conn


@contextmanager
def _constraints() -> Iterator[None]:
    """A broken constraint as the store's ``ConstraintViolation`` (what PostgreSQL's is too)."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise ConstraintViolation(str(exc)) from exc


class SqliteTx:
    """``storage.database.Tx`` on a SQLite connection inside a transaction. Every call
    is synchronous under its ``async`` form: an operation over it never suspends, so the
    group-commit thread runs it to completion with ``run_inline``."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def fetch_one(self, sql: str, args: Sequence[object] = ()) -> Row | None:
        """The first row of a query (``… RETURNING`` included), or None."""
        with _constraints():
            row: Row | None = self._conn.execute(sql, args).fetchone()
        return row

    async def fetch_all(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """Every row of a query."""
        with _constraints():
            return self._conn.execute(sql, args).fetchall()

    async def execute(self, sql: str, args: Sequence[object] = ()) -> int:
        """Run a statement; the number of rows it changed."""
        with _constraints():
            return self._conn.execute(sql, args).rowcount

    async def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> int:
        """Run a statement once per row of arguments; the rows changed in all."""
        with _constraints():
            return self._conn.executemany(sql, rows).rowcount

    async def lock(self, key: str) -> None:
        """Nothing to do: a SQLite write transaction (``BEGIN IMMEDIATE``) holds the
        database's one write lock already."""


def run_inline(awaitable: Awaitable[T]) -> T:
    """The result of a coroutine that never suspends (an operation over ``SqliteTx``),
    run on the calling thread without an event loop."""
    steps = awaitable.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    steps.close()
    raise RuntimeError("an operation on SQLite awaited something other than its transaction")
