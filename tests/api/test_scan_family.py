"""POST /v1/scan/wallet checks the key's family: two anvil nodes, one as ethereum (chain id
1) and one as base (chain id 8453), and polygon on a closed port (down).

An account that signed a real transaction on base has its key public on ethereum too.
Family chains: ethereum, base and polygon; the others are reported as not configured.
"""

from __future__ import annotations

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from services.settings import load_settings
from storage.models import Plan
from tests.anvil import Anvil, free_port
from tests.api.test_envelope import assert_error
from tests.support import ManualClock, client_for, engine_env, make_tenant, running_app

SCAN = "/v1/scan/wallet"
TRANSFER = {"value": 10**15, "gas": 21000, "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 10**9}


@pytest.fixture(scope="module")
async def family_app(nodes, tmp_path_factory, module_database_url):
    ethereum, base = nodes
    env = {
        "QDAY_ETHEREUM_RPC_URL": ethereum.url,
        "QDAY_BASE_RPC_URL": base.url,
        "QDAY_POLYGON_RPC_URL": f"http://127.0.0.1:{free_port()}",  # nothing listens: down
        "QDAY_FAMILY_CHAINS": "ethereum,base,polygon",
        "QDAY_FAMILY_WAIT_SECONDS": "2",
        **engine_env(module_database_url),  # on both engines
    }
    settings = load_settings(env, data_dir=tmp_path_factory.mktemp("family-data"))
    async with running_app(settings, ManualClock()) as app:
        yield app


@pytest.fixture
async def scanner(family_app):
    async with client_for(family_app) as client:
        tenant = await make_tenant(client, ("secret_live",))
        await family_app.ctx.store.set_plan(tenant.email, Plan.PRO)
        yield client, tenant


def signed_on(node: Anvil, account: LocalAccount) -> None:
    """``account`` sends one real transaction on ``node``."""
    node.fund(account.address, 10**18)
    node.send(account, {"to": Account.create().address, **TRANSFER})


async def scan(client, tenant, address: str, **body) -> dict:
    r = await client.post(SCAN, json={"address": address, "refresh": True, **body}, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def test_a_key_that_signed_on_base_is_exposed_on_ethereum(scanner, nodes):
    client, tenant = scanner
    ethereum, base = nodes
    account = ethereum.new_account(5 * 10**18)  # nonce 0 on ethereum
    before = await scan(client, tenant, account.address)
    assert before["publicKeyExposed"] is False and before["exposureEvidence"] == []
    signed_on(base, account)
    after = await scan(client, tenant, account.address)
    assert after["chain"] == "ethereum" and after["publicKeyExposed"] is True
    assert after["exposureEvidence"] == [
        {"chain": "base", "address": account.address, "kind": "nonce", "txid": None, "blockHeight": None}
    ]
    assert after["riskValue"] > before["riskValue"]
    factor = next(f for f in after["riskFactors"] if f["factor"] == "public_key_exposure")
    assert factor["score"] == 100


async def test_coverage_lists_what_was_seen_and_what_was_not(scanner, nodes):
    client, tenant = scanner
    ethereum, _ = nodes
    account = ethereum.new_account(10**18)
    data = await scan(client, tenant, account.address)
    assert data["coverage"]["checked"] == ["ethereum", "base"]
    unavailable = data["coverage"]["unavailable"]
    assert "polygon" in unavailable  # down
    assert {"arbitrum", "tron"} <= set(unavailable)  # not configured for family lookups
    assert "ethereum" not in unavailable and "base" not in unavailable
    assert data["exposureComplete"] is False  # "not exposed" could not see every chain


async def test_an_empty_address_whose_key_signed_elsewhere_is_answered_not_404(scanner, nodes):
    client, tenant = scanner
    _, base = nodes
    account = Account.create()
    signed_on(base, account)  # nothing on ethereum: no balance, nonce 0
    data = await scan(client, tenant, account.address, chain="ethereum")
    assert data["publicKeyExposed"] is True and data["balanceAtRisk"] == "0 ETH"
    assert [e["chain"] for e in data["exposureEvidence"]] == ["base"]


async def test_the_family_of_a_base_address_includes_ethereum(scanner, nodes):
    client, tenant = scanner
    ethereum, base = nodes
    account = base.new_account(10**18)
    signed_on(ethereum, account)
    data = await scan(client, tenant, account.address, chain="base")
    assert data["chain"] == "base" and data["publicKeyExposed"] is True
    assert data["exposureEvidence"][0]["chain"] == "ethereum"


async def test_no_trace_anywhere_is_still_scan_003(scanner):
    client, tenant = scanner
    r = await client.post(
        SCAN, json={"address": Account.create().address, "refresh": True}, headers=tenant.auth("secret_live")
    )
    assert_error(r, 404, "SCAN_003")


async def test_the_scanned_chain_down_is_still_scan_004(scanner):
    client, tenant = scanner
    r = await client.post(
        SCAN,
        json={"address": Account.create().address, "chain": "polygon", "refresh": True},
        headers=tenant.auth("secret_live"),
    )
    assert_error(r, 503, "SCAN_004")
