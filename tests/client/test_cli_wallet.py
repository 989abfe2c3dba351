"""``qday-client scan --descriptor`` and ``qday-client plan`` end to end: the command against a
real server whose Bitcoin source is a loopback Esplora serving a chain the test builds.

The wallet is BIP-84's test account with its key origin (``[73c5da0a/84h/0h/0h]``), the
destination BIP-86's account of the same seed (the helpers of tests/api/test_plan_migration.py).
A live API key is used, as the vectors are mainnet keys. The commands run in a worker thread
so the loopback, on the test's event loop, answers the server meanwhile. Private keys are
refused by the client itself: nothing reaches the server, and the key is never printed.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from chains.bitcoin.descriptors import parse_descriptor
from chains.bitcoin.psbt import parse_psbt
from qday_client import QdayClient
from qday_client.cli import main as client_main
from qday_client.wallet_reports import ADDRESS_COLUMNS, COIN_COLUMNS, PLAN_COLUMNS, STEP_COLUMNS
from tests.api.test_plan_migration import BTC, address_at, wallets
from tests.chain_clients.loopback import Loopback
from tests.client.support import PASSWORD, new_account
from tests.client.test_cli_end_to_end import Cli
from tests.custody.support import shared_softhsm_conf
from tests.esplora_chain import EsploraChain
from tests.support import ServerProcess


class WalletCli:
    """``Cli`` whose commands run in a worker thread (the event loop stays free to serve Esplora)."""

    def __init__(self, cli: Cli) -> None:
        self.cli = cli

    async def run(self, *args: str, expect: int = 0) -> tuple[str, str]:
        """Run ``qday-client ARGS``; assert its exit status; return (stdout, stderr)."""
        return await asyncio.to_thread(self.cli.run, *args, expect=expect)


async def live_key(base_url: str) -> str:
    """A secret live-environment key of a new account (the BIP vectors are mainnet wallets)."""
    account = await new_account(base_url)
    async with QdayClient(base_url=base_url) as client:
        login = await client.login(account.email, PASSWORD)
        return (await client.create_api_key("wallet", "secret", "live", token=login.token)).key


@pytest.fixture(scope="module")
async def esplora() -> AsyncIterator[Loopback]:
    loopback = await Loopback().start()
    yield loopback
    await loopback.stop()


@pytest.fixture(scope="module")
def wallet_server(esplora: Loopback, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``qday serve`` whose live Bitcoin source is the loopback Esplora."""
    shared_softhsm_conf()
    proc = ServerProcess(
        tmp_path_factory.mktemp("wallet-server"),
        env={
            "QDAY_RATE_LIMIT_MULTIPLIER": "1000",
            "QDAY_BITCOIN_ESPLORA_URL": esplora.url,
            "QDAY_FAMILY_CHAINS": "bitcoin",
            "QDAY_FAMILY_WAIT_SECONDS": "5",
        },
    )
    yield proc
    proc.stop()


@pytest.fixture
def chain(esplora: Loopback) -> EsploraChain:
    esplora.requests.clear()
    return EsploraChain(esplora)


