"""POST /v1/plan/migration over a loopback Esplora serving a built chain of real transactions.

Source: BIP-84's test wallet with its key origin (the "abandon … about" seed, fingerprint
73c5da0a); destination: BIP-86's account of the same seed. The PSBTs are read back by embit
(an independent implementation) and signed by it with the seed, as a hardware wallet would:
every input must be signable from what the PSBT carries.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from embit import bip32 as embit_bip32
from embit import bip39
from embit.psbt import PSBT

from chains.bitcoin.bip32 import HARDENED
from chains.bitcoin.descriptors import parse_descriptor
from chains.bitcoin.psbt import decode_psbt
from chains.bitcoin.wallet import parse_wallet
from chains.codecs.bitcoin import BitcoinAddress
from chains.registry import Network
from services.settings import load_settings
from storage.models import Plan
from tests.chain_clients.loopback import Loopback
from tests.esplora_chain import EsploraChain
from tests.support import ManualClock, client_for, engine_env, make_tenant, running_app

PLAN = "/v1/plan/migration"
BTC = 100_000_000
FINGERPRINT = "73c5da0a"


def wallets(conformance_dir: Path) -> tuple[str, str, str]:
    """The source descriptor (BIP-84 account with origin), the destination (BIP-86 account
    with origin), and the seed's mnemonic."""
    bip84 = json.loads((conformance_dir / "wallets" / "bip84.json").read_text())
    bip86 = json.loads((conformance_dir / "wallets" / "bip86.json").read_text())
    zpub_key = parse_wallet(bip84["account"]["xpub"], Network.MAINNET).descriptors[0].keys[0].text.split("/")[0]
    source = f"wpkh([{FINGERPRINT}/84h/0h/0h]{zpub_key}/<0;1>/*)"
    destination = f"tr([{FINGERPRINT}/86h/0h/0h]{bip86['account']['xpub']}/<0;1>/*)"
    return source, destination, bip84["mnemonic"]


def address_at(descriptor: str, branch: int, index: int) -> BitcoinAddress:
    return BitcoinAddress.from_script_pubkey(parse_descriptor(descriptor).expand(index, branch).script_pubkey)


@pytest.fixture(scope="module")
async def esplora() -> AsyncIterator[Loopback]:
    loopback = await Loopback().start()
    yield loopback
    await loopback.stop()


@pytest.fixture(scope="module")
async def app(esplora: Loopback, tmp_path_factory: pytest.TempPathFactory, module_database_url: str) -> Any:
    env = {
        "QDAY_BITCOIN_ESPLORA_URL": esplora.url,
        "QDAY_FAMILY_CHAINS": "bitcoin",
        **engine_env(module_database_url),  # on both engines
    }
    settings = load_settings(env, data_dir=tmp_path_factory.mktemp("plan-data"))
    async with running_app(settings, ManualClock()) as app:
        yield app


@pytest.fixture
async def planner(app: Any) -> AsyncIterator[tuple[Any, Any]]:
    async with client_for(app) as client:
        tenant = await make_tenant(client, ("secret_live",))
        await app.ctx.store.set_plan(tenant.email, Plan.PRO)
        yield client, tenant


@pytest.fixture
def chain(esplora: Loopback) -> EsploraChain:
    esplora.requests.clear()
    return EsploraChain(esplora)


