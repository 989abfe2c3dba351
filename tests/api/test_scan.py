"""POST /v1/scan/wallet against a real EVM node (anvil), and the watch list.

The app here points ``ethereum`` (live and test) at anvil and ``polygon`` at a
closed port, so upstream failure is real too.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator

import pytest
from eth_account import Account

from chains.environment import Environment
from services.settings import load_settings
from storage.models import Plan
from storage.sql_scans import SqlScanStore
from tests.anvil import free_port, running_anvil
from tests.api.test_envelope import assert_error, assert_meta
from tests.support import ManualClock, client_for, engine_env, make_tenant, running_app

SCAN = "/v1/scan/wallet"


@pytest.fixture(scope="module")
def anvil():
    yield from running_anvil(1)


@pytest.fixture(scope="module")
def scan_app_clock() -> ManualClock:
    """The clock of the module's app; tests move it through ``scan_clock``."""
    return ManualClock()


@pytest.fixture
def scan_clock(scan_app_clock) -> Iterator[ManualClock]:
    """The module app's clock for a test to move, back at its start time when the test ends."""
    yield scan_app_clock
    scan_app_clock.reset()


@pytest.fixture(scope="module")
async def scan_app(anvil, scan_app_clock, tmp_path_factory, module_database_url):
    closed = f"http://127.0.0.1:{free_port()}"
    env = {
        "QDAY_ETHEREUM_RPC_URL": anvil.url,
        "QDAY_TEST_ETHEREUM_RPC_URL": anvil.url,
        "QDAY_POLYGON_RPC_URL": closed,
        "QDAY_FAMILY_CHAINS": "ethereum",  # the family fan-out has its own tests (test_scan_family)
        **engine_env(module_database_url),  # on both engines
    }
    settings = load_settings(env, data_dir=tmp_path_factory.mktemp("scan-data"))
    async with running_app(settings, scan_app_clock) as app:
        yield app


@pytest.fixture
async def scanner(scan_app):
    async with client_for(scan_app) as client:
        tenant = await make_tenant(client, ("secret_live", "publishable_live", "secret_test"))
        await scan_app.ctx.store.set_plan(tenant.email, Plan.PRO)
        yield client, tenant


