"""The client under the plan's rate limit: a bulk scan larger than the free
plan's 10 scans a minute completes without a failed row, waiting exactly the
server's Retry-After between windows.

The app runs in this process on a manual clock (so a one-minute window passes
at once) and the client's ``sleep`` moves that clock: the limiter, its headers
and the client's pacing are all the real code.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from api.ratelimit import RateGroup, limit_for
from qday_client import QdayClient, RateLimitError
from qday_client.bulk import ScanTarget, scan_all
from services.settings import load_settings
from storage.models import Plan
from tests.support import ManualClock, client_for, make_tenant, running_app

FREE_SCANS_PER_MINUTE = limit_for(RateGroup.SCAN, Plan.FREE, 10, 1.0)


@pytest.fixture
async def limited_app(anvil, tmp_path):
    clock = ManualClock()
    settings = load_settings(
        {"QDAY_TEST_ETHEREUM_RPC_URL": anvil.url, "QDAY_FAMILY_CHAINS": "ethereum"}, data_dir=tmp_path
    )
    async with running_app(settings, clock) as app:
        async with client_for(app) as setup:
            tenant = await make_tenant(setup, ("secret_test",))
        yield app, clock, tenant.key("secret_test")


def _client(app, clock: ManualClock, key: str, sleeps: list[float], **options) -> QdayClient:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)
        await asyncio.sleep(0)

    transport = httpx.ASGITransport(app=app, client=("127.77.0.1", 40000))
    return QdayClient(key, "http://qday.test", transport=transport, sleep=sleep, **options)


async def test_bulk_scan_over_the_limit_waits_for_the_next_window_and_completes(limited_app, anvil):
    app, clock, key = limited_app
    assert FREE_SCANS_PER_MINUTE == 10
    targets = [ScanTarget(n, anvil.new_account(10**18).address, "ethereum") for n in range(1, 14)]
    sleeps: list[float] = []
    async with _client(app, clock, key, sleeps, max_retries=5) as client:
        rows = await scan_all(client, targets, concurrency=4)
    assert [(r.target.line, r.error_code) for r in rows] == [(n, None) for n in range(1, 14)]
    assert [r.result.address for r in rows] == [t.address for t in targets]
    assert sleeps == [60.0]  # one pause for all workers: the window is aligned on the minute


async def test_exhausted_retries_raise_rate_limit_error_with_the_servers_hint(limited_app, anvil):
    app, clock, key = limited_app
    address = anvil.new_account(10**18).address
    sleeps: list[float] = []
    async with _client(app, clock, key, sleeps, max_retries=0) as client:
        for _ in range(FREE_SCANS_PER_MINUTE):
            await client.scan_wallet(address)
        clock.advance(15)
        with pytest.raises(RateLimitError) as limited:
            await client.scan_wallet(address)
    assert (limited.value.code, limited.value.status, limited.value.retry_after) == ("RATE_001", 429, 45.0)
    assert limited.value.request_id.startswith("req_") and sleeps == []