async def test_exposed_coins_move_first_to_fresh_capped_addresses(
    planner: Any, chain: EsploraChain, conformance_dir: Path
) -> None:
    client, tenant = planner
    source, destination, mnemonic = wallets(conformance_dir)
    parsed = parse_descriptor(source)
    # an exposed coin: receive 1 was spent from (its key shown) and paid again
    reused = address_at(source, 0, 1)
    first = chain.pay(reused.script_pubkey, 2 * BTC, 800_000)[0]
    chain.spend(first, parsed.expand(1, 0).keys[0].pubkey, address_at(source, 1, 0).script_pubkey, 800_001)
    chain.pay(reused.script_pubkey, 1 * BTC, 800_002)
    # a large coin whose key is not on chain, and a dust-sized one
    chain.pay(address_at(source, 0, 0).script_pubkey, 120 * BTC, 800_003)
    chain.pay(address_at(source, 0, 4).script_pubkey, 400, 800_004)
    # the destination already used its receive index 0 and, beyond the gap, index 5
    chain.pay(address_at(destination, 0, 0).script_pubkey, 10_000, 800_005)
    chain.pay(address_at(destination, 0, 5).script_pubkey, 10_000, 800_006)

    body = {"descriptor": source, "destination": destination, "maxPerAddressSat": 30 * BTC, "gapLimit": 3}
    r = await client.post(PLAN, json=body, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    plan = r.json()["data"]
    assert plan["feeRate"] == 12.25  # the source's estimate for 6 blocks
    steps = plan["steps"]
    assert [s["order"] for s in steps] == list(range(1, len(steps) + 1))
    # the exposed coin first, though it is the smaller one
    assert [i["exposure"] for i in steps[0]["inputs"]] == ["EXPOSED_AT_REST"]
    assert steps[0]["inputs"][0]["valueSat"] == BTC
    change_coin = 2 * BTC - 1_000  # the spend paid change 0, an unexposed address
    later = sorted(i["valueSat"] for s in steps[1:] for i in s["inputs"])
    assert later == [change_coin, 120 * BTC]
    # dust is skipped, with a reason
    assert [(s["valueSat"], bool(s["reason"])) for s in plan["skipped"]] == [(400, True)]

    indexes = [o["index"] for s in steps for o in s["outputs"]]
    assert len(indexes) == len(set(indexes)) and 0 not in indexes and 5 not in indexes
    assert all(o["valueSat"] <= 30 * BTC for s in steps for o in s["outputs"])
    for step in steps:
        spent = sum(i["valueSat"] for i in step["inputs"])
        paid = sum(o["valueSat"] for o in step["outputs"])
        assert spent == paid + step["feeSat"] and step["feeSat"] >= step["vsize"] * 12.25
        for output in step["outputs"]:
            assert output["address"] == str(address_at(destination, 0, output["index"]))
    totals = plan["totals"]
    assert totals["inSat"] == 3 * BTC - 1_000 + 120 * BTC
    assert totals["inSat"] == totals["outSat"] + totals["feeSat"]
    # no exposure index here: the order rests on a scan that says what it could not see
    assert plan["exposureComplete"] is False and plan["coverage"]["limits"]

    root = embit_bip32.HDKey.from_seed(bip39.mnemonic_to_seed(mnemonic))
    assert root.my_fingerprint.hex() == FINGERPRINT
    for step in steps:
        ours = decode_psbt(step["psbt"])
        theirs = PSBT.parse(base64.b64decode(step["psbt"]))
        assert theirs.serialize() == base64.b64decode(step["psbt"])
        assert [str(i.txid.hex()) for i in theirs.tx.vin] == [i["txid"] for i in step["inputs"]]
        for coin, psbt_in, our_in in zip(step["inputs"], theirs.inputs, ours.inputs, strict=True):
            assert psbt_in.witness_utxo.value == coin["valueSat"]
            assert psbt_in.non_witness_utxo is not None  # segwit v0: the whole previous transaction
            assert psbt_in.non_witness_utxo.txid().hex() == coin["txid"]
            ((pubkey, origin),) = our_in.bip32_derivations.items()
            assert origin.fingerprint.hex() == FINGERPRINT and origin.path[:3] == (84 | HARDENED, HARDENED, HARDENED)
            assert [d.fingerprint.hex() for d in psbt_in.bip32_derivations.values()] == [FINGERPRINT]
        for output, psbt_out in zip(step["outputs"], theirs.outputs, strict=True):
            (derivation,) = psbt_out.taproot_bip32_derivations.values()
            assert derivation[1].derivation == [86 | HARDENED, HARDENED, HARDENED, 0, output["index"]]
        # a signer holding the seed signs every input from what the PSBT carries
        assert theirs.sign_with(root) == len(step["inputs"])
        assert theirs.fee() == step["feeSat"]


async def test_legacy_inputs_carry_the_previous_transaction_only(
    planner: Any, chain: EsploraChain, conformance_dir: Path
) -> None:
    client, tenant = planner
    source, destination, mnemonic = wallets(conformance_dir)
    legacy = source.replace("wpkh(", "pkh(")  # the same keys, paid as P2PKH
    chain.pay(address_at(legacy, 0, 2).script_pubkey, 3 * BTC, 800_000)
    body = {"descriptor": legacy, "destination": destination, "feeRate": 2}
    r = await client.post(PLAN, json=body, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    (step,) = r.json()["data"]["steps"]
    theirs = PSBT.parse(base64.b64decode(step["psbt"]))
    (psbt_in,) = theirs.inputs
    assert psbt_in.witness_utxo is None and psbt_in.non_witness_utxo is not None
    root = embit_bip32.HDKey.from_seed(bip39.mnemonic_to_seed(mnemonic))
    assert theirs.sign_with(root) == 1
    assert step["feeSat"] >= step["vsize"] * 2


async def test_refusals(planner: Any, chain: EsploraChain, conformance_dir: Path) -> None:
    client, tenant = planner
    source, destination, _ = wallets(conformance_dir)
    xpub = parse_descriptor(source).keys[0].text.split("]")[1].split("/")[0]
    cases = [
        ({"descriptor": source, "destination": xpub}, "REQ_001"),  # four script types: which?
        ({"descriptor": source, "destination": destination, "feeRate": 0.5}, "REQ_001"),
        ({"descriptor": source, "destination": destination, "maxPerAddressSat": 545}, "REQ_001"),
        ({"descriptor": source, "destination": "wpkh(" + "nonsense"}, "SCAN_005"),
    ]
    for body, code in cases:
        r = await client.post(PLAN, json=body, headers=tenant.auth("secret_live"))
        assert (r.status_code, r.json()["error"]["code"]) == (400, code), (body, r.text)
    r = await client.post(
        PLAN, json={"descriptor": source, "destination": destination}, headers=tenant.auth("secret_live")
    )
    assert r.status_code == 200 and r.json()["data"]["steps"] == []  # an empty wallet: nothing to move


async def test_a_taproot_wallet_with_a_script_tree_is_planned_as_key_path_spends(
    planner: Any, chain: EsploraChain, conformance_dir: Path
) -> None:
    """The inputs carry the tree's Merkle root (embit signs the key path only with it) and the
    leaf key's derivation with its leaf hash; a destination with a tree is refused."""
    client, tenant = planner
    source, destination, mnemonic = wallets(conformance_dir)
    root = embit_bip32.HDKey.from_seed(bip39.mnemonic_to_seed(mnemonic))
    backup = root.derive("m/86h/0h/1h").to_public().to_base58()
    internal = destination.removeprefix("tr(").removesuffix(")")
    tree = f"tr({internal},pk([{FINGERPRINT}/86h/0h/1h]{backup}/<0;1>/*))"
    chain.pay(address_at(tree, 0, 0).script_pubkey, 2 * BTC, 800_000)
    r = await client.post(PLAN, json={"descriptor": tree, "destination": source}, headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    (step,) = r.json()["data"]["steps"]
    ours = decode_psbt(step["psbt"])
    (psbt_in,) = ours.inputs
    merkle_root, leaves = parse_descriptor(tree).taproot_tree(0, 0)
    assert merkle_root is not None and psbt_in.tap_merkle_root == merkle_root
    origins = {o.origin.path: o.leaf_hashes for o in psbt_in.tap_bip32_derivations.values()}
    assert origins[(86 | HARDENED, HARDENED, HARDENED, 0, 0)] == ()  # the internal key: key path
    assert len(origins[(86 | HARDENED, HARDENED, 1 | HARDENED, 0, 0)]) == 1  # the leaf key: its leaf
    assert psbt_in.non_witness_utxo is None  # taproot signs the amounts of every input
    theirs = PSBT.parse(base64.b64decode(step["psbt"]))
    assert theirs.sign_with(root) == 1

    r = await client.post(PLAN, json={"descriptor": source, "destination": tree}, headers=tenant.auth("secret_live"))
    assert (r.status_code, r.json()["error"]["code"]) == (400, "REQ_001")
