"""Key families in the pipelines (issue 14): a key revealed anywhere marks every watched
address of its family, exactly as the scan endpoint's ``with_family`` does; the evidence
lands in ``key_exposure``; a family chain that could not be observed makes the verdict
incomplete. Replayed from snapshots (real address derivations of one key)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from dagster import DagsterInstance, DagsterRunStatus, build_sensor_context, materialize

from chains.codecs.detect import parse_address
from chains.environment import Environment
from chains.evidence import Coverage, with_family
from chains.keys import KECCAK_CHAINS, KeyForm, family_group, family_key, key_addresses, parse_public_key, siblings
from chains.observation import EvidenceKind, Exposure, ExposureEvidence, Observation
from chains.registry import CHAINS, Chain
from cli.main import main
from pipelines.assets import OBSERVE_ASSETS, SCORE_ASSETS, newly_watched_scores, risk_checks
from pipelines.automation import observed_families_sensor, score_requests
from pipelines.definitions import build_definitions
from pipelines.families import FamilyLinks, family_links, link_frame, sibling_sources
from pipelines.rescore import DAILY, Batch, Target, observation_rows, observed_batch
from pipelines.resources import SnapshotChainDataResource
from pipelines.sources import read_snapshot, write_snapshot
from scoring import PriceQuote, load_readiness, score_observation
from services.observer import limits_of
from services.settings import load_settings
from storage.scan_records import scan_record
from tests.pipelines.support import (
    DataDir,
    btc_observation,
    cosmos_observation,
    evm_address,
    evm_observation,
    partition,
)

#: The key whose private key is 1 (the generator point): its forms are public test vectors.
KEY = parse_public_key(bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"))
FORMS = {form.form: form.text for form in key_addresses(KEY)}
P2PKH, P2WPKH, NESTED, COSMOS = (FORMS[f] for f in (KeyForm.P2PKH, KeyForm.P2WPKH, KeyForm.P2SH_P2WPKH, KeyForm.COSMOS))
SPEND_TXID = "a1075db55d416d3ca199f55b6084e2115b9345e16c5cf302fc80e9d5fbf5d48d"
SCORE = [*SCORE_ASSETS, *risk_checks]
ACCOUNT = "a@example.com"


def run_day(data_dir: DataDir, snapshot: Path, observe: list[str], score: list[str], **chain_data) -> dict:
    """The observe phase of ``observe`` chains, then the score phase of ``score`` chains,
    for the runs' today; each run's success, by chain and phase."""
    chain_data.setdefault("outage_retries", 0)
    resources = data_dir.resources(chain_data=SnapshotChainDataResource(snapshot_file=str(snapshot), **chain_data))
    done = {}
    for chain in observe:
        key = partition(chain, data_dir.today)
        done[("observe", chain)] = materialize(
            OBSERVE_ASSETS, partition_key=key, resources=resources, raise_on_error=False
        ).success
    for chain in score:
        key = partition(chain, data_dir.today)
        done[("score", chain)] = materialize(SCORE, partition_key=key, resources=resources).success
    return done


def published(data_dir: DataDir, chain: str, address: str) -> dict:
    (row,) = [r for r in data_dir.results() if (r[2], r[3]) == (chain, address)]
    return json.loads(row[4])


def risk_row(data_dir: DataDir, chain: str, address: str) -> dict:
    folder = data_dir.analytics.partition_dir("address_risk", data_dir.today, chain)
    frame = pl.read_parquet(sorted(folder.glob("*.parquet")))  # the daily file, or a sensor run's
    (row,) = frame.filter(pl.col("address") == address).with_columns(pl.col("balance").cast(pl.Int128())).to_dicts()
    return row


def what_a_scan_stores(
    data_dir: DataDir,
    own: Observation,
    found: list[Observation],
    checked: tuple[str, ...],
    unavailable: tuple[str, ...],
) -> dict:
    """The result the scan endpoint builds for ``own`` observed with ``found`` siblings
    (``ChainObserver.family``), at the price and time of the pipeline's row."""
    merged = with_family(own, found)
    row = risk_row(data_dir, own.chain, own.address)
    price = None if row["price_usd"] is None else PriceQuote(Decimal(str(row["price_usd"])), row["price_as_of"])
    coverage = Coverage(checked, unavailable, limits_of(merged))
    record = scan_record(
        merged,
        score_observation(merged, price, load_readiness()),
        data_dir.account(ACCOUNT),
        Environment.LIVE,
        row["scanned_at"],
        "pipeline",
        coverage,
    )
    return json.loads(record.result)


