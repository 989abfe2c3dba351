"""Chain endpoints that hang, reset, fail, send garbage or answer late, seen through the API.

A real ``qday serve`` subprocess scans with a test key. Its ``base`` endpoint goes through
``tests.faultproxy.FaultProxy`` to anvil; its ``ethereum`` endpoint (another upstream, with
its own breaker) reaches anvil directly. Timeouts are small so the file runs in seconds.
For each fault mode:

- a scan on the faulted chain answers ``503 SCAN_004`` within the call's documented
  deadline (``retry_budget``, docs/chain-clients.md) plus a margin for HTTP and process
  overhead: a correctness bound, not a speed target;
- a scan on ethereum, sent while the faulted scan is in flight, succeeds;
- the breaker opens: further scans answer SCAN_004 without a single new connection at
  the proxy;
- when the proxy passes traffic again, scans keep failing fast until the cool-down is
  over, then one probe reaches the upstream and scans succeed again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.faultproxy import FaultProxy
from tests.support import ServerProcess, Tenant, make_tenant

SCAN = "/v1/scan/wallet"
TIMEOUT = 0.4  # seconds per attempt
ATTEMPTS = 2
BUDGET = 1.0  # the documented overall deadline of one upstream call
BREAKER_FAILURES = 4
COOLDOWN = 1.5
MARGIN = 1.5  # HTTP round trip, scoring and a busy 2-core machine
FAULTS = ("hang", "reset", "status", "garbage", "bad_json", "slow")

pytestmark = pytest.mark.slow

CONFIG = f"""
[chains.settings]
timeout = {TIMEOUT}
retry_attempts = {ATTEMPTS}
retry_base_delay = 0.05
retry_max_delay = 0.1
retry_budget = {BUDGET}
breaker_failures = {BREAKER_FAILURES}
breaker_cooldown = {COOLDOWN}
"""


@pytest.fixture(scope="module")
def proxy(anvil) -> Iterator[FaultProxy]:
    """The fault proxy in front of anvil, serving the ``base`` chain."""
    with FaultProxy(anvil.url, max_hold=10) as p:
        yield p


@pytest.fixture(scope="module")
def server(anvil, proxy, tmp_path_factory) -> Iterator[ServerProcess]:
    """``qday serve`` with base behind the proxy and ethereum straight on anvil."""
    data_dir: Path = tmp_path_factory.mktemp("chain-faults")
    config = data_dir / "qday.toml"
    config.write_text(CONFIG)
    env = {
        "QDAY_CONFIG": str(config),
        "QDAY_TEST_BASE_RPC_URL": proxy.url,
        "QDAY_TEST_ETHEREUM_RPC_URL": anvil.url,
        "QDAY_CUSTODY_BACKEND": "disabled",
        "QDAY_RATE_LIMIT_MULTIPLIER": "100",
    }
    process = ServerProcess(data_dir, env=env)
    yield process
    process.stop()


@pytest.fixture(scope="module")
async def scanner(server) -> AsyncIterator[tuple[httpx.AsyncClient, Tenant]]:
    """A client of the server and a tenant with a test secret key."""
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as client:
        yield client, await make_tenant(client, ("secret_test",))


@pytest.fixture(scope="module")
def funded(anvil) -> str:
    """An address with a balance on anvil, so scans of it have something to find."""
    return anvil.new_account(3 * 10**18).address


async def _scan(scanner: tuple[httpx.AsyncClient, Tenant], address: str, chain: str) -> tuple[httpx.Response, float]:
    client, tenant = scanner
    start = time.monotonic()
    response = await client.post(SCAN, json={"address": address, "chain": chain, "refresh": True},
                                 headers=tenant.auth("secret_test"))
    return response, time.monotonic() - start


def _assert_scan_004(response: httpx.Response) -> dict:
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["code"] == "SCAN_004", error
    assert "base JSON-RPC" in error["message"], error
    return error


@pytest.mark.parametrize("fault", FAULTS)
async def test_faulted_chain_answers_scan_004_in_time_opens_its_breaker_and_recovers(
        fault, scanner, proxy, funded):
    proxy.set_mode("pass")
    ok, _ = await _scan(scanner, funded, "base")
    assert ok.status_code == 200, ok.text  # the breaker is closed at the start

    proxy.set_mode(fault, delay=TIMEOUT * 2.5)
    (faulted, elapsed), (healthy, _) = await asyncio.gather(
        _scan(scanner, funded, "base"), _scan(scanner, funded, "ethereum"))
    _assert_scan_004(faulted)
    assert elapsed <= BUDGET + MARGIN, f"{fault}: SCAN_004 after {elapsed:.2f}s, deadline {BUDGET}s"
    assert healthy.status_code == 200, healthy.text

    # Keep scanning until a scan is refused without reaching the proxy: the breaker is open.
    opened = None
    for _ in range(BREAKER_FAILURES):
        before = proxy.connections
        response, elapsed = await _scan(scanner, funded, "base")
        error = _assert_scan_004(response)
        assert elapsed <= BUDGET + MARGIN, f"{fault}: SCAN_004 after {elapsed:.2f}s, deadline {BUDGET}s"
        if proxy.connections == before:
            opened = error
            break
    assert opened is not None, f"{fault}: the breaker never opened"
    assert "circuit open" in opened["message"]

    proxy.set_mode("pass")  # the upstream is back, but the cool-down is not over
    before = proxy.connections
    refused, _ = await _scan(scanner, funded, "base")
    retry_after = _assert_scan_004(refused)["details"]["retry_after"]
    assert proxy.connections == before
    healthy, _ = await _scan(scanner, funded, "ethereum")
    assert healthy.status_code == 200, healthy.text

    await asyncio.sleep(retry_after + 0.05)
    recovered, _ = await _scan(scanner, funded, "base")
    assert recovered.status_code == 200, recovered.text
    assert recovered.json()["data"]["chain"] == "base"
    assert proxy.connections > before
    again, _ = await _scan(scanner, funded, "base")
    assert again.status_code == 200, again.text
