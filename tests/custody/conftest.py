"""Fixtures of the custody tests: the process's SoftHSM2 token, a fresh store per
test on each engine (``database``, from ``tests.databases``) or on a SQLite file
(``sqlite_database``, for what only SQLite files have), and a service with a manual
clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from services.accounts import Principal
from services.custody.lifecycle import ManagedCustodyService
from services.custody.softhsm import open_softhsm
from storage.database import Database
from storage.sql_managed_keys import SqlManagedKeyStore
from storage.sqlite_engine import SqliteDatabase
from tests.custody.support import add_principal, shared_softhsm_conf
from tests.support import ManualClock

# At collection, before any app or server of this session starts.
shared_softhsm_conf()


@pytest.fixture(scope="session")
def backend():
    """The embedded backend on the session's throw-away token."""
    conf = shared_softhsm_conf()
    if conf is None:
        pytest.skip("SoftHSM2 is not installed: `make test` installs it (apt-get install softhsm2)")
    custody = open_softhsm(conf)
    yield custody
    custody.close()


@pytest.fixture
def sqlite_database(tmp_path) -> Iterator[SqliteDatabase]:
    """A migrated operational store of its own in ``tmp_path/qday.sqlite`` (writes
    committed inline)."""
    db = SqliteDatabase(tmp_path / "qday.sqlite")
    yield db
    db.close()


@pytest.fixture
def store(database: Database) -> SqlManagedKeyStore:
    """Managed keys on the test's store, on each engine."""
    return SqlManagedKeyStore(database)


@pytest.fixture
def clock() -> ManualClock:
    """A clock the test moves."""
    return ManualClock(datetime(2026, 11, 21, 12, 0, tzinfo=UTC))


@pytest.fixture
async def principal(database: Database) -> Principal:
    """A Pro account's live secret key."""
    return await add_principal(database)


@pytest.fixture
def service(store, backend, clock) -> ManagedCustodyService:
    """The custody service without an executor (calls run inline)."""
    return ManagedCustodyService(store, backend, clock)