def keccak_rest(*seen: str) -> tuple[str, ...]:
    return tuple(c.value for c in CHAINS if c in KECCAK_CHAINS and c.value not in seen)


# --- end to end -------------------------------------------------------------------------


def test_an_account_that_signed_on_base_is_exposed_on_ethereum(data_dir: DataDir, tmp_path: Path) -> None:
    account = data_dir.account(ACCOUNT)
    address = evm_address(0xA11CE)
    data_dir.watch(account, "ethereum", address)
    own = evm_observation(address, 2 * 10**18, nonce=0)  # never signed on ethereum: exposed on spend
    sibling = evm_observation(address, 10**17, nonce=3, chain="base")  # signed three times on base
    write_snapshot(tmp_path / "s.jsonl", [own, sibling])
    done = run_day(data_dir, tmp_path / "s.jsonl", ["ethereum", "base"], ["ethereum"])
    assert all(done.values())

    result = published(data_dir, "ethereum", address)
    assert result["publicKeyExposed"] is True
    assert result["exposureEvidence"] == [
        {"chain": "base", "address": address, "kind": "nonce", "txid": None, "blockHeight": None}
    ]
    assert result["coverage"] == {
        "checked": ["ethereum", "base"],
        "unavailable": list(keccak_rest("ethereum", "base")),
        "limits": [],
    }
    assert result["exposureComplete"] is False  # 14 chains of the family were not observed
    # exactly what the scan endpoint stores for the same address, siblings and price
    expected = what_a_scan_stores(data_dir, own[1], [sibling[1]], ("ethereum", "base"), keccak_rest("ethereum", "base"))
    assert result == expected

    row = risk_row(data_dir, "ethereum", address)
    assert (row["observed_exposure"], row["exposure"]) == ("EXPOSED_ON_SPEND", "EXPOSED_AT_REST")
    assert row["family"] == "keccak:" + parse_address(address, "ethereum").payload.hex()
    con = data_dir.analytics.connect()
    members = con.execute("SELECT family, chain, address, kind FROM key_exposure ORDER BY chain").fetchall()
    assert members == [(row["family"], "base", address, "nonce"), (row["family"], "ethereum", address, None)]
    assert con.execute("SELECT count(*) FROM address_observations WHERE chain = 'base'").fetchall() == [(0,)]


@pytest.fixture
def key_hash_world(data_dir: DataDir, tmp_path: Path) -> tuple[DataDir, Path, dict[str, Observation]]:
    """A watched P2PKH never spent from, whose key was spent from as P2WPKH (with the
    transaction), its nested-segwit and Cosmos siblings unused; the nested address is
    watched too."""
    account = data_dir.account(ACCOUNT)
    data_dir.watch(account, "bitcoin", P2PKH)
    data_dir.watch(account, "bitcoin", NESTED)
    spend = ExposureEvidence("bitcoin", P2WPKH, EvidenceKind.SPEND, SPEND_TXID, 850_000)
    recorded = [
        btc_observation(P2PKH, 5 * 10**8),
        btc_observation(P2WPKH, 0, spent=1, evidence=(spend,)),
        btc_observation(NESTED, 0),
        cosmos_observation(COSMOS),
    ]
    write_snapshot(tmp_path / "btc.jsonl", recorded)
    return data_dir, tmp_path / "btc.jsonl", {o.address: o for _, o in recorded}


