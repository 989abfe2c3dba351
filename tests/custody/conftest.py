"""Fixtures of the custody tests: the process's SoftHSM2 token, a fresh store per
test, and a service with a manual clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.accounts import Principal
from services.custody.lifecycle import ManagedCustodyService
from services.custody.softhsm import open_softhsm
from storage.managed_keys_sqlite import SqliteManagedKeyStore
from storage.sqlite_db import open_database
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
def db(tmp_path):
    """A migrated operational store of its own."""
    conn = open_database(tmp_path / "qday.sqlite")
    yield conn
    conn.close()


@pytest.fixture
def store(db) -> SqliteManagedKeyStore:
    """Managed keys on the test's store (signature counts written inline)."""
    return SqliteManagedKeyStore(db)


@pytest.fixture
def clock() -> ManualClock:
    """A clock the test moves."""
    return ManualClock(datetime(2026, 11, 21, 12, 0, tzinfo=UTC))


@pytest.fixture
def principal(db) -> Principal:
    """A Pro account's live secret key."""
    return add_principal(db)


@pytest.fixture
def service(store, backend, clock) -> ManagedCustodyService:
    """The custody service without an executor (calls run inline)."""
    return ManagedCustodyService(store, backend, clock)
