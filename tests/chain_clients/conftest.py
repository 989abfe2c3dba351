"""Fixtures of the chain-client tests: anvil, a loopback server, fake clocks, conformance data."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.chain_clients.loopback import Loopback
from tests.chain_clients.support import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    """A fresh fake clock per test."""
    return FakeClock()


@pytest.fixture
async def loopback() -> AsyncIterator[Loopback]:
    server = await Loopback().start()
    yield server
    await server.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture(scope="session")
def rpc_vector(conformance_dir: Path) -> Callable[[str], Any]:
    """Load a JSON file of the conformance folder by relative path."""

    def load(relative: str) -> Any:
        return json.loads((conformance_dir / relative).read_text(encoding="utf-8"))

    return load
