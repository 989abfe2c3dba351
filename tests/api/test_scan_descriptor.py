"""POST /v1/scan/descriptor over a loopback Esplora serving a built chain of real transactions.

The wallet is BIP-84's test account (``m/84'/0'/0'``, its published zpub and addresses): its
receive and change addresses are paid, one is spent from (revealing its key) and paid again,
and the scan must find every used address, its coins and which are exposed, within the gap
limit, in few lookup rounds. Private keys are refused without a trace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chains.bitcoin.descriptors import parse_descriptor
from chains.bitcoin.wallet import parse_wallet
from chains.codecs.bitcoin import BitcoinAddress
from chains.registry import Network
from services.settings import load_settings
from storage.models import Plan
from tests.api.test_caps import _prefill_watchlist
from tests.chain_clients.loopback import Fault, Loopback
from tests.esplora_chain import EsploraChain
from tests.support import ManualClock, client_for, engine_env, make_tenant, running_app, stored_bytes

SCAN = "/v1/scan/descriptor"
TIP = 900_000


def bip84(conformance_dir: Path) -> dict[str, Any]:
    return json.loads((conformance_dir / "wallets" / "bip84.json").read_text())


def wallet_address(zpub: str, branch: int, index: int) -> BitcoinAddress:
    wallet = parse_wallet(zpub, Network.MAINNET)
    descriptor = wallet.descriptors[0]
    return BitcoinAddress.from_script_pubkey(descriptor.expand(index, branch).script_pubkey)


@pytest.fixture(scope="module")
async def esplora() -> AsyncIterator[Loopback]:
    loopback = await Loopback().start()
    yield loopback
    await loopback.stop()


@pytest.fixture(scope="module")
async def app(esplora: Loopback, tmp_path_factory: pytest.TempPathFactory, module_database_url: str) -> Any:
    data = tmp_path_factory.mktemp("descriptor-scan-data")
    env = {
        "QDAY_BITCOIN_ESPLORA_URL": esplora.url,
        "QDAY_FAMILY_CHAINS": "bitcoin",
        "QDAY_FAMILY_WAIT_SECONDS": "5",
        **engine_env(module_database_url),  # on both engines
    }
    async with running_app(load_settings(env, data_dir=data), ManualClock()) as app:
        yield app


@pytest.fixture
async def scanner(app: Any) -> AsyncIterator[tuple[Any, Any]]:
    async with client_for(app) as client:
        tenant = await make_tenant(client, ("secret_live", "publishable_live"))
        await app.ctx.store.set_plan(tenant.email, Plan.PRO)
        yield client, tenant


@pytest.fixture
def chain(esplora: Loopback) -> EsploraChain:
    esplora.requests.clear()
    esplora.faults.clear()
    return EsploraChain(esplora, tip=TIP)


async def test_a_bip84_wallet_is_found_address_by_address_and_coin_by_coin(
    scanner: Any, chain: EsploraChain, conformance_dir: Path
) -> None:
    client, tenant = scanner
    vector = bip84(conformance_dir)
    zpub = vector["account"]["xpub"]
    receive0, receive3 = wallet_address(zpub, 0, 0), wallet_address(zpub, 0, 3)
    change1 = wallet_address(zpub, 1, 1)
    assert str(receive0) == vector["addresses"][0]["address"]  # the BIP's own address
    chain.pay(receive0.script_pubkey, 50_000, 800_000)
    first = chain.pay(receive3.script_pubkey, 70_000, 800_010)[0]
    key3 = parse_wallet(zpub, Network.MAINNET).descriptors[0].expand(3, 0).keys[0].pubkey
    spend = chain.spend(first, key3, change1.script_pubkey, 800_020)
    chain.pay(receive3.script_pubkey, 30_000, 800_030)  # reused after its key was shown

    r = await client.post(SCAN, json={"descriptor": zpub, "gapLimit": 5}, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["descriptor"] is None  # a bare key: its descriptor is listed below
    assert [d["descriptor"].split("#")[0][:5] for d in data["descriptors"]] == ["wpkh("]
    by_address = {a["address"]: a for a in data["addresses"]}
    assert set(by_address) == {str(receive0), str(receive3), str(change1)}
    assert (by_address[str(receive3)]["branch"], by_address[str(receive3)]["index"]) == ("receive", 3)
    assert (by_address[str(change1)]["branch"], by_address[str(change1)]["index"]) == ("change", 1)
    exposed = by_address[str(receive3)]
    assert exposed["publicKeyExposed"] is True and exposed["exposure"] == "EXPOSED_AT_REST"
    assert {"kind": "spend", "txid": spend} in [
        {"kind": e["kind"], "txid": e["txid"]} for e in exposed["exposureEvidence"]
    ]
    assert by_address[str(receive0)]["publicKeyExposed"] is False
    assert by_address[str(receive0)]["exposure"] == "EXPOSED_ON_SPEND"
    coins = {(c["address"], c["value"]) for c in data["coins"]}
    assert coins == {(str(receive0), 50_000), (str(receive3), 30_000), (str(change1), 69_000)}
    assert all(c["publicKeyExposed"] is (c["address"] == str(receive3)) for c in data["coins"])
    summary = data["summary"]
    assert summary["balanceSat"] == 149_000 and summary["exposedBalanceSat"] == 30_000
    assert summary["usedAddresses"] == 3
    # receive: 0..4, then 5..8 (last used 3 + gap 5); change: 0..4, then 5..6: two rounds
    assert (summary["derivedAddresses"], summary["lookupRounds"]) == (16, 2)
    assert summary["byExposure"]["EXPOSED_AT_REST"] == {"addresses": 1, "balanceSat": 30_000}
    assert summary["riskValue"] == exposed["riskValue"] and summary["riskScore"] == exposed["riskScore"]
    assert data["coverage"]["limits"]  # no exposure index here: the verdict says what it cannot see
    assert data["exposureComplete"] is False

    # each used address's result is stored as its wallet scan
    wallet = await client.post("/v1/scan/wallet", json={"address": str(receive3)}, headers=tenant.auth("secret_live"))
    assert wallet.json()["data"]["cached"] is True and wallet.json()["data"]["publicKeyExposed"] is True


async def test_a_key_revealed_under_another_script_type_exposes_the_wallet_address(
    scanner: Any, chain: EsploraChain, conformance_dir: Path
) -> None:
    """The same key spent from as P2PKH (its key-hash family): the P2WPKH address the wallet
    derived shows nothing itself, yet is exposed, with the family's evidence."""
    client, tenant = scanner
    zpub = bip84(conformance_dir)["account"]["xpub"]
    descriptor = parse_wallet(zpub, Network.MAINNET).descriptors[0]
    key = descriptor.expand(0, 0).keys[0].pubkey
    receive0 = wallet_address(zpub, 0, 0)
    legacy = BitcoinAddress.from_script_pubkey(parse_descriptor(f"pkh({key.hex()})").expand().script_pubkey)
    chain.pay(receive0.script_pubkey, 10_000, 800_000)
    outpoint = chain.pay(legacy.script_pubkey, 20_000, 800_001)[0]
    spend = chain.spend(outpoint, key, receive0.script_pubkey, 800_002, legacy=True)
    r = await client.post(SCAN, json={"descriptor": zpub, "gapLimit": 3}, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    address = r.json()["data"]["addresses"][0]
    assert address["address"] == str(receive0) and address["publicKeyExposed"] is True
    assert spend in [e["txid"] for e in address["exposureEvidence"]]


async def test_many_used_addresses_take_few_rounds(scanner: Any, chain: EsploraChain, conformance_dir: Path) -> None:
    """120 receive addresses used in a row with a gap of 10: windows grow with what is found,
    so the walk takes a handful of rounds, not 12."""
    client, tenant = scanner
    zpub = bip84(conformance_dir)["account"]["xpub"]
    descriptor = parse_wallet(zpub, Network.MAINNET).descriptors[0]
    for index in range(120):
        chain.pay(descriptor.expand(index, 0).script_pubkey, 1_000 + index, 800_000 + index)
    r = await client.post(SCAN, json={"descriptor": zpub, "gapLimit": 10}, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    summary = r.json()["data"]["summary"]
    assert summary["usedAddresses"] == 120
    assert summary["lookupRounds"] <= 5
    assert summary["derivedAddresses"] <= 2 * (120 + 10) + 10  # at most twice what the gap rule needs


async def test_descriptor_with_origin_and_checksum(scanner: Any, chain: EsploraChain, conformance_dir: Path) -> None:
    client, tenant = scanner
    vector = bip84(conformance_dir)
    wallet = parse_wallet(vector["account"]["xpub"], Network.MAINNET)
    xpub = wallet.descriptors[0].keys[0].text.split("/")[0]
    text = f"wpkh([73c5da0a/84h/0h/0h]{xpub}/<0;1>/*)"
    canonical = parse_descriptor(text).canonical()
    chain.pay(BitcoinAddress.decode(vector["addresses"][2]["address"]).script_pubkey, 5_000, 800_000)
    r = await client.post(SCAN, json={"descriptor": canonical}, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["descriptor"] == canonical
    assert [(a["address"], a["branch"], a["index"]) for a in data["addresses"]] == [
        (vector["addresses"][2]["address"], "change", 0)
    ]
    # default gap limit 20: receive 0..19; change 0..19, then index 20 (20 unused after index 0)
    assert (data["summary"]["derivedAddresses"], data["summary"]["lookupRounds"]) == (41, 2)

    broken = canonical[:-1] + ("q" if canonical[-1] != "q" else "p")
    r = await client.post(SCAN, json={"descriptor": broken}, headers=tenant.auth("secret_live"))
    assert (r.status_code, r.json()["error"]["code"]) == (400, "SCAN_005")


async def test_a_bare_xpub_reports_each_script_type(scanner: Any, chain: EsploraChain, conformance_dir: Path) -> None:
    client, tenant = scanner
    wallet = parse_wallet(bip84(conformance_dir)["account"]["xpub"], Network.MAINNET)
    xpub = wallet.descriptors[0].keys[0].text.split("/")[0]
    taproot = parse_wallet(xpub, Network.MAINNET).descriptors[3]
    chain.pay(taproot.expand(2, 0).script_pubkey, 9_000, 800_000)
    r = await client.post(SCAN, json={"descriptor": xpub, "gapLimit": 3}, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert [d["descriptor"].split("(")[0] for d in data["descriptors"]] == ["pkh", "sh", "wpkh", "tr"]
    assert [d["usedAddresses"] for d in data["descriptors"]] == [0, 0, 0, 1]
    (address,) = data["addresses"]
    assert address["scriptType"] == "p2tr" and address["exposure"] == "EXPOSED_AT_REST"
    assert data["summary"]["derivedAddresses"] == 4 * 2 * 3 + 3  # tr's receive branch went 3 further


async def test_private_keys_are_refused_without_a_trace(
    scanner: Any, app: Any, caplog: pytest.LogCaptureFixture, conformance_dir: Path
) -> None:
    client, tenant = scanner
    vectors = json.loads((conformance_dir / "wallets" / "bip32.json").read_text())
    xprv = vectors["valid_vectors"][0]["chains"][0]["ext_prv"]
    wif = bip84(conformance_dir)["addresses"][0]["privkey"]
    caplog.set_level(logging.DEBUG)
    for secret in (xprv, f"wpkh({xprv}/0/*)", f"wpkh({wif})", wif):
        r = await client.post(SCAN, json={"descriptor": secret}, headers=tenant.auth("secret_live"))
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "SCAN_006"
        assert xprv not in r.text and wif not in r.text
    assert xprv not in caplog.text and wif not in caplog.text
    for path in app.ctx.settings.data_dir.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            assert xprv.encode() not in content and wif.encode() not in content, path
    stored = await stored_bytes(app)  # the SQLite files again, or every value in PostgreSQL
    assert xprv.encode() not in stored and wif.encode() not in stored


async def test_refusals(scanner: Any, chain: EsploraChain, conformance_dir: Path) -> None:
    client, tenant = scanner
    zpub = bip84(conformance_dir)["account"]["xpub"]
    bip49 = json.loads((conformance_dir / "wallets" / "bip49.json").read_text())
    upub = next(f["value"] for g in bip49["groups"] for f in g["fields"] if f["name"] == "account0Xpub")
    cases = [
        ({"descriptor": upub}, "SCAN_005"),  # a test-network key with a live API key
        ({"descriptor": "wpkh(xpub/0/*)"}, "SCAN_005"),
        ({"descriptor": "multi(1,03a34b99f22c790c4e36b2b3c2c35a36db06226e41c692fc82b8b56ac1c540c5bd)"}, "SCAN_005"),
        ({"descriptor": zpub, "chain": "solana"}, "SCAN_002"),
        ({"descriptor": zpub, "gapLimit": 0}, "REQ_001"),
        ({"descriptor": zpub, "gapLimit": 1001}, "REQ_001"),
    ]
    for body, code in cases:
        r = await client.post(SCAN, json=body, headers=tenant.auth("secret_live"))
        assert (r.status_code, r.json()["error"]["code"]) == (400, code), (body, r.text)
    r = await client.post(SCAN, json={"descriptor": zpub}, headers=tenant.auth("publishable_live"))
    assert (r.status_code, r.json()["error"]["code"]) == (403, "AUTH_003")


async def test_bitcoin_down_is_scan_004(scanner: Any, chain: EsploraChain, conformance_dir: Path) -> None:
    client, tenant = scanner
    zpub = bip84(conformance_dir)["account"]["xpub"]
    chain.loopback.fail(Fault(status=404, times=1000))
    r = await client.post(SCAN, json={"descriptor": zpub, "gapLimit": 2}, headers=tenant.auth("secret_live"))
    chain.loopback.faults.clear()
    assert (r.status_code, r.json()["error"]["code"]) == (503, "SCAN_004"), r.text


async def test_a_watched_wallet_counts_its_derived_addresses_against_the_cap(
    scanner: Any, app: Any, chain: EsploraChain, conformance_dir: Path
) -> None:
    client, tenant = scanner
    zpub = bip84(conformance_dir)["account"]["xpub"]
    chain.pay(wallet_address(zpub, 0, 0).script_pubkey, 50_000, 800_000)
    auth = tenant.auth("secret_live")
    await app.ctx.store.set_plan(tenant.email, Plan.FREE)  # a cap of 100 watched addresses
    r = await client.post("/v1/watchlist/descriptors", json={"descriptor": zpub, "gapLimit": 60}, headers=auth)
    assert (r.status_code, r.json()["error"]["code"]) == (403, "LIM_001")  # 61 + 60 derived > 100
    r = await client.post(
        "/v1/watchlist/descriptors", json={"descriptor": zpub, "gapLimit": 10, "label": "cold"}, headers=auth
    )
    assert r.status_code == 201, r.text
    entry = r.json()["data"]
    assert (entry["derivedAddresses"], entry["label"], entry["gapLimit"]) == (21, "cold", 10)
    assert entry["summary"]["usedAddresses"] == 1 and entry["summary"]["balanceSat"] == 50_000
    again = await client.post("/v1/watchlist/descriptors", json={"descriptor": zpub}, headers=auth)
    assert again.status_code == 201 and again.json()["data"]["id"] == entry["id"]  # idempotent, not rescanned
    await _prefill_watchlist(app, tenant.account_id, 78, 2000)  # 78 + 21 derived, then one more: the cap
    w = await client.post("/v1/watchlist", json={"address": str(wallet_address(zpub, 0, 100))}, headers=auth)
    assert w.status_code == 201, w.text
    full = await client.post("/v1/watchlist", json={"address": str(wallet_address(zpub, 0, 500))}, headers=auth)
    assert (full.status_code, full.json()["error"]["code"]) == (403, "LIM_001")
    listed = await client.get("/v1/watchlist/descriptors", headers=auth)
    assert [e["id"] for e in listed.json()["data"]] == [entry["id"]]
    gone = await client.delete(f"/v1/watchlist/descriptors/{entry['id']}", headers=auth)
    assert gone.status_code == 204
    freed = await client.post("/v1/watchlist", json={"address": str(wallet_address(zpub, 0, 500))}, headers=auth)
    assert freed.status_code == 201  # the wallet's 21 addresses no longer count
    missing = await client.delete(f"/v1/watchlist/descriptors/{entry['id']}", headers=auth)
    assert missing.status_code == 404
    await app.ctx.store.set_plan(tenant.email, Plan.PRO)