@pytest.fixture
async def wallet_cli(
    wallet_server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> WalletCli:
    cli = Cli(tmp_path, wallet_server.base_url, capsys, monkeypatch)
    monkeypatch.setenv("QDAY_API_KEY", await live_key(wallet_server.base_url))
    return WalletCli(cli)


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


async def test_scan_descriptor_writes_json_and_csv_reports(
    wallet_cli: WalletCli, chain: EsploraChain, conformance_dir: Path, tmp_path: Path
) -> None:
    source, _, _ = wallets(conformance_dir)
    receive0, receive3, change1 = (address_at(source, branch, index) for branch, index in ((0, 0), (0, 3), (1, 1)))
    chain.pay(receive0.script_pubkey, 50_000, 800_000)
    first = chain.pay(receive3.script_pubkey, 70_000, 800_010)[0]
    chain.spend(first, parse_descriptor(source).expand(3, 0).keys[0].pubkey, change1.script_pubkey, 800_020)
    chain.pay(receive3.script_pubkey, 30_000, 800_030)  # reused after its key was shown
    used = {str(receive0), str(receive3), str(change1)}

    (tmp_path / "wallet.txt").write_text(source + "\n")
    _, err = await wallet_cli.run("scan", "--descriptor", "@wallet.txt", "--gap-limit", "5", "--output", "wallet.json")
    report = json.loads((tmp_path / "wallet.json").read_text())
    assert report["descriptor"] == parse_descriptor(source).canonical()
    assert {a["address"] for a in report["addresses"]} == used
    summary = report["summary"]
    assert (summary["balanceSat"], summary["exposedBalanceSat"], summary["usedAddresses"]) == (149_000, 30_000, 3)
    assert err.strip() == (
        f"balance 149000 sat, exposed 30000 sat; 3 used of {summary['derivedAddresses']} derived addresses "
        f"in {summary['lookupRounds']} lookup rounds; report: wallet.json"
    )

    out, err = await wallet_cli.run("scan", "--descriptor", source, "--gap-limit", "5", "--coins-csv", "coins.csv")
    assert out.splitlines()[0].split(",") == list(ADDRESS_COLUMNS)
    rows = {r["address"]: r for r in _csv(out)}
    assert set(rows) == used
    exposed = rows[str(receive3)]
    assert (exposed["branch"], exposed["index"], exposed["publicKeyExposed"], exposed["exposure"]) == (
        "receive",
        "3",
        "true",
        "EXPOSED_AT_REST",
    )
    assert rows[str(receive0)]["publicKeyExposed"] == "false"
    coins_text = (tmp_path / "coins.csv").read_text()
    assert coins_text.splitlines()[0].split(",") == list(COIN_COLUMNS)
    coins = {(c["address"], c["value"], c["exposure"]) for c in _csv(coins_text)}
    assert coins == {
        (str(receive0), "50000", "EXPOSED_ON_SPEND"),
        (str(receive3), "30000", "EXPOSED_AT_REST"),
        (str(change1), "69000", "EXPOSED_ON_SPEND"),
    }
    assert err.rstrip().endswith("; coins: coins.csv")


async def test_plan_writes_binary_psbts_and_replaces_a_plan_only_with_force(
    wallet_cli: WalletCli, chain: EsploraChain, conformance_dir: Path, tmp_path: Path
) -> None:
    source, destination, _ = wallets(conformance_dir)
    reused = address_at(source, 0, 1)  # spent from (its key shown) and paid again: an exposed coin
    first = chain.pay(reused.script_pubkey, 2 * BTC, 800_000)[0]
    chain.spend(
        first, parse_descriptor(source).expand(1, 0).keys[0].pubkey, address_at(source, 1, 0).script_pubkey, 800_001
    )
    chain.pay(reused.script_pubkey, BTC, 800_002)
    chain.pay(address_at(source, 0, 0).script_pubkey, 3 * BTC, 800_003)
    (tmp_path / "destination.txt").write_text(destination)
    options = ("--destination", "@destination.txt", "--fee-rate", "2", "--gap-limit", "3", "--out-dir", "plan")
    directory = tmp_path / "plan"

    out, err = await wallet_cli.run("plan", "--descriptor", source, *options)
    plan = json.loads((directory / "plan.json").read_text())
    steps = plan["steps"]
    assert len(steps) >= 2 and [i["exposure"] for i in steps[0]["inputs"]] == ["EXPOSED_AT_REST"]
    step_files = [f"step-{s['order']}.psbt" for s in steps]
    assert sorted(p.name for p in directory.iterdir()) == sorted(["plan.csv", "plan.json", *step_files])
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in directory.iterdir())
    for step, name in zip(steps, step_files, strict=True):
        raw = (directory / name).read_bytes()
        assert raw.startswith(b"psbt\xff") and base64.b64encode(raw).decode() == step["psbt"]
        tx = parse_psbt(raw).transaction
        assert [(i.prev_txid, i.vout) for i in tx.inputs] == [(i["txid"], i["vout"]) for i in step["inputs"]]
        assert [o.value for o in tx.outputs] == [o["valueSat"] for o in step["outputs"]]
    payments = [
        {"order": s["order"], **o, "feeSat": s["feeSat"], "vsize": s["vsize"]} for s in steps for o in s["outputs"]
    ]
    plan_csv = (directory / "plan.csv").read_text()
    assert plan_csv.splitlines()[0].split(",") == list(PLAN_COLUMNS)
    assert _csv(plan_csv) == [{c: str(p[c]) for c in PLAN_COLUMNS} for p in payments]
    table = out.splitlines()
    assert table[0].split() == list(STEP_COLUMNS) and len(table) == 2 + len(steps)
    assert [line.split()[-1] for line in table[2:]] == step_files
    assert err.startswith(f"{len(steps)} steps: {plan['totals']['inSat']} sat in") and "files in plan" in err

    # a plan is there: refused without --force, before the server is asked, nothing changed
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    lookups = chain.loopback.count()
    _, err = await wallet_cli.run("plan", "--descriptor", source, *options, expect=2)
    assert "already holds a plan" in err and "--force" in err
    assert chain.loopback.count() == lookups
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before

    # --force replaces it: an empty wallet's plan, and no step file of the old plan left to sign
    empty = source.replace("wpkh(", "pkh(")
    out, err = await wallet_cli.run("plan", "--descriptor", empty, *options, "--force")
    assert sorted(p.name for p in directory.iterdir()) == ["plan.csv", "plan.json"]
    assert json.loads((directory / "plan.json").read_text())["steps"] == []
    assert out.strip() == "(none)" and err.startswith("0 steps")


