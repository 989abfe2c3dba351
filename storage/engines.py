"""Opening the operational store on the configured engine."""

from __future__ import annotations

from pathlib import Path

from storage.database import Database
from storage.postgres_db import PostgresDatabase
from storage.sqlite_engine import SqliteDatabase


async def open_database(
    url: str, path: Path, synchronous: str = "FULL", *, group_commit: bool = False, pool_size: int = 10
) -> Database:
    """PostgreSQL at ``url`` when one is given (``postgresql://…``), else the SQLite file
    ``path``; migrations applied either way. ``group_commit`` and ``synchronous`` concern
    SQLite (PostgreSQL commits each write on its own pooled connection), ``pool_size``
    PostgreSQL."""
    if url:
        return await PostgresDatabase.open(url, pool_size)
    return SqliteDatabase(path, synchronous, group_commit=group_commit)