async def test_unused_funded_eoa_is_not_exposed_then_exposed_after_sending(scanner, anvil, scan_clock):
    client, tenant = scanner
    account = anvil.new_account(5 * 10**18)
    r = await client.post(SCAN, json={"address": account.address}, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    data = assert_meta(r)["data"]
    assert data["chain"] == "ethereum" and data["address"] == account.address
    assert data["publicKeyExposed"] is False and data["cached"] is False
    assert data["balanceAtRisk"] == "5 ETH"
    factors = {f["factor"]: f for f in data["riskFactors"]}
    assert set(factors) == {
        "public_key_exposure",
        "balance_at_risk",
        "transaction_frequency",
        "address_type",
        "address_reuse",
    }
    assert abs(sum(f["weight"] for f in data["riskFactors"]) - 1) < 1e-9
    assert data["riskScore"] in ("W1", "W2", "W3", "W4") and 0 <= data["riskValue"] <= 100
    assert data["chainGrade"] in "ABCDF" and data["chainFactors"]
    anvil.send(
        account,
        {
            "to": Account.create().address,
            "value": 10**18,
            "gas": 21000,
            "maxFeePerGas": 10**10,
            "maxPriorityFeePerGas": 10**9,
        },
    )
    r = await client.post(SCAN, json={"address": account.address, "refresh": True}, headers=tenant.auth("secret_live"))
    fresh = r.json()["data"]
    assert fresh["publicKeyExposed"] is True and fresh["cached"] is False
    assert fresh["riskValue"] > data["riskValue"]


async def test_results_are_cached_until_the_ttl(scanner, anvil, scan_clock):
    client, tenant = scanner
    account = anvil.new_account(10**18)
    first = (await client.post(SCAN, json={"address": account.address}, headers=tenant.auth("secret_live"))).json()
    second = (
        await client.post(SCAN, json={"address": account.address}, headers=tenant.auth("publishable_live"))
    ).json()
    assert second["data"]["cached"] is True
    assert second["data"]["scannedAt"] == first["data"]["scannedAt"]
    assert second["data"]["dataAsOf"] == first["data"]["dataAsOf"]
    scan_clock.advance(601)
    third = (await client.post(SCAN, json={"address": account.address}, headers=tenant.auth("secret_live"))).json()
    assert third["data"]["cached"] is False


async def test_identical_concurrent_scans_share_one_fetch(scanner, scan_app, anvil, monkeypatch):
    client, tenant = scanner
    account = anvil.new_account(10**18)
    from chains.environment import Environment
    from chains.registry import Chain

    real = scan_app.ctx.chain_clients[Environment.LIVE][Chain.ETHEREUM]
    calls = []
    original = real.observe

    async def counting(addresses):
        calls.append(addresses)
        await asyncio.sleep(0.05)
        return await original(addresses)

    monkeypatch.setattr(real, "observe", counting)
    responses = await asyncio.gather(
        *(
            client.post(SCAN, json={"address": account.address, "refresh": True}, headers=tenant.auth("secret_live"))
            for _ in range(5)
        )
    )
    assert [r.status_code for r in responses] == [200] * 5
    assert len(calls) == 1


async def test_address_with_no_activity_is_scan_003(scanner):
    client, tenant = scanner
    assert_error(
        await client.post(SCAN, json={"address": Account.create().address}, headers=tenant.auth("secret_live")),
        404,
        "SCAN_003",
    )


async def test_invalid_address_and_unsupported_chain(scanner):
    client, tenant = scanner
    headers = tenant.auth("secret_live")
    error = assert_error(await client.post(SCAN, json={"address": "0x12345"}, headers=headers), 400, "SCAN_001")
    assert error["message"]
    bad_checksum = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"  # EIP-55 example, last letter flipped
    assert_error(await client.post(SCAN, json={"address": bad_checksum}, headers=headers), 400, "SCAN_001")
    assert_error(
        await client.post(SCAN, json={"address": "0x" + "ab" * 20, "chain": "dogecoin"}, headers=headers),
        400,
        "SCAN_002",
    )
    assert_error(
        await client.post(
            SCAN, json={"address": "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "chain": "ethereum"}, headers=headers
        ),
        400,
        "SCAN_001",
    )


async def test_upstream_down_is_scan_004(scanner, anvil):
    client, tenant = scanner
    account = anvil.new_account(10**18)
    response = await client.post(
        SCAN, json={"address": account.address, "chain": "polygon"}, headers=tenant.auth("secret_live")
    )
    error = assert_error(response, 503, "SCAN_004")
    assert "polygon" in error["message"]
    assert int(response.headers["Retry-After"]) >= 1  # the breaker's cool-down once it is open


async def test_results_are_per_tenant_and_environment(scan_app, anvil):
    account = anvil.new_account(10**18)
    async with client_for(scan_app) as client:
        alice = await make_tenant(client, ("secret_live", "secret_test"))
        bob = await make_tenant(client)
        a = (await client.post(SCAN, json={"address": account.address}, headers=alice.auth("secret_live"))).json()
        assert a["data"]["cached"] is False
        b = (await client.post(SCAN, json={"address": account.address}, headers=bob.auth("secret_live"))).json()
        assert b["data"]["cached"] is False  # Bob cannot learn that Alice scanned it
        t = (await client.post(SCAN, json={"address": account.address}, headers=alice.auth("secret_test"))).json()
        assert t["data"]["cached"] is False


async def test_detect_lists_every_evm_chain(scanner):
    client, tenant = scanner
    r = await client.post(
        "/v1/scan/detect", json={"address": "0x" + "ab" * 20}, headers=tenant.auth("publishable_live")
    )
    data = assert_meta(r)["data"]
    assert data["defaultChain"] == "ethereum" and len(data["chains"]) == 15
    assert_error(
        await client.post("/v1/scan/detect", json={"address": "0"}, headers=tenant.auth("secret_live")), 400, "SCAN_001"
    )


async def test_watchlist_crud_and_isolation(scanner, scan_app):
    client, tenant = scanner
    headers = tenant.auth("secret_live")
    address = "0x" + "cd" * 20
    r = await client.post("/v1/watchlist", json={"address": address, "label": "cold wallet"}, headers=headers)
    assert r.status_code == 201, r.text
    entry = r.json()["data"]
    assert entry["chain"] == "ethereum" and entry["label"] == "cold wallet" and entry["id"].startswith("wat_")
    again = (await client.post("/v1/watchlist", json={"address": address}, headers=headers)).json()["data"]
    assert again["id"] == entry["id"]
    listed = (await client.get("/v1/watchlist", headers=headers)).json()["data"]
    assert [e["id"] for e in listed] == [entry["id"]]
    assert (await client.get("/v1/watchlist", headers=tenant.auth("secret_test"))).json()["data"] == []
    assert_error(await client.get("/v1/watchlist", headers=tenant.auth("publishable_live")), 403, "AUTH_003")
    assert_error(await client.post("/v1/watchlist", json={"address": "nope"}, headers=headers), 400, "SCAN_001")
    other = await make_tenant(client)
    assert_error(await client.delete(f"/v1/watchlist/{entry['id']}", headers=other.auth("secret_live")), 404, "REQ_005")
    assert (await client.delete(f"/v1/watchlist/{entry['id']}", headers=headers)).status_code == 204
    assert (await client.get("/v1/watchlist", headers=headers)).json()["data"] == []


async def test_a_result_scored_by_older_rules_is_not_served_from_the_cache(scanner, scan_app, anvil):
    client, tenant = scanner
    account = anvil.new_account(10**18)
    first = (await client.post(SCAN, json={"address": account.address}, headers=tenant.auth("secret_live"))).json()
    store = SqlScanStore(scan_app.ctx.database)
    stored = await store.latest_result(tenant.account_id, Environment.LIVE, "ethereum", account.address)
    assert stored is not None
    await store.save_results([dataclasses.replace(stored, scoring_version="2000.1.1")])
    again = (await client.post(SCAN, json={"address": account.address}, headers=tenant.auth("secret_live"))).json()
    assert again["data"]["cached"] is False and again["data"]["scoringVersion"] == first["data"]["scoringVersion"]


async def test_test_network_coins_have_no_usd_value_and_live_prices_show_their_age(scanner, anvil):
    client, tenant = scanner
    account = anvil.new_account(10_000 * 10**18)  # anvil's usual dev balance
    test = (await client.post(SCAN, json={"address": account.address}, headers=tenant.auth("secret_test"))).json()
    assert test["data"]["balanceAtRisk"] == "10000 ETH"
    assert test["data"]["balanceAtRiskUsd"] is None and test["data"]["priceAsOf"] is None
    live = (await client.post(SCAN, json={"address": account.address}, headers=tenant.auth("secret_live"))).json()
    assert live["data"]["balanceAtRiskUsd"] is not None and live["data"]["priceAsOf"] is not None
