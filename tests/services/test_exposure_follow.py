"""The chain-head follower's lease on both engines: a node with nothing EVM watched writes
nothing (no lease taken each poll); with a watched address one node takes the lease, and
stopping gives it back, or leaves it to expire when the store does not answer, without
holding shutdown up."""

from __future__ import annotations

import asyncio
import socket

import pytest

from chains.clients.evm import EvmClient
from chains.endpoints import EndpointConfig, RetrySettings
from chains.environment import Environment
from chains.registry import Chain
from services import exposure_follow
from services.exposure_follow import LEASE_KEY, ExposureFollower
from storage.database import Database
from storage.models import WatchedAddress
from storage.sql_alert_state import SqlAlertStateStore
from storage.sql_scans import SqlScanStore
from tests.storage.test_engine_parity import NOW, accounts
from tests.support import ManualClock

ADDRESS = "0x" + "ab" * 20


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _HungRelease(SqlScanStore):
    """The scan store with a release that never answers (a store gone away mid-shutdown)."""

    async def release_lease(self, key: str, holder: str) -> None:
        await asyncio.Event().wait()


def _follower(database: Database, leases: SqlScanStore, evm: EvmClient) -> ExposureFollower:
    clients = {Environment.LIVE: {Chain.ETHEREUM: evm}, Environment.TEST: {}}
    clock = ManualClock(NOW)
    return ExposureFollower(SqlAlertStateStore(database), leases, clients, (), clock, lambda: None, poll_seconds=1)


@pytest.fixture
async def evm() -> EvmClient:
    """A client of an EVM endpoint nobody listens on: every head asked fails (a chain down)."""
    url = f"http://127.0.0.1:{_unused_port()}"
    return EvmClient(Chain.ETHEREUM, EndpointConfig(url, retry=RetrySettings(attempts=1, base_delay=0.01)))


async def _watch(database: Database, chain: str) -> None:
    await accounts(database, "usr_1")
    entry = WatchedAddress("w_1", "usr_1", Environment.LIVE, chain, ADDRESS, None, NOW)
    assert await SqlScanStore(database).watch(entry) is not None


async def test_an_idle_node_takes_no_lease(database: Database, evm: EvmClient) -> None:
    await _watch(database, "bitcoin")  # watched, but not on a followed EVM chain
    leases = SqlScanStore(database)
    follower = _follower(database, leases, evm)
    assert await follower.poll_once() == 0
    assert await leases.lease(LEASE_KEY) is None
    await follower.aclose()


async def test_a_watched_address_takes_the_lease_and_stopping_gives_it_back(database: Database, evm: EvmClient) -> None:
    await _watch(database, "ethereum")
    leases = SqlScanStore(database)
    follower = _follower(database, leases, evm)
    assert await follower.poll_once() == 0  # the chain does not answer: nothing raised this pass
    held = await leases.lease(LEASE_KEY)
    assert held is not None and held.expires_at == NOW + exposure_follow.LEASE_TTL
    other = _follower(database, leases, evm)
    assert await other.poll_once() == 0
    assert (await leases.lease(LEASE_KEY)) == held  # the other node did not take it over
    await follower.aclose()
    assert await leases.lease(LEASE_KEY) is None  # given back: another node follows at once
    await other.aclose()


async def test_stopping_does_not_wait_for_a_store_that_does_not_answer(
    database: Database, evm: EvmClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _watch(database, "ethereum")
    monkeypatch.setattr(exposure_follow, "RELEASE_SECONDS", 0.05)
    leases = _HungRelease(database)
    follower = _follower(database, leases, evm)
    await follower.poll_once()
    await asyncio.wait_for(follower.aclose(), timeout=10)  # bounded by RELEASE_SECONDS, not the store
    lease = await leases.lease(LEASE_KEY)
    assert lease is not None and lease.expires_at == NOW + exposure_follow.LEASE_TTL  # left to expire
