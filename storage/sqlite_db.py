"""The SQLite file of the operational store: connections, write transactions,
migrations and the stored form of timestamps. Every SQLite repository and writer
builds on these; nothing here knows a table but ``schema_migrations``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, overload

from storage.errors import StoreUnavailable

_BUSY_TIMEOUT_MS = 5000
#: A connection to the operational store (the type callers above storage may name).
Connection = sqlite3.Connection
#: A row as SQLite returns it.
Row = tuple[Any, ...]


@overload
def ts(value: datetime) -> str: ...
@overload
def ts(value: None) -> None: ...
def ts(value: datetime | None) -> str | None:
    """A datetime as stored: ISO 8601 UTC with microseconds (None stays NULL)."""
    return None if value is None else value.astimezone(UTC).isoformat(timespec="microseconds")


@overload
def dt(value: str) -> datetime: ...
@overload
def dt(value: None) -> None: ...
def dt(value: str | None) -> datetime | None:
    """A stored timestamp back as an aware datetime (NULL stays None)."""
    return None if value is None else datetime.fromisoformat(value)


def connect(path: Path, synchronous: str = "FULL") -> sqlite3.Connection:
    """Open a SQLite file for concurrent multi-process use (WAL, busy timeout)."""
    path.parent.mkdir(parents=True, exist_ok=True)
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


def insert_or_get(
    c: sqlite3.Connection, table: str, columns: str, values: Row, unique: tuple[str, ...], unique_values: Row
) -> Row:
    """Insert a row unless one with the same ``unique`` key exists, and return the stored
    row either way: idempotent adds (registering a key twice, watching an address twice)."""
    c.execute(
        f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(values))})"
        f" ON CONFLICT ({', '.join(unique)}) DO NOTHING",
        values,
    )
    where = " AND ".join(f"{name} = ?" for name in unique)
    stored: Row = c.execute(f"SELECT {columns} FROM {table} WHERE {where}", unique_values).fetchone()
    return stored


def open_database(path: Path, synchronous: str = "FULL") -> sqlite3.Connection:
    """A connection to the operational store with every migration applied; one
    per process (or worker), shared by that process's repositories."""
    conn = connect(path, synchronous)
    migrate(conn)
    return conn
