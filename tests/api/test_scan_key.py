"""POST /v1/scan/key and the Bitcoin key-hash family, against a loopback Esplora replaying
real mainnet data: the block-9 key's P2PK output (by script hash; the coinbase of block 9
and its spend in block 170) and the P2WPKH spend of transaction 5849051c.

Addresses the replay has no data for answer as Esplora answers for an address it never
saw (zero stats). Only Bitcoin is configured for lookups; every other chain of a key is
reported unavailable.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from chains.bitcoin.script import witness_script_pubkey
from chains.codecs.bitcoin import BitcoinAddress, P2PKHAddress, P2SHAddress
from chains.keys import key_addresses, parse_public_key
from chains.registry import Chain, Network
from pqc.hashes import hash160, sha256
from services.settings import load_settings
from storage.models import Plan
from tests.api.test_envelope import assert_error
from tests.chain_clients.loopback import Loopback
from tests.support import ManualClock, client_for, engine_env, make_tenant, running_app

KEY_SCAN = "/v1/scan/key"
SCAN = "/v1/scan/wallet"
TIP = 923_000
#: The block-9 coinbase key, as its P2PK output shows it (uncompressed SEC).
BLOCK9_KEY = (
    "0411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5c"
    "b2e0eaddfb84ccf9744464f82e160bfa9b8b64f9d4c03f999b8643f656b412a3"
)
BLOCK9_P2PKH = "12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S"  # its P2PKH (uncompressed) address
P2WPKH_SPENT = "bc1qrw8us6s8x05ks479fyevq03qr243m703jmvdex"  # spent in 5849051c at height 709,632
SPEND_TXID = "5849051cf3ce36257a1d844e28959f368a35adc9520fb9679175f6cdf8c1f1d1"
ZERO = dict.fromkeys(("funded_txo_count", "funded_txo_sum", "spent_txo_count", "spent_txo_sum", "tx_count"), 0)


def stats(funded: int, funded_sum: int, spent: int, spent_sum: int, tx_count: int) -> dict[str, Any]:
    chain = dict(zip(ZERO, (funded, funded_sum, spent, spent_sum, tx_count), strict=True))
    return {"chain_stats": chain, "mempool_stats": ZERO}


def serve_unseen(loopback: Loopback, *paths: str) -> None:
    """Esplora's answer for scripts it never saw, on every path not served yet."""
    for path in paths:
        if ("GET", path) not in loopback.routes:
            loopback.route("GET", path, stats(0, 0, 0, 0, 0))


def serve_key(loopback: Loopback, key_hex: str, network: Network = Network.MAINNET) -> None:
    """Zero stats for every Bitcoin form of the key (on ``network``) that the replay has no data for."""
    for place in key_addresses(parse_public_key(bytes.fromhex(key_hex)), network):
        if place.address is None and place.script_pubkey is not None:
            serve_unseen(loopback, f"/scripthash/{sha256(place.script_pubkey).hex()}")
        elif place.chain.value == "bitcoin":
            serve_unseen(loopback, f"/address/{place.address}")


@pytest.fixture(scope="module")
async def esplora(conformance_dir):
    loopback = await Loopback().start()
    loopback.route("GET", "/blocks/tip/height", TIP)
    p2pk = json.loads((conformance_dir / "rpc" / "esplora_scripthash_p2pk.json").read_text())
    for request, answer in p2pk["requests"].items():
        method, path = request.split(" ", 1)
        loopback.route(method, path, answer)
    spend = json.loads((conformance_dir / "rpc" / "esplora_address_txs.json").read_text())["response"][1]
    loopback.route("GET", f"/address/{P2WPKH_SPENT}", stats(1, 100_000, 1, 100_000, 1))
    loopback.route("GET", f"/address/{P2WPKH_SPENT}/txs", [spend])
    serve_key(loopback, BLOCK9_KEY)
    yield loopback
    await loopback.stop()