def test_a_p2pkh_whose_key_was_spent_as_p2wpkh_is_exposed(key_hash_world, capsys) -> None:
    data_dir, snapshot, seen = key_hash_world
    done = run_day(data_dir, snapshot, ["bitcoin", "cosmos"], ["bitcoin", "cosmos"])
    assert all(done.values())

    result = published(data_dir, "bitcoin", P2PKH)
    assert result["publicKeyExposed"] is True and result["exposureComplete"] is True
    assert result["exposureEvidence"] == [
        {"chain": "bitcoin", "address": P2WPKH, "kind": "spend", "txid": SPEND_TXID, "blockHeight": 850_000}
    ]
    assert result["coverage"] == {"checked": ["bitcoin", "cosmos"], "unavailable": [], "limits": []}
    found = [seen[str(a)] for a in siblings(parse_address(P2PKH, "bitcoin"))]
    assert result == what_a_scan_stores(data_dir, seen[P2PKH], found, ("bitcoin", "cosmos"), ())
    # A P2SH address has no family of its own (as in a scan): the nested address, unused,
    # is not exposed by the P2PKH's key and is not published (SCAN_003), though it was
    # observed once, for both.
    assert [r[3] for r in data_dir.results()] == [P2PKH]
    nested = risk_row(data_dir, "bitcoin", NESTED)
    assert nested["exposure"] == "EXPOSED_ON_SPEND" and nested["family"] == f"bitcoin:{NESTED}"
    assert nested["coverage_checked"] == ["bitcoin"] and not nested["exposure_complete"]  # the index limit

    # the join of `qday sql`: watched address -> its family's evidence
    query = (
        "SELECT w.address, k.chain, k.address AS revealed_by, k.kind, k.txid FROM watchlist w"
        " JOIN address_risk_latest r USING (environment, chain, address)"
        " JOIN key_exposure k ON k.environment = r.environment AND k.family = r.family"
        " AND k.scan_date = r.scan_date WHERE k.kind IS NOT NULL ORDER BY w.address"
    )
    capsys.readouterr()
    assert main(["sql", "--data-dir", str(data_dir.root), "-c", query]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows == [
        ["address", "chain", "revealed_by", "kind", "txid"],
        [P2PKH, "bitcoin", P2WPKH, "spend", SPEND_TXID],
    ]
    con = data_dir.analytics.connect()
    members = con.execute(
        "SELECT chain, address FROM key_exposure_latest WHERE family = ? ORDER BY chain, address",
        [family_key(parse_address(P2PKH, "bitcoin"))],
    ).fetchall()
    assert members == [("bitcoin", P2PKH), ("bitcoin", NESTED), ("bitcoin", P2WPKH), ("cosmos", COSMOS)]


def test_a_family_chain_that_failed_makes_the_verdict_incomplete(key_hash_world) -> None:
    data_dir, snapshot, _ = key_hash_world
    done = run_day(data_dir, snapshot, ["bitcoin", "cosmos"], ["bitcoin"], unavailable_chains=["cosmos"])
    assert done == {("observe", "bitcoin"): True, ("observe", "cosmos"): False, ("score", "bitcoin"): True}
    result = published(data_dir, "bitcoin", P2PKH)
    assert result["publicKeyExposed"] is True  # the spend was seen on Bitcoin itself
    assert result["coverage"] == {"checked": ["bitcoin"], "unavailable": ["cosmos"], "limits": []}
    assert result["exposureComplete"] is False
    assert not risk_row(data_dir, "bitcoin", P2PKH)["exposure_complete"]


def test_a_key_seen_nowhere_is_not_exposed_and_says_what_it_could_not_see(data_dir: DataDir, tmp_path: Path) -> None:
    account = data_dir.account(ACCOUNT)
    data_dir.watch(account, "bitcoin", P2WPKH)
    recorded = [
        btc_observation(P2WPKH, 10**6),
        btc_observation(P2PKH, 0),
        btc_observation(NESTED, 0),
        cosmos_observation(COSMOS, 10**6),
    ]
    write_snapshot(tmp_path / "s.jsonl", recorded)
    assert all(run_day(data_dir, tmp_path / "s.jsonl", ["bitcoin", "cosmos"], ["bitcoin"]).values())
    result = published(data_dir, "bitcoin", P2WPKH)
    assert result["publicKeyExposed"] is False and result["exposureEvidence"] == []
    assert result["coverage"]["checked"] == ["bitcoin", "cosmos"] and result["coverage"]["unavailable"] == []
    assert result["coverage"]["limits"] and result["exposureComplete"] is False  # the Bitcoin-index limit
    own = recorded[0][1]
    assert result == what_a_scan_stores(data_dir, own, [o for _, o in recorded[1:]], ("bitcoin", "cosmos"), ())


def test_a_newly_watched_address_is_linked_on_the_spot(data_dir: DataDir, tmp_path: Path) -> None:
    account = data_dir.account(ACCOUNT)
    address = evm_address(0xB0B)
    entry = data_dir.watch(account, "ethereum", address)
    own = evm_observation(address, 10**18, nonce=0)
    sibling = evm_observation(address, 0, nonce=1, chain="arbitrum")
    write_snapshot(tmp_path / "s.jsonl", [own, sibling])  # the 14 other family chains are "down"
    chain_data = SnapshotChainDataResource(snapshot_file=str(tmp_path / "s.jsonl"))
    config = {"ops": {"newly_watched_scores": {"config": {"watch_ids": [entry.id]}}}}
    result = materialize([newly_watched_scores], run_config=config, resources=data_dir.resources(chain_data=chain_data))
    assert result.success  # a sibling chain that is down never fails the run
    stored = published(data_dir, "ethereum", address)
    assert stored["publicKeyExposed"] is True
    assert [e["chain"] for e in stored["exposureEvidence"]] == ["arbitrum"]
    assert stored["coverage"]["checked"] == ["ethereum", "arbitrum"]
    assert stored["coverage"]["unavailable"] == list(keccak_rest("ethereum", "arbitrum"))
    assert stored == what_a_scan_stores(
        data_dir, own[1], [sibling[1]], ("ethereum", "arbitrum"), keccak_rest("ethereum", "arbitrum")
    )
    con = data_dir.analytics.connect()
    assert con.execute("SELECT chain, kind, batch FROM key_exposure ORDER BY chain").fetchall() == [
        ("arbitrum", "nonce", "new"),
        ("ethereum", None, "new"),
    ]


def test_the_score_phase_waits_for_the_family_groups_observe_runs(key_hash_world) -> None:
    data_dir, snapshot, _ = key_hash_world
    resources = data_dir.resources(chain_data=SnapshotChainDataResource(snapshot_file=str(snapshot)))
    today = data_dir.today
    with DagsterInstance.ephemeral() as instance:

        def requested() -> list[str]:
            return sorted(str(r.partition_key) for r in score_requests(instance, today))

        def run(assets, chain: str) -> None:
            key = partition(chain, today)
            assert materialize(assets, partition_key=key, resources=resources, instance=instance).success

        assert requested() == []
        run(OBSERVE_ASSETS, "bitcoin")
        observe_job = build_definitions(load_settings(env={})).resolve_job_def("observe_watched")
        queued = instance.create_run_for_job(
            observe_job, status=DagsterRunStatus.NOT_STARTED, tags={"dagster/partition": partition("cosmos", today)}
        )
        assert requested() == []  # cosmos is about to be observed
        instance.report_run_canceled(queued)
        assert requested() == [partition("bitcoin", today)]  # cosmos never ran: it is unavailable
        run(OBSERVE_ASSETS, "cosmos")
        assert requested() == [partition("bitcoin", today), partition("cosmos", today)]
        run(SCORE, "bitcoin")
        run(SCORE, "cosmos")
        assert requested() == []  # scored since the group's last observation
        run(OBSERVE_ASSETS, "cosmos")  # a re-run of one chain re-scores its whole family group
        assert requested() == [partition("bitcoin", today), partition("cosmos", today)]

        context = build_sensor_context(instance=instance, resources={"clock": resources["clock"]})
        result = observed_families_sensor(context)
        keys = {r.run_key for r in result.run_requests}
        assert len(keys) == 2 and all(k.startswith("score-") for k in keys)


# --- the pieces -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, chain",
    [
        (FORMS[KeyForm.EVM], "ethereum"),
        (FORMS[KeyForm.EVM], "bsc"),
        (FORMS[KeyForm.TRON], "tron"),
        (P2PKH, "bitcoin"),
        (P2WPKH, "bitcoin"),
        (COSMOS, "cosmos"),
    ],
)
def test_siblings_on_a_chain_are_the_keys_siblings_there(text: str, chain: str) -> None:
    address = parse_address(text, chain)
    for other in CHAINS:
        expected = [str(s) for s in siblings(address) if s.chain is other]
        assert [str(s) for s in siblings(address, on=other)] == expected, other
    assert {family_key(s) for s in siblings(address) if s.address_type != "p2sh"} == {family_key(address)}
    assert {s.chain for s in siblings(address)} <= set(family_group(address.chain))


