"""Fixtures of the API tests: one app started per session, one client per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from services.settings import load_settings
from tests.support import ManualClock, Tenant, client_for, make_tenant, running_app


@pytest.fixture(scope="session")
def clock() -> ManualClock:
    """The manual clock shared by the session's app."""
    return ManualClock()


@pytest.fixture(scope="session")
async def app(tmp_path_factory, clock):
    """The API app with its storage in a temporary folder, started once."""
    settings = load_settings({}, data_dir=tmp_path_factory.mktemp("api-data"))
    async with running_app(settings, clock) as application:
        yield application


@pytest.fixture
async def client(app) -> AsyncIterator[httpx.AsyncClient]:
    """A client with its own loopback address."""
    async with client_for(app) as c:
        yield c


@pytest.fixture
async def tenant(client) -> Tenant:
    """A fresh account with a live secret key."""
    return await make_tenant(client)
