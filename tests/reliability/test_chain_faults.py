"""Chain endpoints that hang, reset, fail, send garbage or answer late, seen through the API.

The app (in process, started through its lifespan like the server) scans with a test key.
Its ``base`` endpoint goes over real HTTP through ``tests.faultproxy.FaultProxy`` to anvil;
its ``ethereum`` endpoint (another upstream, with its own breaker) reaches anvil directly.
Timeouts are small so the file runs in seconds. For each fault mode:

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
import math
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from eth_account import Account

from services.pricing import PRICE_WAIT_SECONDS
from services.settings import load_settings
from tests.anvil import MISSING_ANVIL, Anvil, anvil_binary
from tests.faultproxy import FaultProxy
from tests.support import ManualClock, Tenant, client_for, make_tenant, running_app

SCAN = "/v1/scan/wallet"
TIMEOUT = 0.4  # seconds per attempt
ATTEMPTS = 2
BUDGET = 1.0  # the documented overall deadline of one upstream call
BREAKER_FAILURES = 4
COOLDOWN = 1.5
MARGIN = 1.5  # HTTP round trip, scoring and a busy 2-core machine
FAULTS = ("hang", "reset", "status", "garbage", "bad_json", "slow")

pytestmark = pytest.mark.slow


def chain_settings(timeout: float, attempts: int, budget: float, failures: int, cooldown: float) -> str:
    """The ``[chains.settings]`` table of a config file (every endpoint)."""
    return (
        f"[chains.settings]\ntimeout = {timeout}\nretry_attempts = {attempts}\nretry_base_delay = 0.05\n"
        f"retry_max_delay = 0.1\nretry_budget = {budget}\nbreaker_failures = {failures}\n"
        f"breaker_cooldown = {cooldown}\n"
    )


@asynccontextmanager
async def scanning_app(
    data_dir: Path, env: dict[str, str], config: str
) -> AsyncIterator[tuple[httpx.AsyncClient, Tenant]]:
    """The app on ``env``'s endpoints and ``config``, a client of it and a tenant with a
    test secret key."""
    config_file = data_dir / "qday.toml"
    config_file.write_text(config)
    # no family fan-out: each test counts the requests reaching one chain's endpoint
    env = {"QDAY_FAMILY_CHAINS": "none", **env}
    settings = load_settings(env, config_file, data_dir=data_dir, custody_backend="disabled", rate_limit_multiplier=100)
    async with running_app(settings, ManualClock()) as app, client_for(app) as client:
        yield client, await make_tenant(client, ("secret_test",))


@pytest.fixture(scope="module")
def proxy(anvil) -> Iterator[FaultProxy]:
    """The fault proxy in front of anvil, serving the ``base`` chain."""
    with FaultProxy(anvil.url, max_hold=10) as p:
        yield p


@pytest.fixture(scope="module")
async def scanner(anvil, proxy, tmp_path_factory) -> AsyncIterator[tuple[httpx.AsyncClient, Tenant]]:
    """The app with base behind the proxy and ethereum straight on anvil."""
    env = {"QDAY_TEST_BASE_RPC_URL": proxy.url, "QDAY_TEST_ETHEREUM_RPC_URL": anvil.url}
    config = chain_settings(TIMEOUT, ATTEMPTS, BUDGET, BREAKER_FAILURES, COOLDOWN)
    async with scanning_app(tmp_path_factory.mktemp("chain-faults"), env, config) as pair:
        yield pair


@pytest.fixture(scope="module")
def funded(anvil) -> str:
    """An address with a balance on anvil, so scans of it have something to find."""
    return anvil.new_account(3 * 10**18).address


async def _scan(scanner: tuple[httpx.AsyncClient, Tenant], address: str, chain: str) -> tuple[httpx.Response, float]:
    client, tenant = scanner
    start = time.monotonic()
    response = await client.post(
        SCAN, json={"address": address, "chain": chain, "refresh": True}, headers=tenant.auth("secret_test")
    )
    return response, time.monotonic() - start


def _assert_scan_004(response: httpx.Response) -> dict:
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["code"] == "SCAN_004", error
    assert "base JSON-RPC" in error["message"], error
    return error


@pytest.mark.parametrize("fault", FAULTS)
async def test_faulted_chain_answers_scan_004_in_time_opens_its_breaker_and_recovers(fault, scanner, proxy, funded):
    proxy.set_mode("pass")
    ok, _ = await _scan(scanner, funded, "base")
    assert ok.status_code == 200, ok.text  # the breaker is closed at the start

    proxy.set_mode(fault, delay=TIMEOUT * 2.5)
    (faulted, elapsed), (healthy, _) = await asyncio.gather(
        _scan(scanner, funded, "base"), _scan(scanner, funded, "ethereum")
    )
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
    # the header says the same, in whole seconds (issue 15: SCAN_004 carries Retry-After)
    assert refused.headers["Retry-After"] == str(max(1, math.ceil(retry_after)))
    assert 1 <= int(faulted.headers["Retry-After"]) <= math.ceil(COOLDOWN)
    healthy, _ = await _scan(scanner, funded, "ethereum")
    assert healthy.status_code == 200, healthy.text

    await asyncio.sleep(retry_after + 0.05)
    recovered, _ = await _scan(scanner, funded, "base")
    assert recovered.status_code == 200, recovered.text
    assert recovered.json()["data"]["chain"] == "base"
    assert proxy.connections > before
    again, _ = await _scan(scanner, funded, "base")
    assert again.status_code == 200, again.text


async def test_slow_answers_within_the_timeout_are_answers_not_faults(scanner, proxy, funded):
    proxy.set_mode("slow", delay=TIMEOUT / 4)
    try:
        for _ in range(BREAKER_FAILURES + 1):  # more scans than failures it takes to open the breaker
            response, _ = await _scan(scanner, funded, "base")
            assert response.status_code == 200, response.text
    finally:
        proxy.set_mode("pass")


async def test_a_caller_that_goes_away_does_not_break_the_same_scan_for_others(scanner, proxy, funded):
    """Identical scans share one fetch; cancelling the request that started it (a client
    that disconnected) must leave the fetch running for the other callers."""
    proxy.set_mode("slow", delay=TIMEOUT / 2)
    try:
        first = asyncio.create_task(_scan(scanner, funded, "base"))
        await asyncio.sleep(TIMEOUT / 8)
        second = asyncio.create_task(_scan(scanner, funded, "base"))
        await asyncio.sleep(TIMEOUT / 8)
        first.cancel()
        response, _ = await second
        assert response.status_code == 200, response.text
        with pytest.raises(asyncio.CancelledError):
            await first
    finally:
        proxy.set_mode("pass")


@pytest.fixture(scope="module")
def signer(anvil) -> str:
    """An address that has sent a transaction: its scan takes three upstream batches
    (state, then the first transaction's lookup and body, for key recovery)."""
    account = anvil.new_account(10**19)
    anvil.send(
        account,
        {
            "to": Account.create().address,
            "value": 1,
            "gas": 21000,
            "maxFeePerGas": 10**10,
            "maxPriorityFeePerGas": 10**9,
        },
    )
    return account.address


async def test_a_scan_gets_one_retry_budget_however_many_requests_it_makes(scanner, proxy, signer):
    """Each request answers just within the timeout, so no single request fails; the
    scan's three sequential requests together still cannot outlast one budget."""
    proxy.set_mode("slow", delay=BUDGET * 0.35)
    try:
        before = proxy.connections
        response, elapsed = await _scan(scanner, signer, "base")
        error = _assert_scan_004(response)
        assert elapsed <= BUDGET + MARGIN, f"SCAN_004 after {elapsed:.2f}s, budget {BUDGET}s"
        assert proxy.connections - before == 3, error
    finally:
        proxy.set_mode("pass")
    response, _ = await _scan(scanner, signer, "base")
    assert response.status_code == 200, response.text


async def test_a_hung_ethereum_endpoint_does_not_hold_up_scans_of_other_chains(tmp_path):
    """The USD price feeds are read on the Ethereum endpoint. A scan of base waits for
    them at most ``PRICE_WAIT_SECONDS``, then prices from the static file, however long
    the endpoint's own retry budget is; once the feeds' breaker is open it does not wait.
    Live environment (test networks have no USD value), base on its own anvil node with
    base's chain id."""
    binary = anvil_binary()
    if binary is None:
        pytest.skip(MISSING_ANVIL)
    base = Anvil(binary, chain_id=8453)
    budget = 3 * PRICE_WAIT_SECONDS
    try:
        funded = base.new_account(3 * 10**18).address
        with FaultProxy(base.url, max_hold=budget + 5) as hung:
            hung.set_mode("hang")
            env = {"QDAY_ETHEREUM_RPC_URL": hung.url, "QDAY_BASE_RPC_URL": base.url, "QDAY_FAMILY_CHAINS": "none"}
            config_file = tmp_path / "qday.toml"
            config_file.write_text(chain_settings(budget, 2, budget, 1, 60))
            settings = load_settings(env, config_file, data_dir=tmp_path, custody_backend="disabled")
            async with running_app(settings, ManualClock()) as app, client_for(app) as client:
                tenant = await make_tenant(client, ("secret_live",))

                async def scan() -> tuple[httpx.Response, float]:
                    start = time.monotonic()
                    body = {"address": funded, "chain": "base", "refresh": True}
                    response = await client.post(SCAN, json=body, headers=tenant.auth("secret_live"))
                    return response, time.monotonic() - start

                first, elapsed = await scan()
                assert first.status_code == 200, first.text
                assert first.json()["data"]["balanceAtRiskUsd"] is not None  # the static file's price
                assert elapsed <= PRICE_WAIT_SECONDS + MARGIN < budget, f"base scan took {elapsed:.2f}s"
                before = hung.connections
                second, _ = await scan()
                assert second.status_code == 200, second.text
                assert hung.connections == before  # the feeds' breaker is open: no more waiting on them
    finally:
        base.stop()