def test_sibling_sources_name_every_chain_a_sibling_can_come_from() -> None:
    for form in key_addresses(KEY):
        if form.address is None:
            continue  # P2PK: no address, never watched as such
        for chain in CHAINS:
            if siblings(form.address, on=chain):
                assert form.address.chain in sibling_sources(chain), (form.form, chain)
    assert sibling_sources(Chain.ETHEREUM) == tuple(c for c in KECCAK_CHAINS if c is not Chain.ETHEREUM)
    assert sibling_sources(Chain.BITCOIN) == (Chain.BITCOIN, Chain.COSMOS)
    assert sibling_sources(Chain.COSMOS) == (Chain.BITCOIN,) and sibling_sources(Chain.SOLANA) == ()


def test_family_groups_are_symmetric() -> None:
    for chain in CHAINS:
        assert chain in family_group(chain)
        for other in family_group(chain):
            assert family_group(other) == family_group(chain)
    assert family_group(Chain.SOLANA) == (Chain.SOLANA,)


def _members(found: list[tuple[Observation, tuple[str, ...]]]) -> dict[str, pl.LazyFrame]:
    """``key_exposure`` rows of ``found`` (each observed for its families), by chain."""
    batch = Batch(date(2026, 11, 22), DAILY, "r")
    rows: dict[str, list[pl.DataFrame]] = {}
    for observation, families in found:
        target = Target(observation.address, False, families)
        typed = parse_address(observation.address, observation.chain)
        members = observed_batch([observation], [(target, typed)], Environment.LIVE, batch).members
        rows.setdefault(observation.chain, []).append(members)
    return {chain: pl.concat(frames).lazy() for chain, frames in rows.items()}


