"""What the wallet scans and migration plans read from Esplora besides observations: an
address's unspent outputs, fee estimates, and whole previous transactions, rebuilt from
Esplora's JSON and checked against their id (real mainnet transactions of the conformance
folder, segwit and legacy)."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from chains.bitcoin.utxo import Utxo
from chains.clients.esplora import EsploraClient
from chains.codecs.bitcoin import BitcoinAddress
from chains.endpoints import EndpointConfig, RetrySettings
from chains.errors import ChainUnavailable, MalformedChainData
from tests.chain_clients.loopback import Loopback
from tests.chain_clients.support import FakeClock
from tests.chain_clients.test_esplora import esplora_tx
from tests.esplora_chain import EsploraChain


def client(loopback: Loopback, http: httpx.AsyncClient, clock: FakeClock) -> EsploraClient:
    endpoint = EndpointConfig(loopback.url, retry=RetrySettings(attempts=1, base_delay=0.1))
    return EsploraClient(endpoint, http, timing=clock.timing())


async def test_coins_are_the_confirmed_unspent_outputs(loopback: Loopback, http, clock) -> None:
    chain = EsploraChain(loopback)
    address = BitcoinAddress.decode("bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu")
    (spent,) = chain.pay(address.script_pubkey, 5_000, 800_000)
    kept = chain.pay(address.script_pubkey, 7_000, 800_001, outputs=2)
    chain.spend(spent, bytes.fromhex("02" + "11" * 32), b"\x51", 800_002)
    coins = await client(loopback, http, clock).coins(address)
    assert coins == [Utxo(txid, vout, 7_000, 800_001) for txid, vout in kept]

    pending = {"txid": "ab" * 32, "vout": 0, "value": 1, "status": {"confirmed": False}}
    loopback.route("GET", f"/address/{address}/utxo", [pending])
    assert await client(loopback, http, clock).coins(address) == []
    for malformed in (
        [{"txid": "zz", "vout": 0, "value": 1, "status": {"confirmed": True, "block_height": 1}}],
        [{**pending, "status": {"confirmed": True}}],
        {"not": "a list"},
    ):
        loopback.route("GET", f"/address/{address}/utxo", malformed)
        with pytest.raises(MalformedChainData):
            await client(loopback, http, clock).coins(address)


async def test_a_previous_transaction_is_rebuilt_and_checked_against_its_id(
    loopback: Loopback, http, clock, rpc_vector
) -> None:
    for entry in rpc_vector("bitcoin/transactions.json"):
        tx = esplora_tx(entry, lambda _txin: None, 700_000, 1_600_000_000)
        loopback.route("GET", f"/tx/{entry['txid']}", tx)
        raw = await client(loopback, http, clock).transaction(entry["txid"])
        assert raw.hex() == entry["hex"], entry["name"]
    entry = next(e for e in rpc_vector("bitcoin/transactions.json") if e["name"] == "taproot_csa_funding0")
    tampered = copy.deepcopy(esplora_tx(entry, lambda _txin: None, 700_000, 1_600_000_000))
    tampered["vout"][0]["value"] += 1  # a server lying about an amount
    loopback.route("GET", f"/tx/{entry['txid']}", tampered)
    with pytest.raises(MalformedChainData, match="does not hash"):
        await client(loopback, http, clock).transaction(entry["txid"])
    loopback.route("GET", f"/tx/{entry['txid']}", {"vin": "nope"})
    with pytest.raises(MalformedChainData):
        await client(loopback, http, clock).transaction(entry["txid"])


async def test_fee_rate_takes_the_estimate_for_the_target_or_sooner(loopback: Loopback, http, clock) -> None:
    estimates: dict[str, Any] = {"1": 30.5, "3": 20, "5": 14.5, "144": 1.01}
    loopback.route("GET", "/fee-estimates", estimates)
    assert await client(loopback, http, clock).fee_rate(6) == 14.5
    assert await client(loopback, http, clock).fee_rate(1) == 30.5
    loopback.route("GET", "/fee-estimates", {"144": 1.0})
    with pytest.raises(ChainUnavailable):
        await client(loopback, http, clock).fee_rate(6)
    for malformed in ([1, 2], {"six": 3.0}, {"6": "fast"}, {"6": True}):
        loopback.route("GET", "/fee-estimates", malformed)
        with pytest.raises(MalformedChainData):
            await client(loopback, http, clock).fee_rate(6)
