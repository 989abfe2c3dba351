"""The Bitcoin Core ``scantxoutset`` client against a loopback JSON-RPC server.

The answers follow Bitcoin Core's ``scantxoutset`` result layout. Amounts are JSON
numbers in BTC, and the test sends ones a float cannot hold, to check the exact satoshis.
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

import pytest

from api.errors import code_of
from chains.clients.bitcoin_core import BitcoinCoreClient, InvalidParameter, InWarmup, descriptor, to_satoshis
from chains.clients.jsonrpc import MethodNotFound
from chains.codecs.bitcoin import BitcoinAddress
from chains.endpoints import EndpointConfig, RetrySettings, load_endpoints
from chains.environment import Environment
from chains.errors import MalformedChainData
from tests.chain_clients.loopback import Fault, Loopback

P2TR = BitcoinAddress.decode("bc1pxwww0ct9ue7e8tdnlmug5m2tamfn7q06sahstg39ys4c9f3340qqxrdu9k")
P2PK = bytes.fromhex(
    "410411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5cb2e0eaddfb84ccf9744464f82e160bfa9b8b64f9d4c0"
    "3f999b8643f656b412a3ac"
)
EMPTY = BitcoinAddress.decode("bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq")
BEST = "00000000000000000001" + "ab" * 22


def scan_answer(request_id: Any, unspents: list[tuple[bytes, str]], total: str) -> bytes:
    """A ``scantxoutset`` answer as Core prints it (amounts as literal JSON numbers)."""
    items = ",".join(
        f'{{"txid":"{"11" * 32}","vout":{i},"scriptPubKey":"{script.hex()}","desc":"raw({script.hex()})#x",'
        f'"amount":{amount},"coinbase":false,"height":800000}}'
        for i, (script, amount) in enumerate(unspents)
    )
    result = (
        f'{{"success":true,"txouts":187000000,"height":870000,"bestblock":"{BEST}",'
        f'"unspents":[{items}],"total_amount":{total}}}'
    )
    return f'{{"result":{result},"error":null,"id":{json.dumps(request_id)}}}'.encode()


def core(loopback: Loopback, http, clock, url: str | None = None) -> BitcoinCoreClient:
    endpoint = EndpointConfig(url or loopback.url, retry=RetrySettings(attempts=3, base_delay=0.1))
    return BitcoinCoreClient(endpoint, http, timing=clock.timing())


def answer_scan(loopback: Loopback, unspents: list[tuple[bytes, str]], total: str) -> None:
    loopback.handle("POST", "/", lambda body, q: (200, scan_answer(body["id"], unspents, total)))


async def test_one_scan_for_addresses_and_raw_scripts_with_exact_satoshis(loopback: Loopback, http, clock) -> None:
    answer_scan(
        loopback,
        [(P2TR.script_pubkey, "20999999.99999999"), (P2TR.script_pubkey, "0.00000001"), (P2PK, "40.00000000")],
        "21000040.00000000",
    )
    scan = await core(loopback, http, clock).scan_utxos([P2TR, P2PK, EMPTY])
    (request,) = loopback.requests
    assert request.body["method"] == "scantxoutset"
    assert request.body["params"] == ["start", [f"addr({P2TR})", f"raw({P2PK.hex()})", f"addr({EMPTY})"]]
    assert scan.by_script[P2TR.script_pubkey].satoshis == 2_100_000_000_000_000
    assert scan.by_script[P2TR.script_pubkey].count == 2
    assert scan.by_script[P2PK].satoshis == 4_000_000_000
    assert scan.by_script[EMPTY.script_pubkey].count == 0
    assert (scan.height, scan.best_block, scan.total_satoshis) == (870_000, BEST, 2_100_004_000_000_000)


@pytest.mark.parametrize(
    ("status", "code", "message", "error"),
    [
        (500, -8, 'Scan already in progress, use action "abort" or "status"', InvalidParameter),
        (500, -28, "Loading block index…", InWarmup),
        (404, -32601, "Method not found", MethodNotFound),
    ],
)
async def test_rpc_errors_map_to_classes_and_are_not_retried(
    loopback: Loopback, http, clock, status: int, code: int, message: str, error: type
) -> None:
    loopback.handle(
        "POST",
        "/",
        lambda body, q: (status, {"result": None, "error": {"code": code, "message": message}, "id": body["id"]}),
    )
    with pytest.raises(error) as caught:
        await core(loopback, http, clock).scan_utxos([P2TR])
    assert caught.value.rpc_code == code and code_of(caught.value) == "SCAN_004"
    assert loopback.count() == 1


async def test_work_queue_overflow_is_retried(loopback: Loopback, http, clock) -> None:
    answer_scan(loopback, [], "0.00000000")
    loopback.fail(Fault(status=503, body=b"Work queue depth exceeded"))
    scan = await core(loopback, http, clock).scan_utxos([P2TR])
    assert scan.total_satoshis == 0 and loopback.count() == 2


async def test_rpc_credentials_are_sent_as_basic_auth_and_never_shown(loopback: Loopback, http, clock) -> None:
    loopback.fail(Fault(status=401, body=b""))
    url = loopback.url.replace("http://", "http://qday:rpc-pa55word@")
    with pytest.raises(Exception) as caught:
        await core(loopback, http, clock, url).scan_utxos([P2TR])
    assert "rpc-pa55word" not in str(caught.value) and "qday" not in str(caught.value)
    auth = loopback.requests[0].headers["Authorization"]
    assert base64.b64decode(auth.removeprefix("Basic ")) == b"qday:rpc-pa55word"


@pytest.mark.parametrize(
    ("unspents", "total", "reason"),
    [
        ([(P2TR.script_pubkey, "0.000000001")], "0.000000001", "whole number of satoshis"),
        ([(EMPTY.script_pubkey, "1.0")], "1.0", "not asked for"),
    ],
)
async def test_inconsistent_answers_are_malformed(loopback: Loopback, http, clock, unspents, total, reason) -> None:
    answer_scan(loopback, unspents, total)
    with pytest.raises(MalformedChainData, match=reason):
        await core(loopback, http, clock).scan_utxos([P2TR])


def test_descriptors_and_amounts() -> None:
    assert descriptor(P2TR) == f"addr({P2TR})" and descriptor(b"\x51") == "raw(51)"
    assert to_satoshis(Decimal("0.1"), "x") == 10_000_000
    with pytest.raises(MalformedChainData):
        to_satoshis(0.1, "x")  # a float never passes


async def test_core_client_exists_only_when_configured(http) -> None:
    assert BitcoinCoreClient.from_endpoints(load_endpoints({})[Environment.LIVE], http) is None
    configured = load_endpoints({"QDAY_BITCOIN_RPC_URL": "http://u:p@127.0.0.1:8332"})
    assert BitcoinCoreClient.from_endpoints(configured[Environment.LIVE], http) is not None
