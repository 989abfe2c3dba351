"""Scans that use the chain-wide Bitcoin exposure index: the live environment over an index of
the real mainnet blocks 170, 413567 and 702861 (not reaching genesis), the test environment
over a built regtest chain indexed from genesis (complete to its tip, height 4), each with a
loopback Esplora for the scanned chain."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chains.codecs.bitcoin import BitcoinAddress, P2PKHAddress
from chains.keys import siblings
from chains.registry import Chain, Network
from pqc.hashes import hash160
from services.bitcoin_ingest import ingest_block_files
from services.settings import load_settings
from storage.bitcoin_index import BitcoinIndexStore
from storage.models import Plan
from tests.api.test_scan_key import serve_key, serve_unseen, stats
from tests.bitcoin_chain import (
    ChainBuilder,
    public_key,
    revealing_blocks,
    write_block_file,
    write_conformance_block_file,
)
from tests.chain_clients.loopback import Loopback
from tests.support import ManualClock, client_for, engine_env, make_tenant, running_app

SCAN = "/v1/scan/wallet"
KEY_SCAN = "/v1/scan/key"
BLOCK9_KEY = (
    "0411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5c"
    "b2e0eaddfb84ccf9744464f82e160bfa9b8b64f9d4c03f999b8643f656b412a3"
)
BLOCK9_P2PKH = "12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S"
BLOCK170_SPEND = "f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16"
NOT_FROM_GENESIS = "bitcoin-index: the index does not reach back to the genesis block"
REGTEST_MAGIC = bytes.fromhex("fabfb5da")
INDEXED_TO = 4


def p2pkh(key: bytes, network: Network) -> str:
    return str(P2PKHAddress(hash160(key), Chain.BITCOIN, network))


def funded(loopback: Loopback, address: str, network: Network) -> None:
    """Esplora's answer for an address paid once and never spent from (the address itself
    shows no key), and for its unused siblings (the same key hash as P2WPKH, nested)."""
    parsed = BitcoinAddress.decode(address, network=network)
    serve_unseen(loopback, *(f"/address/{s}" for s in siblings(parsed) if s.chain is Chain.BITCOIN))
    script = parsed.script_pubkey
    funding = {
        "txid": hash160(address.encode()).hex() + "00" * 12,
        "vin": [],
        "vout": [{"scriptpubkey": script.hex(), "value": 5_000}],
        "status": {"confirmed": True, "block_height": 2, "block_time": 1_700_000_000},
    }
    loopback.route("GET", f"/address/{address}", stats(1, 5_000, 0, 0, 1))
    loopback.route("GET", f"/address/{address}/txs", [funding])


@pytest.fixture(scope="module")
async def esploras() -> AsyncIterator[tuple[Loopback, Loopback]]:
    live, test = await Loopback().start(), await Loopback().start()
    live.route("GET", "/blocks/tip/height", 923_000)
    test.route("GET", "/blocks/tip/height", INDEXED_TO)
    yield live, test
    await live.stop()
    await test.stop()


@pytest.fixture(scope="module")
async def index_app(
    esploras: Any, tmp_path_factory: pytest.TempPathFactory, conformance_dir: Path, module_database_url: str
) -> Any:
    live, test = esploras
    data = tmp_path_factory.mktemp("index-scan-data")
    blocks = tmp_path_factory.mktemp("index-blocks")
    (blocks / "mainnet").mkdir()
    (blocks / "regtest").mkdir()
    write_conformance_block_file(conformance_dir, blocks / "mainnet" / "blk00000.dat", xor_key=b"\x01" * 8)
    chain = ChainBuilder()
    start = chain.extend(None, 3)
    write_block_file(
        blocks / "regtest" / "blk00000.dat", [*start, *revealing_blocks(chain, start[-1]).blocks], magic=REGTEST_MAGIC
    )
    summary = ingest_block_files([blocks / "mainnet", blocks / "regtest"], BitcoinIndexStore(data / "analytics"))
    assert {s.network: s.complete_to for s in summary.chains} == {"mainnet": None, "regtest": INDEXED_TO}
    env = {
        "QDAY_BITCOIN_ESPLORA_URL": live.url,
        "QDAY_TEST_BITCOIN_ESPLORA_URL": test.url,
        "QDAY_FAMILY_CHAINS": "bitcoin",
        "QDAY_FAMILY_WAIT_SECONDS": "5",
        **engine_env(module_database_url),  # on both engines
    }
    async with running_app(load_settings(env, data_dir=data), ManualClock()) as app:
        yield app


@pytest.fixture
async def scanner(index_app: Any) -> AsyncIterator[tuple[Any, Any]]:
    async with client_for(index_app) as client:
        tenant = await make_tenant(client, ("secret_live", "secret_test"))
        await index_app.ctx.store.set_plan(tenant.email, Plan.PRO)
        yield client, tenant


async def test_the_block9_p2pkh_address_is_exposed_by_the_index(scanner: Any, esploras: Any) -> None:
    """Esplora sees an address never spent from; the index knows its key from block 170's
    P2PK output (the uncompressed encoding the address hashes)."""
    client, tenant = scanner
    funded(esploras[0], BLOCK9_P2PKH, Network.MAINNET)
    r = await client.post(SCAN, json={"address": BLOCK9_P2PKH}, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["publicKeyExposed"] is True
    index = {"chain": "bitcoin", "address": BLOCK9_KEY, "kind": "index", "txid": BLOCK170_SPEND, "blockHeight": None}
    assert index in data["exposureEvidence"]
    assert data["coverage"]["limits"] == [] and "bitcoinIndexHeight" not in data["coverage"]


async def test_a_key_the_index_lacks_says_the_index_is_partial(scanner: Any, esploras: Any) -> None:
    client, tenant = scanner
    address = p2pkh(public_key(77), Network.MAINNET)
    funded(esploras[0], address, Network.MAINNET)
    r = await client.post(SCAN, json={"address": address}, headers=tenant.auth("secret_live"))
    data = r.json()["data"]
    assert data["publicKeyExposed"] is False and data["exposureEvidence"] == []
    assert [limit.startswith(NOT_FROM_GENESIS) for limit in data["coverage"]["limits"]] == [True]
    assert data["exposureComplete"] is False


async def test_a_complete_index_finds_the_other_encoding_and_says_its_height(scanner: Any, esploras: Any) -> None:
    """Key 4 was spent from as uncompressed P2PKH at height 4; its compressed P2PKH address
    (a different address, never used) is exposed through the index."""
    client, tenant = scanner
    address = p2pkh(public_key(4), Network.TESTNET)
    funded(esploras[1], address, Network.TESTNET)
    r = await client.post(SCAN, json={"address": address}, headers=tenant.auth("secret_test"))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["publicKeyExposed"] is True
    (evidence,) = [e for e in data["exposureEvidence"] if e["kind"] == "index"]
    assert evidence["address"] == public_key(4, compressed=False).hex() and evidence["blockHeight"] == 4
    assert data["coverage"]["bitcoinIndexHeight"] == INDEXED_TO


async def test_a_silent_key_under_a_complete_index_has_no_index_limit_until_the_chain_moves_on(
    scanner: Any, esploras: Any
) -> None:
    client, tenant = scanner
    address = p2pkh(public_key(78), Network.TESTNET)
    funded(esploras[1], address, Network.TESTNET)
    r = await client.post(SCAN, json={"address": address}, headers=tenant.auth("secret_test"))
    data = r.json()["data"]
    assert data["publicKeyExposed"] is False
    assert data["coverage"] == {
        "checked": ["bitcoin"],
        "unavailable": ["cosmos"],  # left out of QDAY_FAMILY_CHAINS here
        "limits": [],
        "bitcoinIndexHeight": INDEXED_TO,
    }
    esploras[1].route("GET", "/blocks/tip/height", INDEXED_TO + 6)  # six blocks the index has not seen
    try:
        r = await client.post(SCAN, json={"address": address, "refresh": True}, headers=tenant.auth("secret_test"))
        limits = r.json()["data"]["coverage"]["limits"]
        assert limits == [
            f"bitcoin-index: complete to height {INDEXED_TO}; a key revealed in another form in a later block "
            "is not visible"
        ]
    finally:
        esploras[1].route("GET", "/blocks/tip/height", INDEXED_TO)


async def test_a_key_scan_finds_the_key_in_the_index(scanner: Any, esploras: Any) -> None:
    client, tenant = scanner
    key = public_key(4).hex()
    serve_key(esploras[1], key, Network.TESTNET)
    body = {"publicKey": key, "chains": ["bitcoin"]}
    r = await client.post(KEY_SCAN, json=body, headers=tenant.auth("secret_test"))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["publicKeyExposed"] is True
    assert [(e["kind"], e["blockHeight"]) for e in data["exposureEvidence"]] == [("index", 4)]
    assert data["coverage"] == {"checked": ["bitcoin"], "unavailable": [], "limits": [], "bitcoinIndexHeight": 4}
    silent = public_key(79).hex()
    serve_key(esploras[1], silent, Network.TESTNET)
    body = {"publicKey": silent, "chains": ["bitcoin"]}
    r = await client.post(KEY_SCAN, json=body, headers=tenant.auth("secret_test"))
    data = r.json()["data"]
    assert data["publicKeyExposed"] is False and data["coverage"]["limits"] == []
    assert data["exposureComplete"] is True, data["coverage"]
