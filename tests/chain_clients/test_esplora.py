"""The Esplora client against a loopback server replaying real Bitcoin data.

Answers come from the conformance folder: the constructed Esplora bodies of rpc/ (a P2TR
address, a P2PK script by script hash) and Esplora transaction objects built here from the
raw mainnet transactions of bitcoin/transactions.json. Chain stats are constructed to
cover exactly the transactions served, as in the conformance files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest

from chains.bitcoin.script import p2pkh_script, push_items
from chains.bitcoin.tx import parse_transaction
from chains.clients.esplora import EsploraClient
from chains.codecs.bitcoin import BitcoinAddress
from chains.endpoints import EndpointConfig, RetrySettings
from chains.errors import InvalidAddress, MalformedChainData
from chains.observation import AccountType, Exposure, Observation
from chains.registry import Network
from pqc.hashes import hash160
from tests.chain_clients.loopback import Fault, Loopback
from tests.chain_clients.support import FakeClock

P2TR = "bc1pxwww0ct9ue7e8tdnlmug5m2tamfn7q06sahstg39ys4c9f3340qqxrdu9k"
P2WPKH_SPENT = "bc1qrw8us6s8x05ks479fyevq03qr243m703jmvdex"
TIP = 709_640
PLACEHOLDER_VALUE = 100_000  # prevout values the sources do not give


def stats(funded: int, funded_sum: int, spent: int, spent_sum: int, tx_count: int) -> dict[str, Any]:
    zero = dict.fromkeys(("funded_txo_count", "funded_txo_sum", "spent_txo_count", "spent_txo_sum", "tx_count"), 0)
    chain = {
        "funded_txo_count": funded,
        "funded_txo_sum": funded_sum,
        "spent_txo_count": spent,
        "spent_txo_sum": spent_sum,
        "tx_count": tx_count,
    }
    return {"chain_stats": chain, "mempool_stats": zero}


def esplora_tx(
    entry: Mapping[str, Any], prevouts: Callable[[Any], tuple[bytes, int] | None], height: int, time: int
) -> dict[str, Any]:
    """An Esplora transaction object (electrs layout) from a raw transaction of transactions.json."""
    tx = parse_transaction(bytes.fromhex(entry["hex"]))
    vin = []
    for txin in tx.inputs:
        prevout = prevouts(txin)
        item: dict[str, Any] = {
            "txid": txin.prev_txid,
            "vout": txin.vout,
            "prevout": None if prevout is None else {"scriptpubkey": prevout[0].hex(), "value": prevout[1]},
            "scriptsig": txin.script_sig.hex(),
            "is_coinbase": txin.is_coinbase,
            "sequence": txin.sequence,
        }
        if txin.witness:
            item["witness"] = [w.hex() for w in txin.witness]
        vin.append(item)
    return {
        "txid": tx.txid,
        "version": tx.version,
        "locktime": tx.locktime,
        "vin": vin,
        "vout": [{"scriptpubkey": o.script_pubkey.hex(), "value": o.value} for o in tx.outputs],
        "status": {"confirmed": True, "block_height": height, "block_time": time},
    }


@pytest.fixture
def transactions(rpc_vector) -> dict[str, Mapping[str, Any]]:
    return {entry["name"]: entry for entry in rpc_vector("bitcoin/transactions.json")}


def client(loopback: Loopback, http: httpx.AsyncClient, clock: FakeClock, **options: Any) -> EsploraClient:
    endpoint = EndpointConfig(loopback.url, retry=RetrySettings(attempts=2, base_delay=0.1))
    loopback.route("GET", "/blocks/tip/height", TIP)
    return EsploraClient(endpoint, http, timing=clock.timing(), **options)


async def observe(loopback: Loopback, http, clock, address: str, **options: Any) -> Observation:
    (seen,) = await client(loopback, http, clock, **options).observe([BitcoinAddress.decode(address)])
    return seen


def serve_p2tr(loopback: Loopback, rpc_vector) -> list[dict[str, Any]]:
    txs = rpc_vector("rpc/esplora_address_txs.json")["response"]
    loopback.route("GET", f"/address/{P2TR}", rpc_vector("rpc/esplora_address.json")["response"])
    loopback.route("GET", f"/address/{P2TR}/txs", txs)
    return txs


async def test_p2tr_is_exposed_at_rest_with_its_output_key(loopback: Loopback, http, clock, rpc_vector) -> None:
    serve_p2tr(loopback, rpc_vector)
    seen = await observe(loopback, http, clock, P2TR)
    assert (seen.address_type, seen.account_type, seen.exposure) == (
        "p2tr",
        AccountType.UTXO_SCRIPT,
        Exposure.EXPOSED_AT_REST,
    )
    assert seen.public_key == bytes.fromhex("339ce7e165e67d93adb3fef88a6d4beed33f01fa876f05a225242b82a631abc0")
    assert (seen.balance, seen.tx_count, seen.outbound_tx_count, seen.address_reuse_count) == (0, 2, 1, 0)
    assert seen.first_activity.timestamp() == 1636865000 and seen.last_activity.timestamp() == 1636866927
    assert (seen.height, seen.source, seen.symbol, seen.decimals) == (TIP, "esplora", "BTC", 8)


async def test_history_is_paged_with_txs_chain_last_txid(loopback: Loopback, http, clock, rpc_vector) -> None:
    newest, oldest = serve_p2tr(loopback, rpc_vector)
    loopback.route("GET", f"/address/{P2TR}/txs", [newest])
    loopback.route("GET", f"/address/{P2TR}/txs/chain/{newest['txid']}", [oldest])
    seen = await observe(loopback, http, clock, P2TR, page_size=1)
    assert seen.first_activity is not None and seen.outbound_tx_count == 1
    assert loopback.count(f"/address/{P2TR}/txs/chain/{newest['txid']}") == 1


async def test_p2wpkh_spend_reveals_the_witness_key(loopback: Loopback, http, clock, rpc_vector) -> None:
    spend = rpc_vector("rpc/esplora_address_txs.json")["response"][1]  # 5849051c: spends the P2WPKH output
    loopback.route("GET", f"/address/{P2WPKH_SPENT}", stats(1, 100_000, 1, 100_000, 1))
    loopback.route("GET", f"/address/{P2WPKH_SPENT}/txs", [spend])
    seen = await observe(loopback, http, clock, P2WPKH_SPENT)
    assert seen.exposure is Exposure.EXPOSED_AT_REST and seen.address_type == "p2wpkh"
    key = bytes.fromhex("02b14f0e661960252f8f37486e7fe27431c9f94627a617da66ca9678e6a2218ce1")
    assert seen.public_key == key and hash160(key) == BitcoinAddress.decode(P2WPKH_SPENT).payload


async def test_p2pkh_spent_four_times_in_one_transaction(loopback: Loopback, http, clock, transactions) -> None:
    entry = transactions["taproot_csa_funding0"]

    def p2pkh_prevout(txin: Any) -> tuple[bytes, int]:
        return p2pkh_script(hash160(push_items(txin.script_sig)[1])), PLACEHOLDER_VALUE

    tx = esplora_tx(entry, p2pkh_prevout, 709_700, 1_636_900_000)
    script = bytes.fromhex(tx["vin"][0]["prevout"]["scriptpubkey"])
    address = str(BitcoinAddress.from_script_pubkey(script))
    loopback.route("GET", f"/address/{address}", stats(4, 4 * PLACEHOLDER_VALUE, 4, 4 * PLACEHOLDER_VALUE, 1))
    loopback.route("GET", f"/address/{address}/txs", [tx])
    seen = await observe(loopback, http, clock, address)
    assert seen.exposure is Exposure.EXPOSED_AT_REST and seen.address_type == "p2pkh"
    assert seen.public_key.hex().startswith("02682e5e") and seen.outbound_tx_count == 1
    assert seen.address_reuse_count == 3 and seen.balance == 0


@pytest.fixture
def received_only(loopback: Loopback, transactions) -> tuple[str, dict[str, Any]]:
    """The P2WPKH output of taproot_ts1_spend: paid once, never spent (its history is that one tx)."""
    funding = parse_transaction(bytes.fromhex(transactions["taproot_ts1_funding"]["hex"]))
    spend = transactions["taproot_ts1_spend"]

    def taproot_prevout(txin: Any) -> tuple[bytes, int]:
        out = funding.outputs[txin.vout]
        return out.script_pubkey, out.value

    tx = esplora_tx(spend, taproot_prevout, 709_800, 1_637_000_000)
    address = str(BitcoinAddress.from_script_pubkey(bytes.fromhex(tx["vout"][0]["scriptpubkey"])))
    loopback.route("GET", f"/address/{address}/txs", [tx])
    return address, tx


async def test_complete_history_without_spends_keeps_the_type_level(
    loopback: Loopback, http, clock, received_only
) -> None:
    address, _ = received_only
    loopback.route("GET", f"/address/{address}", stats(1, 965_300, 0, 0, 1))
    seen = await observe(loopback, http, clock, address)
    assert seen.exposure is Exposure.EXPOSED_ON_SPEND and not seen.public_key_exposed
    assert (seen.balance, seen.outbound_tx_count, seen.public_key) == (965_300, 0, None)


async def test_history_ending_before_tx_count_is_undetermined(loopback: Loopback, http, clock, received_only) -> None:
    address, _ = received_only
    loopback.route("GET", f"/address/{address}", stats(3, 3_000_000, 0, 0, 3))  # claims 3 txs; 1 served
    seen = await observe(loopback, http, clock, address)
    assert seen.exposure is Exposure.UNDETERMINED and seen.public_key_exposed  # fail closed


@pytest.mark.parametrize(("spent", "expected"), [(0, Exposure.EXPOSED_ON_SPEND), (1, Exposure.EXPOSED_AT_REST)])
async def test_history_cut_by_a_failing_page_falls_back_to_the_spent_count(
    loopback: Loopback, http, clock, received_only, spent: int, expected: Exposure
) -> None:
    address, tx = received_only
    loopback.route("GET", f"/address/{address}", stats(2, 2_000_000, spent, spent * 1_000_000, 2))
    loopback.fail(Fault(status=503, times=5, path=f"/address/{address}/txs/chain/{tx['txid']}"))
    seen = await observe(loopback, http, clock, address, page_size=1)
    assert seen.exposure is expected and seen.first_activity is None
    assert loopback.count(f"/address/{address}/txs/chain/{tx['txid']}") == 2  # both attempts failed


async def test_page_cap_with_a_spend_count_floors_at_rest(loopback: Loopback, http, clock, received_only) -> None:
    address, _ = received_only
    loopback.route("GET", f"/address/{address}", stats(2, 2_000_000, 1, 1_000_000, 2))
    seen = await observe(loopback, http, clock, address, page_size=1, max_pages=1)
    assert seen.exposure is Exposure.EXPOSED_AT_REST and seen.outbound_tx_count == 1  # a lower bound


async def test_unused_address_has_no_activity_and_needs_no_history(loopback: Loopback, http, clock) -> None:
    address = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
    loopback.route("GET", f"/address/{address}", stats(0, 0, 0, 0, 0))
    seen = await observe(loopback, http, clock, address)
    assert not seen.has_activity and seen.exposure is Exposure.EXPOSED_ON_SPEND
    assert loopback.count(f"/address/{address}/txs") == 0


async def test_p2pk_script_is_found_by_script_hash(loopback: Loopback, http, clock, rpc_vector) -> None:
    vector = rpc_vector("rpc/esplora_scripthash_p2pk.json")
    for request, answer in vector["requests"].items():
        loopback.route("GET", request.removeprefix("GET "), answer)
    script = bytes.fromhex(vector["script_pubkey"])
    (seen,) = await client(loopback, http, clock).observe_scripts([script])
    assert seen.address == script.hex() and seen.address_type == "p2pk"
    assert seen.exposure is Exposure.EXPOSED_AT_REST and seen.public_key == script[1:66]
    assert (seen.balance, seen.tx_count, seen.outbound_tx_count) == (4_000_000_000, 2, 1)
    assert seen.first_activity.timestamp() == 1231473279  # block 9


async def test_addresses_of_the_other_network_are_refused(loopback: Loopback, http, clock) -> None:
    testnet = BitcoinAddress.decode("tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", network=Network.TESTNET)
    with pytest.raises(InvalidAddress, match="testnet address; this Esplora endpoint serves mainnet"):
        await client(loopback, http, clock).observe([testnet])


async def test_stats_without_chain_stats_are_malformed(loopback: Loopback, http, clock) -> None:
    loopback.route("GET", f"/address/{P2TR}", {"address": P2TR})
    with pytest.raises(MalformedChainData, match="no chain_stats"):
        await observe(loopback, http, clock, P2TR)
