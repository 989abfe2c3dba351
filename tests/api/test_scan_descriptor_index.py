"""Descriptor scans with the chain-wide Bitcoin exposure index: a regtest chain indexed from
genesis whose block 3 pays P2PK outputs to two keys of a test wallet (BIP-84 account
m/84'/1'/0' of the "abandon … about" seed). Esplora sees the first address funded and never
spent from, the second never used: the index makes the first exposed (evidence ``index``)
and lists the second under ``exposedUnused``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from chains.bitcoin.descriptors import parse_descriptor
from chains.bitcoin.tx import TxOut
from chains.codecs.bitcoin import BitcoinAddress
from chains.keys import siblings
from chains.registry import Chain, Network
from services.bitcoin_ingest import ingest_block_files
from services.settings import load_settings
from storage.bitcoin_index import BitcoinIndexStore
from storage.models import Plan
from tests.bitcoin_chain import (
    MINER_KEY,
    BuiltBlock,
    BuiltTransaction,
    ChainBuilder,
    p2pk,
    spend_p2wpkh,
    transaction,
    write_block_file,
)
from tests.chain_clients.loopback import Loopback
from tests.esplora_chain import EsploraChain
from tests.support import ManualClock, client_for, engine_env, make_tenant, running_app

TPUB = "tpubDC8msFGeGuwnKG9Upg7DM2b4DaRqg3CUZa5g8v2SRQ6K4NSkxUgd7HsL2XVWbVm39yBA4LAxysQAm397zwQSQoQgewGiYZqrA9DsP4zbQ1M"
"""The account m/84'/1'/0' of BIP-39's "abandon … about" seed (embit), as a tpub."""
DESCRIPTOR = f"wpkh([73c5da0a/84h/1h/0h]{TPUB}/<0;1>/*)"
REGTEST_MAGIC = bytes.fromhex("fabfb5da")
TIP = 3


def revealing_chain() -> tuple[list[BuiltBlock], BuiltTransaction]:
    """Blocks 0..3 (deterministic): block 3 pays P2PK outputs to the wallet's receive keys 0 and 1."""
    wallet = parse_descriptor(DESCRIPTOR)
    keys = [wallet.expand(index, 0).keys[0].pubkey for index in (0, 1)]
    chain = ChainBuilder()
    start = chain.extend(None, 3)
    funding = start[1].transactions[0]  # block 1's coinbase pays the miner's P2WPKH
    reveal = transaction([spend_p2wpkh(funding.txid, 0, MINER_KEY)], [TxOut(1_000, p2pk(k)) for k in keys])
    return [*start, chain.block(start[-1], [reveal])], reveal


@pytest.fixture(scope="module")
async def esplora() -> AsyncIterator[Loopback]:
    loopback = await Loopback().start()
    yield loopback
    await loopback.stop()


@pytest.fixture(scope="module")
async def app(esplora: Loopback, tmp_path_factory: pytest.TempPathFactory, module_database_url: str) -> Any:
    data = tmp_path_factory.mktemp("descriptor-index")
    blocks = tmp_path_factory.mktemp("descriptor-blocks") / "regtest"
    blocks.mkdir()
    write_block_file(blocks / "blk00000.dat", revealing_chain()[0], magic=REGTEST_MAGIC)
    summary = ingest_block_files([blocks], BitcoinIndexStore(data / "analytics"))
    assert {s.network: s.complete_to for s in summary.chains} == {"regtest": TIP}
    env = {
        "QDAY_TEST_BITCOIN_ESPLORA_URL": esplora.url,
        "QDAY_FAMILY_CHAINS": "bitcoin",
        **engine_env(module_database_url),  # on both engines
    }
    async with running_app(load_settings(env, data_dir=data), ManualClock()) as app:
        yield app


async def test_the_index_exposes_used_and_unused_wallet_keys(app: Any, esplora: Loopback) -> None:
    chain = EsploraChain(esplora, network=Network.TESTNET, tip=TIP)
    reveal = revealing_chain()[1].txid
    wallet = parse_descriptor(DESCRIPTOR)
    first = BitcoinAddress.from_script_pubkey(wallet.expand(0, 0).script_pubkey, Network.TESTNET)
    second = BitcoinAddress.from_script_pubkey(wallet.expand(1, 0).script_pubkey, Network.TESTNET)
    chain.pay(first.script_pubkey, 25_000, 2)
    async with client_for(app) as client:
        tenant = await make_tenant(client, ("secret_test",))
        await app.ctx.store.set_plan(tenant.email, Plan.PRO)
        r = await client.post(
            "/v1/scan/descriptor", json={"descriptor": DESCRIPTOR, "gapLimit": 3}, headers=tenant.auth("secret_test")
        )
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    (address,) = data["addresses"]
    assert address["address"] == str(first) and address["publicKeyExposed"] is True
    index_evidence = [e for e in address["exposureEvidence"] if e["kind"] == "index"]
    assert [(e["txid"], e["blockHeight"]) for e in index_evidence] == [(reveal, TIP)]
    assert data["summary"]["exposedBalanceSat"] == 25_000
    (unused,) = data["exposedUnused"]
    assert (unused["address"], unused["branch"], unused["index"]) == (str(second), "receive", 1)
    assert [e["txid"] for e in unused["exposureEvidence"]] == [reveal]
    assert data["coverage"]["bitcoinIndexHeight"] == TIP
    assert not any(limit.startswith("bitcoin-index") for limit in data["coverage"]["limits"])
    # the index is complete to the height Esplora showed: the key's other Bitcoin address types
    # cannot show anything it lacks, so they are not looked up
    legacy = {str(s) for s in siblings(first) if s.chain is Chain.BITCOIN}
    assert legacy and not legacy & {r.path.split("/")[2] for r in esplora.requests if r.path.startswith("/address/")}
