"""The daily rescoring of watched wallets (``pipelines.wallets.watched_wallets``) against a
loopback Esplora serving a built chain of real transactions (``tests.esplora_chain``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dagster import materialize

from chains.bitcoin.wallet import parse_wallet
from chains.codecs.bitcoin import BitcoinAddress
from chains.environment import Environment
from chains.registry import Network
from core.ids import new_id
from pipelines.resources import EndpointChainDataResource, SnapshotChainDataResource
from pipelines.wallets import watched_wallets
from storage.models import WatchedDescriptor
from storage.sql_descriptor_watch import SqlDescriptorWatchStore
from tests.esplora_chain import EsploraChain
from tests.pipelines.support import DataDir, ThreadedLoopback, evm_address


@pytest.fixture
def zpub(conformance_dir: Path) -> str:
    return json.loads((conformance_dir / "wallets" / "bip84.json").read_text())["account"]["xpub"]


def receive(zpub: str, index: int) -> BitcoinAddress:
    script = parse_wallet(zpub, Network.MAINNET).descriptors[0].expand(index, 0).script_pubkey
    return BitcoinAddress.from_script_pubkey(script)


def chain_data(tmp_path: Path, esplora: ThreadedLoopback) -> EndpointChainDataResource:
    config = tmp_path / "qday.toml"
    settings = "[chains.settings]\ntimeout = 3\nretry_attempts = 1\n"
    config.write_text(f'{settings}\n[chains.live.endpoints]\nbitcoin_esplora = "{esplora.url}"\n')
    return EndpointChainDataResource(config_file=str(config), family_chains=["bitcoin"])


def watch_wallet(data_dir: DataDir, account_id: str, descriptor: str, gap_limit: int) -> WatchedDescriptor:
    entry = WatchedDescriptor(
        new_id("wdw"), account_id, Environment.LIVE, descriptor, None, gap_limit, 0, None, None, datetime.now(UTC)
    )
    stored = data_dir.run(lambda db: SqlDescriptorWatchStore(db).add(entry, 1_000_000))
    assert stored is not None
    return stored


def stored_wallet(data_dir: DataDir, entry_id: str) -> tuple[int, dict | None]:
    conn = data_dir.connect()
    try:
        derived, summary = conn.execute(
            "SELECT derived_addresses, summary FROM watched_descriptors WHERE id = ?", (entry_id,)
        ).fetchone()
        return derived, None if summary is None else json.loads(summary)
    finally:
        conn.close()


def test_a_watched_wallet_is_rescanned_published_and_summarised(
    data_dir: DataDir, esplora: ThreadedLoopback, tmp_path: Path, zpub: str
) -> None:
    chain = EsploraChain(esplora.server)
    chain.pay(receive(zpub, 0).script_pubkey, 40_000, 800_000)
    chain.pay(receive(zpub, 2).script_pubkey, 60_000, 800_001)
    account = data_dir.account("wallets@example.com")
    entry = watch_wallet(data_dir, account, zpub, 5)
    resources = data_dir.resources(chain_data=chain_data(tmp_path, esplora))
    result = materialize([watched_wallets], partition_key=data_dir.today.isoformat(), resources=resources)
    assert result.success
    derived, summary = stored_wallet(data_dir, entry.id)
    assert summary is not None
    assert (summary["usedAddresses"], summary["balanceSat"], derived) == (2, 100_000, summary["derivedAddresses"])
    published = {(row[3], row[7]) for row in data_dir.results()}
    assert published == {(str(receive(zpub, 0)), "pipeline"), (str(receive(zpub, 2)), "pipeline")}
    con = data_dir.analytics.connect()
    (row,) = con.execute(
        "SELECT watch_id, used_addresses, balance_sat, exposure_complete FROM wallet_risk WHERE scan_date = ?",
        [data_dir.today],
    ).fetchall()
    assert row == (entry.id, 2, 100_000, False)  # no exposure index here: not complete


def test_a_rescan_derives_only_what_the_plan_cap_leaves(
    data_dir: DataDir, esplora: ThreadedLoopback, tmp_path: Path, zpub: str
) -> None:
    """A free account (cap 100) watching 95 addresses: its wallet may derive 5 of the 10 it needs."""
    EsploraChain(esplora.server)
    account = data_dir.account("capped@example.com")
    for n in range(95):
        data_dir.watch(account, "ethereum", evm_address(10_000 + n))
    entry = watch_wallet(data_dir, account, zpub, 5)
    resources = data_dir.resources(chain_data=chain_data(tmp_path, esplora))
    assert materialize([watched_wallets], partition_key=data_dir.today.isoformat(), resources=resources).success
    derived, summary = stored_wallet(data_dir, entry.id)
    assert derived == 5 and summary is not None and summary["derivedAddresses"] == 5
    con = data_dir.analytics.connect()
    (complete,) = con.execute("SELECT exposure_complete FROM wallet_risk WHERE watch_id = ?", [entry.id]).fetchone()
    assert complete is False


def test_a_snapshot_source_cannot_scan_wallets_and_says_so(data_dir: DataDir, tmp_path: Path, zpub: str) -> None:
    account = data_dir.account("snap@example.com")
    watch_wallet(data_dir, account, zpub, 5)
    snapshot = tmp_path / "snapshot.jsonl"
    snapshot.write_text("")
    resources = data_dir.resources(chain_data=SnapshotChainDataResource(snapshot_file=str(snapshot)))
    result = materialize([watched_wallets], partition_key=data_dir.today.isoformat(), resources=resources)
    (materialization,) = result.asset_materializations_for_node("watched_wallets")
    assert "snapshot" in materialization.metadata["skipped"].value