@pytest.mark.parametrize("exposed_on", ["none", "own", "sibling", "both"])
def test_link_frame_is_with_family(exposed_on: str) -> None:
    """The vectorised linkage gives what ``with_family`` gives, evidence order included."""
    address = evm_address(0xFA)
    family = family_key(parse_address(address, "ethereum"))
    own = evm_observation(address, 10**18, nonce=2 if exposed_on in ("own", "both") else 0)[1]
    others = [
        evm_observation(address, 0, nonce=1 if exposed_on in ("sibling", "both") else 0, chain=c.value)[1]
        for c in (Chain.AVALANCHE, Chain.BASE, Chain.POLYGON)  # registry order: base, polygon, avalanche
    ]
    members = _members([(own, (family,)), *((o, (family,)) for o in others)])
    batch = Batch(date(2026, 11, 22), DAILY, "r")
    rows = observation_rows([own], Environment.LIVE, batch, [family])
    linked = link_frame(rows, family_links(members)).row(0, named=True)
    merged = with_family(own, sorted(others, key=lambda o: list(CHAINS).index(Chain(o.chain))))
    assert Exposure(linked["exposure"]) is merged.exposure
    assert [
        ExposureEvidence(e["chain"], e["address"], EvidenceKind(e["kind"]), e["txid"], e["block_height"])
        for e in linked["exposure_evidence"]
    ] == list(merged.evidence)
    assert linked["coverage_checked"] == ["ethereum", "base", "polygon", "avalanche"]
    assert linked["exposure_complete"] is False and len(linked["coverage_unavailable"]) == 12


