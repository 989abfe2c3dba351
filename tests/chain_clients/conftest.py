"""Fixtures of the chain-client tests: anvil, a loopback server, fake clocks, conformance data."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from chains.clients.transport import Timing
from tests.chain_clients.loopback import Loopback

OBSERVED_AT = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class FakeClock:
    """A monotonic clock that only moves when told to, and a sleep that moves it."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def timing(self, jitter: float = 0.5) -> Timing:
        """A ``Timing`` on this clock whose jitter draws are always ``jitter``."""
        return Timing(sleep=self.sleep, random=lambda: jitter, monotonic=self.monotonic, now=lambda: OBSERVED_AT)


@pytest.fixture
def clock() -> FakeClock:
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