@pytest.fixture(scope="module")
async def key_app(esplora, tmp_path_factory, module_database_url):
    env = {
        "QDAY_BITCOIN_ESPLORA_URL": esplora.url,
        "QDAY_FAMILY_CHAINS": "bitcoin",
        "QDAY_FAMILY_WAIT_SECONDS": "5",
        **engine_env(module_database_url),  # on both engines
    }
    settings = load_settings(env, data_dir=tmp_path_factory.mktemp("key-scan-data"))
    async with running_app(settings, ManualClock()) as app:
        yield app


@pytest.fixture
async def scanner(key_app):
    async with client_for(key_app) as client:
        tenant = await make_tenant(client, ("secret_live", "publishable_live"))
        await key_app.ctx.store.set_plan(tenant.email, Plan.PRO)
        yield client, tenant


async def test_the_block9_key_is_exposed_by_its_p2pk_output(scanner):
    client, tenant = scanner
    r = await client.post(KEY_SCAN, json={"publicKey": BLOCK9_KEY}, headers=tenant.auth("publishable_live"))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    key = parse_public_key(bytes.fromhex(BLOCK9_KEY))
    assert data["publicKey"] == key.compressed.hex() and data["keyType"] == "secp256k1"
    assert data["publicKeyExposed"] is True and data["cached"] is False
    script = "41" + BLOCK9_KEY + "ac"
    assert data["exposureEvidence"][0] == {
        "chain": "bitcoin",
        "address": script,
        "kind": "output",
        "txid": "0437cd7f8525ceed2324359c2d0ba26006d92d856a9c20fa0241106ee5a597c9",
        "blockHeight": 9,
    }
    forms = {a["form"]: a for a in data["addresses"]}
    assert set(forms) >= {"p2pk", "p2pk-uncompressed", "p2pkh", "p2pkh-uncompressed", "p2wpkh", "p2tr", "evm", "tron"}
    p2pk = forms["p2pk-uncompressed"]
    assert p2pk["active"] is True and p2pk["address"] == script and p2pk["error"] is None
    assert p2pk["scan"]["balanceAtRisk"] == "40 BTC" and p2pk["scan"]["publicKeyExposed"] is True
    assert forms["p2pkh-uncompressed"]["address"] == BLOCK9_P2PKH
    assert forms["p2pkh-uncompressed"]["active"] is False and forms["p2pkh-uncompressed"]["scan"] is None
    assert forms["evm"]["error"]["code"] == "SCAN_004"  # not configured here
    assert data["riskValue"] == p2pk["scan"]["riskValue"] and data["riskScore"] == p2pk["scan"]["riskScore"]
    assert data["coverage"]["checked"] == ["bitcoin"] and "ethereum" in data["coverage"]["unavailable"]
    assert data["exposureComplete"] is False


async def test_both_encodings_are_one_key_and_answers_are_cached(scanner):
    client, tenant = scanner
    compressed = parse_public_key(bytes.fromhex(BLOCK9_KEY)).compressed.hex()
    body = {"publicKey": compressed, "chains": ["bitcoin"]}
    first = (await client.post(KEY_SCAN, json=body, headers=tenant.auth("secret_live"))).json()["data"]
    second = (await client.post(KEY_SCAN, json=body, headers=tenant.auth("secret_live"))).json()["data"]
    assert first["publicKeyExposed"] is True and first["cached"] is False and second["cached"] is True
    assert {a["chain"] for a in first["addresses"]} == {"bitcoin"}
    assert first["coverage"] == {"checked": ["bitcoin"], "unavailable": [], "limits": []}
    assert first["exposureComplete"] is True
    refreshed = (await client.post(KEY_SCAN, json={**body, "refresh": True}, headers=tenant.auth("secret_live"))).json()
    assert refreshed["data"]["cached"] is False


