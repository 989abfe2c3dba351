"""The Tron client against loopback full-node and TronGrid servers replaying conformance data."""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

import pytest
from coincurve import PublicKey

from chains.clients.breaker import BreakerState
from chains.clients.tron import TronClient
from chains.codecs.tron import TronAddress
from chains.endpoints import EndpointConfig, RetrySettings
from chains.errors import ChainUnavailable, MalformedChainData
from chains.observation import AccountType, Exposure
from chains.registry import Chain, Network
from tests.chain_clients.loopback import Fault, Loopback

GETACCOUNT = "/wallet/getaccount"
USDT = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"


def transactions_path(address: str) -> str:
    return f"/v1/accounts/{address}/transactions"


@pytest.fixture
def vectors(rpc_vector) -> dict[str, Any]:
    return {
        "getaccount": rpc_vector("rpc/tron_wallet_getaccount.json"),
        "recovery": rpc_vector("addresses/tron.json")["signature_recovery"],
    }


def signed_tx(recovery: dict[str, Any]) -> dict[str, Any]:
    """A TronGrid transaction object carrying the Shasta vector's real raw data and signature."""
    return {
        "txID": recovery["txid"],
        "raw_data_hex": recovery["raw_data_hex"],
        "signature": [recovery["signature_hex"]],
        "ret": [{"contractRet": "SUCCESS"}],
        "blockNumber": 1,
        "block_timestamp": 1_560_000_000_000,
    }


def serve_accounts(loopback: Loopback, accounts: dict[str, Any]) -> None:
    loopback.handle("POST", GETACCOUNT, lambda body, q: (200, accounts[body["address"]]))


def serve_sent(loopback: Loopback, address: str, txs: list[dict[str, Any]]) -> None:
    loopback.route(
        "GET", transactions_path(address), {"data": txs, "success": True, "meta": {"at": 1, "page_size": len(txs)}}
    )


def client(full_node: Loopback, trongrid: Loopback | None, http, clock, api_key: str | None = None) -> TronClient:
    retry = RetrySettings(attempts=2, base_delay=0.1)
    headers = MappingProxyType({"TRON-PRO-API-KEY": api_key} if api_key else {})
    return TronClient(
        EndpointConfig(full_node.url, retry=retry),
        EndpointConfig((trongrid or full_node).url, retry=retry, headers=headers),
        http,
        timing=clock.timing(),
    )


async def test_sender_key_is_recovered_from_its_transaction(loopback: Loopback, http, clock, vectors) -> None:
    recovery = vectors["recovery"]
    signer = recovery["signer_address"]
    serve_accounts(
        loopback,
        {
            signer: {
                "address": recovery["signer_address_hex"],
                "balance": 5_000_000,
                "create_time": 1_559_000_000_000,
                "latest_opration_time": 1_560_000_000_000,
            }
        },
    )
    serve_sent(loopback, signer, [signed_tx(recovery)])
    (seen,) = await client(loopback, None, http, clock, api_key="grid-key").observe([TronAddress.decode(signer)])
    expected = PublicKey(b"\x04" + bytes.fromhex(recovery["recovered_public_key_uncompressed_xy"])).format(
        compressed=True
    )
    assert seen.exposure is Exposure.EXPOSED_AT_REST and seen.public_key == expected
    assert (seen.balance, seen.outbound_tx_count, seen.account_type) == (5_000_000, 1, AccountType.EOA)
    assert (seen.symbol, seen.decimals, seen.source) == ("TRX", 6, "tron-api")
    assert seen.first_activity.timestamp() == 1_559_000_000 and seen.last_activity.timestamp() == 1_560_000_000
    grid_request = next(r for r in loopback.requests if r.path == transactions_path(signer))
    assert grid_request.query["only_from"] == "true" and grid_request.query["limit"] == "1"
    assert grid_request.headers["TRON-PRO-API-KEY"] == "grid-key"
    assert next(r for r in loopback.requests if r.path == GETACCOUNT).body == {"address": signer, "visible": True}