@pytest.fixture
async def recorder() -> AsyncIterator[Loopback]:
    """A stand-in API server that records whatever reaches it."""
    loopback = await Loopback().start()
    yield loopback
    await loopback.stop()


async def test_private_keys_are_refused_before_anything_is_sent(
    recorder: Loopback,
    esplora: Loopback,
    conformance_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cli = WalletCli(Cli(tmp_path, recorder.url, capsys, monkeypatch))
    monkeypatch.setenv("QDAY_API_KEY", "sk_live_placeholder")
    source, destination, _ = wallets(conformance_dir)
    xprv = json.loads((conformance_dir / "wallets" / "bip32.json").read_text())["valid_vectors"][0]["chains"][0][
        "ext_prv"
    ]
    wif = json.loads((conformance_dir / "wallets" / "bip84.json").read_text())["addresses"][0]["privkey"]
    mistyped = xprv[:-1] + ("2" if xprv[-1] != "2" else "3")  # a broken checksum: still not sent
    (tmp_path / "secret.txt").write_text(f"wpkh([73c5da0a/84h/0h/0h]{wif})\n")
    lookups = esplora.count()
    cases = [
        (("scan", "--descriptor", xprv), xprv),
        (("scan", "--descriptor", f"wpkh({xprv}/0/*)"), xprv),
        (("scan", "--descriptor", mistyped), mistyped),
        (("scan", "--descriptor", "@secret.txt"), wif),
        (("plan", "--descriptor", source, "--destination", f"tr({xprv}/<0;1>/*)", "--out-dir", "plan"), xprv),
        (("plan", "--descriptor", "@secret.txt", "--destination", destination, "--out-dir", "plan"), wif),
    ]
    for args, secret in cases:
        out, err = await cli.run(*args, expect=2)
        assert "private key" in err and "nothing was sent" in err, err
        assert secret not in out + err
    assert recorder.requests == [] and esplora.count() == lookups
    assert not (tmp_path / "plan").exists()


def test_scan_takes_one_target(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        client_main(["scan", "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", "--descriptor", "xpub"])
    assert exited.value.code == 2 and "not allowed with" in capsys.readouterr().err


async def test_the_sdk_watches_a_wallet(
    wallet_server: ServerProcess, chain: EsploraChain, conformance_dir: Path
) -> None:
    source, _, _ = wallets(conformance_dir)
    chain.pay(address_at(source, 0, 1).script_pubkey, 12_000, 800_000)
    async with QdayClient(await live_key(wallet_server.base_url), base_url=wallet_server.base_url) as client:
        watched = await client.watch_descriptor(source, label="treasury", gap_limit=4)
        assert watched.descriptor == parse_descriptor(source).canonical() and watched.label == "treasury"
        assert watched.summary is not None and watched.summary.balance_sat == 12_000
        assert [w.id for w in await client.watched_descriptors()] == [watched.id]
        await client.unwatch_descriptor(watched.id)
        assert await client.watched_descriptors() == []