@pytest.mark.parametrize("chain", [c.value for c in CHAINS])
@pytest.mark.parametrize("exposure", list(Exposure))
def test_the_vectorised_limit_is_limits_of(chain: str, exposure: Exposure) -> None:
    observation = dataclasses.replace(evm_observation(evm_address(1), 0, 0)[1], chain=chain, exposure=exposure)
    frame = pl.DataFrame(
        {
            "environment": ["live"],
            "chain": [chain],
            "address": ["x"],
            "family": [f"{chain}:x"],
            "exposure": [exposure.value],
        }
    )
    empty = FamilyLinks(
        pl.DataFrame(schema={"environment": pl.String(), "family": pl.String(), "observed": pl.UInt32()}),
        pl.DataFrame(
            schema={
                "environment": pl.String(),
                "family": pl.String(),
                "chain": pl.String(),
                "address": pl.String(),
                "kind": pl.String(),
                "txid": pl.String(),
                "block_height": pl.Int64(),
                "rank": pl.Int64(),
            }
        ),
    )
    (linked,) = link_frame(frame, empty).to_dicts()
    assert linked["exposure_complete"] is (not limits_of(observation))
    assert linked["coverage_checked"] == [chain] and linked["coverage_unavailable"] == []


def test_snapshots_keep_the_clients_evidence(tmp_path: Path) -> None:
    spend = ExposureEvidence("bitcoin", P2WPKH, EvidenceKind.SPEND, SPEND_TXID, 850_000)
    recorded = [btc_observation(P2WPKH, 0, spent=1, evidence=(spend,)), evm_observation(evm_address(3), 1, 1)]
    write_snapshot(tmp_path / "s.jsonl", recorded)
    assert list(read_snapshot(tmp_path / "s.jsonl").values()) == [o for _, o in recorded]
    old = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[1])
    del old["evidence"]  # recorded before evidence existed
    (tmp_path / "old.jsonl").write_text(json.dumps(old) + "\n")
    assert list(read_snapshot(tmp_path / "old.jsonl").values()) == [recorded[1][1]]


def test_a_past_day_without_key_exposure_keeps_nothing_half(data_dir: DataDir, tmp_path: Path) -> None:
    """A past day's observations are kept with their key-family members, or not at all."""
    account = data_dir.account(ACCOUNT)
    data_dir.watch(account, "ethereum", evm_address(1))
    write_snapshot(tmp_path / "s.jsonl", [evm_observation(evm_address(1), 1, 1)])
    assert all(run_day(data_dir, tmp_path / "s.jsonl", ["ethereum"], ["ethereum"]).values())
    store, past = data_dir.analytics, data_dir.today - timedelta(days=3)
    for table in ("watchlist", "family_targets", "address_observations", "native_prices"):
        target = store.daily_file(table, past, "ethereum")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(store.daily_file(table, data_dir.today, "ethereum").read_bytes())
    resources = data_dir.resources(chain_data=SnapshotChainDataResource(snapshot_file=str(tmp_path / "s.jsonl")))
    result = materialize(
        OBSERVE_ASSETS, partition_key=partition("ethereum", past), resources=resources, raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "no key_exposure file" in failure.event_specific_data.error.message