async def test_activated_account_that_never_sent_is_exposed_on_spend(loopback: Loopback, http, clock, vectors) -> None:
    example = vectors["getaccount"]["response"]
    address = str(TronAddress(bytes.fromhex(example["address"])[1:], Chain.TRON, Network.MAINNET))
    serve_accounts(loopback, {address: example})
    serve_sent(loopback, address, [])
    (seen,) = await client(loopback, None, http, clock).observe([TronAddress.decode(address)])
    assert seen.exposure is Exposure.EXPOSED_ON_SPEND and seen.public_key is None
    assert seen.balance == 1_793_227_200 and seen.has_activity and seen.outbound_tx_count == 0


async def test_unactivated_account_and_contract_need_no_trongrid(loopback: Loopback, http, clock, vectors) -> None:
    fresh = "TBDCyrZ1hT1PDDFf2yRABwPrFica5qqPUX"
    serve_accounts(
        loopback,
        {
            fresh: vectors["getaccount"]["response_account_missing"],
            USDT: {"address": "41a614f803b6fd780986a42c78ec9c7f77e6ded13c", "type": "Contract"},
        },
    )
    unused, contract = await client(loopback, None, http, clock).observe(
        [TronAddress.decode(fresh), TronAddress.decode(USDT)]
    )
    assert not unused.has_activity and unused.exposure is Exposure.EXPOSED_ON_SPEND
    assert (contract.account_type, contract.exposure) == (AccountType.CONTRACT, Exposure.NOT_EXPOSED)
    assert loopback.count(GETACCOUNT) == 2 and loopback.count() == 2


async def test_transaction_signed_by_another_key_still_exposes(loopback: Loopback, http, clock, vectors) -> None:
    address = "TLCuBEirVzB6V4menLZKw1jfBTFMZbuKq7"  # run by a permission key: the vector's signer
    serve_accounts(loopback, {address: {"balance": 1}})
    serve_sent(loopback, address, [signed_tx(vectors["recovery"])])
    (seen,) = await client(loopback, None, http, clock).observe([TronAddress.decode(address)])
    assert seen.exposure is Exposure.EXPOSED_AT_REST and seen.public_key is None


async def test_txid_that_is_not_the_hash_of_raw_data_is_malformed(loopback: Loopback, http, clock, vectors) -> None:
    signer = vectors["recovery"]["signer_address"]
    serve_accounts(loopback, {signer: {"balance": 1}})
    serve_sent(loopback, signer, [{**signed_tx(vectors["recovery"]), "txID": "00" * 32}])
    with pytest.raises(MalformedChainData, match="is not sha256"):
        await client(loopback, None, http, clock).observe([TronAddress.decode(signer)])


async def test_node_error_body_is_unavailable(loopback: Loopback, http, clock, vectors) -> None:
    loopback.route("POST", GETACCOUNT, vectors["getaccount"]["error_bad_checksum_visible_true"])
    with pytest.raises(ChainUnavailable, match="NullPointerException"):
        await client(loopback, None, http, clock).observe([TronAddress.decode(USDT)])


async def test_trongrid_outage_is_reported_as_trongrid_and_spares_the_full_node(http, clock, vectors) -> None:
    full_node, trongrid = await Loopback().start(), await Loopback().start()
    try:
        signer = vectors["recovery"]["signer_address"]
        serve_accounts(full_node, {signer: {"balance": 1}})
        trongrid.fail(Fault(status=503, times=10))
        tron = client(full_node, trongrid, http, clock)
        with pytest.raises(ChainUnavailable, match=re.escape("TronGrid http://127.0.0.1")):
            await tron.observe([TronAddress.decode(signer)])
        assert tron.api.resilience.breaker.state is BreakerState.CLOSED and trongrid.count() == 2
    finally:
        await full_node.stop()
        await trongrid.stop()
