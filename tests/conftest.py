"""Shared pytest fixtures for the whole suite: conformance vectors, anvil, and the
in-process API app of tests/api and tests/security (started once per session)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.anvil import MISSING_ANVIL, Anvil, anvil_binary

if TYPE_CHECKING:
    from sanic import Sanic

    from tests.support import ManualClock, Tenant

# data_dir, today, snapshot_world … for tests/reliability too; both engines of the store
pytest_plugins = ["tests.pipelines.fixtures", "tests.databases"]

REPO_ROOT = Path(__file__).resolve().parent.parent


def _conformance_root() -> Path:
    override = os.environ.get("QDAY_CONFORMANCE_DIR")
    if override:
        return Path(override)
    return REPO_ROOT.parent / "shared" / "conformance"


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    """The public test-vector folder (../shared/conformance); skips the test when absent."""
    root = _conformance_root()
    if not (root / "INDEX.md").is_file():
        pytest.skip(
            f"conformance vectors not found at {root} "
            "(set QDAY_CONFORMANCE_DIR or place shared/conformance beside the checkout)"
        )
    return root


@pytest.fixture(scope="session")
def anvil() -> Iterator[Anvil]:
    """One anvil node for the session (chain id 31337) on a free loopback port;
    skips the test when the binary is absent (`make anvil` installs it)."""
    binary = anvil_binary()
    if binary is None:
        pytest.skip(MISSING_ANVIL)
    node = Anvil(binary, chain_id=31337)
    yield node
    node.stop()


# The API app's fixtures import the app (tests.support) only when a test asks for them,
# so that sessions without API tests do not pay for importing it.


@pytest.fixture(scope="session")
def app_clock() -> ManualClock:
    """The manual clock of the session's app; tests move it through ``clock``."""
    from tests.support import ManualClock

    return ManualClock()


@pytest.fixture(scope="session")
async def app(tmp_path_factory, app_clock, app_database_url) -> AsyncIterator[Sanic]:
    """The API app with its storage in a temporary folder or in PostgreSQL, started once per
    session and engine (Sanic would otherwise start an app per test). Tests keep out of each
    other's way by acting from their own client address (``client_for``) and their own
    accounts."""
    from services.settings import load_settings
    from tests.support import engine_env, running_app

    # no family lookups, no chain-head following: the public endpoints of the chains are
    # never called in tests
    env = {"QDAY_FAMILY_CHAINS": "none", "QDAY_ALERT_POLL_SECONDS": "0", **engine_env(app_database_url)}
    settings = load_settings(env, data_dir=tmp_path_factory.mktemp("api-data"))
    async with running_app(settings, app_clock) as application:
        yield application


@pytest.fixture
def clock(app_clock) -> Iterator[ManualClock]:
    """The session app's clock, for a test to move: back at its start time when the test
    ends, so every test starts at the same time whatever ran before it."""
    yield app_clock
    app_clock.reset()


@pytest.fixture
async def client(app) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the session's app with its own loopback address."""
    from tests.support import client_for

    async with client_for(app) as c:
        yield c


@pytest.fixture
async def tenant(client) -> Tenant:
    """A fresh account with a live secret key."""
    from tests.support import make_tenant

    return await make_tenant(client)
