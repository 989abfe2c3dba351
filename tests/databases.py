"""Both engines of the operational store for tests: a SQLite file per test, and a
throw-away PostgreSQL server (``tests.postgres``) with a fresh database per test, copied
from a migrated template.

``database`` (parametrized over ``ENGINES``) is an open, migrated, empty operational
database; ``engine_url`` is the same choice as a settings value (``""`` for SQLite, a
``postgresql://`` URL otherwise), for tests that start an app or a process on it.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from storage.database import Database
from storage.engines import open_database
from storage.postgres_db import PostgresDatabase
from tests.postgres import MISSING_POSTGRES, PostgresServer, postgres_bin

ENGINES = ("sqlite", "postgresql")
_TEMPLATE = "qday_template"
_names = itertools.count()


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session (``make postgres`` installs it; the tests that
    need it skip, saying so, when it is missing)."""
    if postgres_bin() is None:
        pytest.skip(MISSING_POSTGRES)
    with PostgresServer(tmp_path_factory.mktemp("postgres")) as server:
        yield server


@pytest.fixture(scope="session")
async def postgres_template(postgres_server: PostgresServer) -> str:
    """A database with every migration applied, which each test's database copies."""
    url = postgres_server.create_database(_TEMPLATE)
    db = await PostgresDatabase.open(url, pool_size=1)
    await db.aclose()
    return _TEMPLATE


def new_postgres_database(server: PostgresServer, template: str) -> tuple[str, str]:
    """A fresh migrated database: its name and URL."""
    name = f"qday_t{os.getpid()}_{next(_names)}"
    return name, server.create_database(name, template=template)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer, postgres_template: str) -> Iterator[str]:
    """The URL of a fresh migrated database of this test's own, dropped afterwards."""
    name, url = new_postgres_database(postgres_server, postgres_template)
    yield url
    postgres_server.drop_database(name)


@pytest.fixture(params=ENGINES)
def engine_url(request: pytest.FixtureRequest) -> str:
    """``""`` (SQLite in the test's folder) or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return ""
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
async def database(engine_url: str, tmp_path: Path) -> AsyncIterator[Database]:
    """An open, migrated, empty operational database on each engine."""
    db = await open_database(engine_url, tmp_path / "qday.sqlite", pool_size=4)
    yield db
    await db.aclose()


def _engine_database(request: pytest.FixtureRequest) -> Iterator[str]:
    """``""`` for the SQLite param; for the PostgreSQL param a fresh migrated database's URL,
    dropped when the requesting fixture's scope ends."""
    if request.param == "sqlite":
        yield ""
        return
    server = request.getfixturevalue("postgres_server")
    name, url = new_postgres_database(server, request.getfixturevalue("postgres_template"))
    yield url
    server.drop_database(name)


@pytest.fixture(scope="session", params=ENGINES)
def app_database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The operational store of the session's shared app: ``""`` (SQLite in its data
    directory), then a PostgreSQL database; every test using the app runs on both engines."""
    yield from _engine_database(request)


@pytest.fixture(scope="module", params=ENGINES)
def module_database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The same choice for a module's own app, with a PostgreSQL database of the module's
    own: scan results cached by one module's chains never answer another module's scans."""
    yield from _engine_database(request)