async def test_a_silent_key_is_not_exposed_and_says_what_it_could_not_see(scanner, esplora):
    client, tenant = scanner
    key = "02" + "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"  # the generator point G
    serve_key(esplora, key)
    r = await client.post(KEY_SCAN, json={"publicKey": key, "chains": ["bitcoin"]}, headers=tenant.auth("secret_live"))
    data = r.json()["data"]
    assert data["publicKeyExposed"] is False and data["exposureEvidence"] == []
    assert all(a["active"] is False for a in data["addresses"])
    assert (data["riskScore"], data["riskValue"], data["balanceAtRiskUsd"]) == ("W1", 0, 0)
    assert data["coverage"]["limits"] and data["exposureComplete"] is False  # multisig scripts need the index


@pytest.mark.parametrize(
    "key",
    [
        "02" + "00" * 32,  # x = 0 is not on secp256k1
        "04" + "11" * 64,  # an uncompressed pair off the curve
        "ab" * 33,  # no such SEC prefix
    ],
)
async def test_a_point_off_its_curve_is_pqc_002(scanner, key):
    client, tenant = scanner
    r = await client.post(KEY_SCAN, json={"publicKey": key}, headers=tenant.auth("secret_live"))
    assert_error(r, 400, "PQC_002")


async def test_wrong_lengths_hex_and_chains_are_clear_errors(scanner):
    client, tenant = scanner
    headers = tenant.auth("secret_live")
    r = await client.post(KEY_SCAN, json={"publicKey": "02" + "11" * 33}, headers=headers)  # 34 bytes
    assert_error(r, 400, "PQC_002")
    r = await client.post(KEY_SCAN, json={"publicKey": "zz" * 33}, headers=headers)
    assert r.status_code == 400 and r.json()["error"]["code"] in ("PQC_002", "REQ_001")
    r = await client.post(KEY_SCAN, json={"publicKey": BLOCK9_KEY, "chains": ["nosuch"]}, headers=headers)
    assert_error(r, 400, "SCAN_002")


async def test_an_ed25519_key_is_its_solana_address(scanner):
    client, tenant = scanner
    key = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"  # RFC 8032, test 1
    r = await client.post(KEY_SCAN, json={"publicKey": key}, headers=tenant.auth("secret_live"))
    data = r.json()["data"]
    assert data["keyType"] == "ed25519"
    assert [(a["chain"], a["form"]) for a in data["addresses"]] == [("solana", "solana")]
    assert data["addresses"][0]["error"]["code"] == "SCAN_004"  # solana is not configured here


async def test_a_p2pkh_whose_key_was_spent_from_as_p2wpkh_is_exposed(scanner, esplora):
    """The same HASH160 as P2PKH: never spent from, but its P2WPKH sibling was."""
    client, tenant = scanner
    key_hash = BitcoinAddress.decode(P2WPKH_SPENT).payload
    p2pkh = P2PKHAddress(key_hash, Chain.BITCOIN, Network.MAINNET)
    nested = P2SHAddress(hash160(witness_script_pubkey(0, key_hash)), Chain.BITCOIN, Network.MAINNET)
    funding = {  # constructed: one confirmed payment to the P2PKH script
        "txid": "11" * 32,
        "vin": [],
        "vout": [{"scriptpubkey": p2pkh.script_pubkey.hex(), "value": 250_000}],
        "status": {"confirmed": True, "block_height": 800_000, "block_time": 1_690_000_000},
    }
    esplora.route("GET", f"/address/{p2pkh}", stats(1, 250_000, 0, 0, 1))
    esplora.route("GET", f"/address/{p2pkh}/txs", [funding])
    serve_unseen(esplora, f"/address/{nested}")
    r = await client.post(SCAN, json={"address": str(p2pkh)}, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["publicKeyExposed"] is True
    assert data["exposureEvidence"] == [
        {"chain": "bitcoin", "address": P2WPKH_SPENT, "kind": "spend", "txid": SPEND_TXID, "blockHeight": 709_632}
    ]
    assert data["coverage"]["checked"] == ["bitcoin"] and data["coverage"]["unavailable"] == ["cosmos"]
