"""Alerts from chain heads on two anvil nodes (ethereum, chain id 1; base, chain id 8453),
on both engines: a watched account that signs a transaction on base is reported exposed
where it is watched (ethereum: one key for every EVM chain) by a signed ``key.exposed``
webhook, and a change of its balance by ``balance.changed``; a tenant not watching it
hears nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from eth_account import Account

from qday_client import verify_webhook
from services.settings import load_settings
from tests.anvil import Anvil
from tests.support import ManualClock, Tenant, client_for, engine_env, make_tenant, running_app
from tests.webhook_receiver import Received, WebhookReceiver

TRANSFER = {"value": 10**15, "gas": 21000, "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 10**9}


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


@pytest.fixture(scope="module")
async def app(nodes: tuple[Anvil, Anvil], tmp_path_factory: pytest.TempPathFactory, module_database_url: str) -> Any:
    ethereum, base = nodes
    env = {
        "QDAY_ETHEREUM_RPC_URL": ethereum.url,
        "QDAY_BASE_RPC_URL": base.url,
        "QDAY_FAMILY_CHAINS": "ethereum,base",
        "QDAY_WEBHOOK_ALLOW_PRIVATE": "true",
        "QDAY_ALERT_POLL_SECONDS": "0.1",
        **engine_env(module_database_url),
    }
    async with running_app(load_settings(env, data_dir=tmp_path_factory.mktemp("alerts")), ManualClock()) as app:
        yield app


async def _hooked(client: Any, receiver: WebhookReceiver, events: list[str]) -> tuple[Tenant, str]:
    tenant = await make_tenant(client)
    r = await client.post(
        "/v1/webhooks", json={"url": receiver.url, "events": events}, headers=tenant.auth("secret_live")
    )
    assert r.status_code == 201, r.text
    return tenant, r.json()["data"]["secret"]


async def _watch(client: Any, tenant: Tenant, address: str) -> None:
    r = await client.post(
        "/v1/watchlist", json={"address": address, "chain": "ethereum"}, headers=tenant.auth("secret_live")
    )
    assert r.status_code == 201, r.text


async def _first_sight(app: Any, address: str, watchers: int) -> None:
    """Until the follower has recorded its baseline of ``address`` for every watcher."""
    for _ in range(300):
        row = await app.ctx.database.fetch_one("SELECT count(*) FROM alert_state WHERE address = ?", (address,))
        if row is not None and row[0] >= watchers:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the follower never looked at {address}")


async def _event(client: Any, tenant: Tenant, got: Received, secret: str, app: Any) -> dict[str, Any]:
    """The delivered event, as a receiver reads it: both signatures checked by the client."""
    r = await client.get("/v1/webhooks/signing-key", headers=tenant.auth("secret_live"))
    public_key = r.json()["data"]["publicKey"]
    event = verify_webhook(got.body, got.headers, secret, public_key, now=app.ctx.clock.now().timestamp())
    return {"id": event.id, "type": event.type, "data": event.data}


async def test_a_key_revealed_on_a_sibling_chain_is_alerted(
    app: Any, nodes: tuple[Anvil, Anvil], receiver: WebhookReceiver
) -> None:
    ethereum, base = nodes
    holder = Account.create()
    ethereum.fund(holder.address, 3 * 10**18)
    base.fund(holder.address, 10**18)
    async with client_for(app) as client:
        tenant, secret = await _hooked(client, receiver, ["key.exposed", "balance.changed"])
        bystander, _ = await _hooked(client, receiver, ["key.exposed", "balance.changed"])
        await _watch(client, tenant, holder.address)
        ethereum.rpc("evm_mine")
        base.rpc("evm_mine")  # new heads: the follower takes its baseline
        await _first_sight(app, holder.address, 1)
        before = len(receiver.received)
        receipt = base.send(holder, {"to": Account.create().address, **TRANSFER})  # signed on base only
        (got,) = (await receiver.arrived(before + 1))[before:]
        event = await _event(client, tenant, got, secret, app)
        assert event["type"] == "key.exposed"
        data = event["data"]
        assert (data["address"], data["chain"]) == (holder.address, "ethereum")
        assert data["before"] == {"publicKeyExposed": False, "balance": "3 ETH"}
        assert data["after"] == {"publicKeyExposed": True, "balance": "3 ETH"}
        (evidence,) = data["exposureEvidence"]
        assert evidence["chain"] == "base" and evidence["kind"] == "nonce"
        assert evidence["blockHeight"] >= int(receipt["blockNumber"], 16)
        ethereum.fund(holder.address, 5 * 10**18)
        ethereum.rpc("evm_mine")
        (got,) = (await receiver.arrived(before + 2))[before + 1 :]
        event = await _event(client, tenant, got, secret, app)
        assert event["type"] == "balance.changed"
        assert event["data"]["before"]["balance"] == "3 ETH"
        assert event["data"]["after"] == {"publicKeyExposed": True, "balance": "5 ETH"}
        await asyncio.sleep(0.5)  # a few more passes: nothing else is raised, for either tenant
        assert len(receiver.received) == before + 2
        deliveries = (await client.get("/v1/webhooks", headers=bystander.auth("secret_live"))).json()["data"]
        path = f"/v1/webhooks/{deliveries[0]['id']}/deliveries"
        assert (await client.get(path, headers=bystander.auth("secret_live"))).json()["data"] == []
