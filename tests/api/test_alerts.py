"""Alerts from chain heads on two anvil nodes (ethereum, chain id 1; base, chain id 8453)
and a loopback Esplora serving a built Bitcoin chain, on both engines: a watched account
that signs a transaction on base is reported exposed where it is watched (ethereum: one key
for every EVM chain) by a signed ``key.exposed`` webhook, and a change of its balance by
``balance.changed``; a tenant not watching it hears nothing. A watched Bitcoin address whose
key a spend shows is alerted at the next tip, with the spend's txid and height."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from eth_account import Account

from chains.codecs.bitcoin import BitcoinAddress
from qday_client import verify_webhook
from services.settings import load_settings
from tests.anvil import Anvil
from tests.bitcoin_chain import p2wpkh, public_key
from tests.chain_clients.loopback import Loopback
from tests.esplora_chain import EsploraChain
from tests.support import ManualClock, Tenant, client_for, engine_env, make_tenant, running_app
from tests.webhook_receiver import Received, WebhookReceiver

TRANSFER = {"value": 10**15, "gas": 21000, "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 10**9}


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


@pytest.fixture(scope="module")
async def esplora() -> AsyncIterator[Loopback]:
    loopback = await Loopback().start()
    yield loopback
    await loopback.stop()


@pytest.fixture(scope="module")
async def app(
    nodes: tuple[Anvil, Anvil], esplora: Loopback, tmp_path_factory: pytest.TempPathFactory, module_database_url: str
) -> Any:
    ethereum, base = nodes
    env = {
        "QDAY_ETHEREUM_RPC_URL": ethereum.url,
        "QDAY_BASE_RPC_URL": base.url,
        "QDAY_BITCOIN_ESPLORA_URL": esplora.url,
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


async def _watch(client: Any, tenant: Tenant, address: str, chain: str = "ethereum") -> None:
    r = await client.post(
        "/v1/watchlist", json={"address": address, "chain": chain}, headers=tenant.auth("secret_live")
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


async def _signing_key(client: Any, tenant: Tenant) -> str:
    """The service's ML-DSA-65 public key (hex), fetched once as a receiver would."""
    r = await client.get("/v1/webhooks/signing-key", headers=tenant.auth("secret_live"))
    public_key: str = r.json()["data"]["publicKey"]
    return public_key


def _event(got: Received, secret: str, public_key: str, app: Any) -> dict[str, Any]:
    """The delivered event, as a receiver reads it: both signatures checked by the client."""
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
        public_key = await _signing_key(client, tenant)
        await _watch(client, tenant, holder.address)
        ethereum.rpc("evm_mine")
        base.rpc("evm_mine")  # new heads: the follower takes its baseline
        await _first_sight(app, holder.address, 1)
        before = len(receiver.received)
        receipt = base.send(holder, {"to": Account.create().address, **TRANSFER})  # signed on base only
        (got,) = (await receiver.arrived(before + 1))[before:]
        event = _event(got, secret, public_key, app)
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
        event = _event(got, secret, public_key, app)
        assert event["type"] == "balance.changed"
        assert event["data"]["before"]["balance"] == "3 ETH"
        assert event["data"]["after"] == {"publicKeyExposed": True, "balance": "5 ETH"}
        await asyncio.sleep(0.5)  # a few more passes: nothing else is raised, for either tenant
        assert len(receiver.received) == before + 2
        deliveries = (await client.get("/v1/webhooks", headers=bystander.auth("secret_live"))).json()["data"]
        path = f"/v1/webhooks/{deliveries[0]['id']}/deliveries"
        assert (await client.get(path, headers=bystander.auth("secret_live"))).json()["data"] == []
        stored = "SELECT count(*) FROM scan_results WHERE address = ?"
        assert await app.ctx.database.fetch_one(stored, (holder.address,)) == (
            0,
        )  # nobody hears risk.changed: no rescan


async def test_a_bitcoin_key_shown_by_a_spend_is_alerted_at_the_next_tip(
    app: Any, esplora: Loopback, receiver: WebhookReceiver
) -> None:
    chain = EsploraChain(esplora, tip=900_000)
    key = public_key(7)
    script = p2wpkh(key)
    address = str(BitcoinAddress.from_script_pubkey(script))
    coin = chain.pay(script, 150_000, 899_990, outputs=2)[0]  # one of two coins is spent: value stays at risk
    async with client_for(app) as client:
        tenant, secret = await _hooked(client, receiver, ["key.exposed", "balance.changed", "risk.changed"])
        public_key_hex = await _signing_key(client, tenant)
        await _watch(client, tenant, address, "bitcoin")
        scanned = await client.post(
            "/v1/scan/wallet", json={"address": address, "chain": "bitcoin"}, headers=tenant.auth("secret_live")
        )
        assert scanned.status_code == 200, scanned.text
        level = scanned.json()["data"]["riskScore"]
        chain.tip = 900_001  # a new tip: the follower takes its baseline
        await _first_sight(app, address, 1)
        before = len(receiver.received)
        txid = chain.spend(coin, key, p2wpkh(public_key(8)), 900_002)  # its witness shows the key
        chain.tip = 900_002
        got = (await receiver.arrived(before + 3))[before:]
        events = {e["type"]: e for e in (_event(g, secret, public_key_hex, app) for g in got)}  # in any order
        assert sorted(events) == ["balance.changed", "key.exposed", "risk.changed"]
        data = events["key.exposed"]["data"]
        assert events["balance.changed"]["data"] == data
        rescored = events["risk.changed"]["data"]  # the follower's rescan, against the scan above
        assert rescored["before"]["riskScore"] == level != rescored["after"]["riskScore"]
        assert rescored["after"]["publicKeyExposed"] is True
        assert (data["address"], data["chain"]) == (address, "bitcoin")
        assert data["before"] == {"publicKeyExposed": False, "balance": "0.003 BTC"}
        assert data["after"] == {"publicKeyExposed": True, "balance": "0.0015 BTC"}
        spends = [e for e in data["exposureEvidence"] if e["kind"] == "spend"]
        assert [(e["txid"], e["blockHeight"]) for e in spends] == [(txid, 900_002)]
        await asyncio.sleep(0.5)  # more passes at the same tip: nothing else is raised
        assert len(receiver.received) == before + 3
