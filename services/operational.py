"""The operational database the settings name: PostgreSQL at ``database_url``, else the
SQLite file in the data directory. What the API, the CLI and the pipelines open."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from services.settings import Settings
from storage.database import Database
from storage.engines import open_database


async def open_operational(settings: Settings, *, group_commit: bool = False) -> Database:
    """The operational database of ``settings``, migrations applied (closed by the caller).
    ``group_commit``: SQLite writes go through a writer thread (servers, pipelines)."""
    return await open_database(
        settings.database_url,
        settings.operational_db,
        settings.sqlite_synchronous,
        group_commit=group_commit,
        pool_size=settings.database_pool_size,
    )


@asynccontextmanager
async def operational(settings: Settings, *, group_commit: bool = False) -> AsyncIterator[Database]:
    """``open_operational`` as a context: closed on exit."""
    db = await open_operational(settings, group_commit=group_commit)
    try:
        yield db
    finally:
        await db.aclose()
