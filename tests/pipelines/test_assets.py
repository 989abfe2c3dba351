"""The rescoring assets end to end: real chain clients against anvil (Ethereum, live and
test environments) and a loopback Esplora (Bitcoin), a chain that is down (Polygon), real
Chainlink price reads from an aggregator stand-in on anvil, the Parquet tables, the
published results and the asset checks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from dagster import AssetKey, Failure, materialize
from eth_account import Account

from chains.codecs.detect import parse_address
from chains.environment import Environment
from chains.evidence import Coverage
from chains.keys import KECCAK_CHAINS, siblings
from pipelines import assets as pipeline_assets
from pipelines.assets import RESCORING_ASSETS, chain_day, risk_checks, risk_file_checks
from pipelines.rescore import observation_from_row, scorer_row_types
from pipelines.resources import EndpointChainDataResource, OraclePriceResource
from scoring import PriceQuote, load_readiness, score_observation
from services.observer import limits_of
from storage.scan_records import scan_record
from tests.anvil import Anvil, assemble, free_port, running_anvil
from tests.chain_clients.test_prices import deploy_feed, feed_address
from tests.pipelines.support import DataDir, ThreadedLoopback, evm_address, partition

BTC_ADDRESS = "bc1qrw8us6s8x05ks479fyevq03qr243m703jmvdex"
BTC_SIBLINGS = [str(a) for a in siblings(parse_address(BTC_ADDRESS, "bitcoin")) if a.chain.value == "bitcoin"]
ETH_USD = 3_123_45000000  # 8 decimals: $3,123.45
FEED = feed_address(0xFEED01)
RUN = [*RESCORING_ASSETS, *risk_checks]


def endpoints_config(path: Path, anvil: Anvil, esplora: ThreadedLoopback, down_port: int) -> Path:
    """A qday settings file whose [chains] table points Ethereum (both environments) at
    anvil, Bitcoin at the loopback Esplora and Polygon at a port nobody listens on."""
    evm = f'{{ url = "{anvil.url}", chain_id = {anvil.chain_id} }}'
    path.write_text(
        f"""
[chains.settings]
timeout = 3
retry_attempts = 1

[chains.live.endpoints]
ethereum = {evm}
polygon = {{ url = "http://127.0.0.1:{down_port}", chain_id = 137 }}
bitcoin_esplora = "{esplora.url}"

[chains.live.prices]
feeds = {{ ETH = "{FEED}" }}

[chains.test.endpoints]
ethereum = "{anvil.url}"

[chains.test.prices]
feeds = {{ ETH = "{FEED}" }}
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def anvil() -> Iterator[Anvil]:
    """A node under Ethereum's own chain id (1), standing in for mainnet: its Chainlink feed
    prices the live environment (a node under another chain id is a local network whose
    coins have no USD value, ``EnvironmentEndpoints.has_market_value``)."""
    yield from running_anvil(1)


@pytest.fixture(scope="module")
def chain_state(anvil: Anvil) -> dict[str, str]:
    """Ethereum accounts in four states, and a fresh price feed."""
    signed = anvil.new_account(5 * 10**18)
    anvil.send(signed, {"gasPrice": 2 * 10**9, "gas": 21_000, "to": evm_address(0xDEAD), "value": 1})
    fresh = anvil.new_account(10**18)
    contract = evm_address(0xC0DE01)
    anvil.rpc("anvil_setCode", contract, "0x" + assemble(["STOP"]).hex())
    anvil.fund(contract, 7 * 10**18)
    deploy_feed(anvil, FEED, ETH_USD, datetime.now(UTC))
    return {"signed": signed.address, "fresh": fresh.address, "contract": contract, "empty": Account.create().address}


@pytest.fixture
def world(data_dir: DataDir, tmp_path: Path, anvil: Anvil, esplora: ThreadedLoopback, chain_state) -> dict:
    """Two tenants' watch lists over the chain state, and resources on the real clients."""
    a, b = data_dir.account("a@example.com"), data_dir.account("b@example.com")
    for name in ("signed", "fresh", "contract", "empty"):
        data_dir.watch(a, "ethereum", chain_state[name], label=name)
    data_dir.watch(b, "ethereum", chain_state["signed"])
    data_dir.watch(a, "ethereum", chain_state["fresh"], Environment.TEST)
    data_dir.watch(a, "bitcoin", BTC_ADDRESS)
    data_dir.watch(a, "polygon", chain_state["signed"])
    esplora.server.route("GET", "/blocks/tip/height", 900_000)
    unused = {"funded_txo_count": 0, "funded_txo_sum": 0, "spent_txo_count": 0, "spent_txo_sum": 0, "tx_count": 0}
    funded = {**unused, "funded_txo_count": 1, "funded_txo_sum": 50_000_000, "tx_count": 1}
    esplora.server.route("GET", f"/address/{BTC_ADDRESS}", {"chain_stats": funded, "mempool_stats": unused})
    esplora.server.route("GET", f"/address/{BTC_ADDRESS}/txs", [])
    for sibling in BTC_SIBLINGS:  # the P2PKH and P2SH-P2WPKH of its key hash, observed for its family
        esplora.server.route("GET", f"/address/{sibling}", {"chain_stats": unused, "mempool_stats": unused})
        esplora.server.route("GET", f"/address/{sibling}/txs", [])
    config = str(endpoints_config(tmp_path / "qday.toml", anvil, esplora, free_port()))
    resources = data_dir.resources(
        chain_data=EndpointChainDataResource(config_file=config, batch_size=2, concurrency=2, outage_retries=0),
        prices=OraclePriceResource(config_file=config),
    )
    return {"dir": data_dir, "resources": resources, "a": a, "b": b, **chain_state}


def run(world: dict, chain: str, **options):
    return materialize(RUN, partition_key=partition(chain, world["dir"].today), resources=world["resources"], **options)


def test_a_partition_lands_its_tables_and_publishes_what_the_scan_endpoint_would(world: dict, today: date) -> None:
    result = run(world, "ethereum")
    assert result.success
    assert all(check.passed for check in result.get_asset_check_evaluations())
    store = world["dir"].analytics
    risk = pl.read_parquet(store.daily_file("address_risk", today, "ethereum"))
    assert risk.height == 5  # four live addresses (one watched twice) and one test-environment address
    by_address = {(r["environment"], r["address"]): r for r in risk.iter_rows(named=True)}
    signed = by_address[("live", world["signed"])]
    assert signed["exposure"] == "EXPOSED_AT_REST" and signed["public_key"] is not None
    assert signed["price_usd"] == pytest.approx(3123.45) and signed["public_key_exposure_score"] == 100
    assert by_address[("live", world["contract"])]["account_type"] == "contract"
    assert not by_address[("live", world["empty"])]["has_activity"]

    published = world["dir"].results()
    keys = {(r[0], r[1], r[3]) for r in published}
    a, b = world["a"], world["b"]
    assert keys == {
        (a, "live", world["signed"]),
        (a, "live", world["fresh"]),
        (a, "live", world["contract"]),
        (a, "test", world["fresh"]),
        (b, "live", world["signed"]),
    }  # the empty address is SCAN_003
    assert {r[7] for r in published} == {"pipeline"}

    # The stored JSON is exactly what the scan endpoint builds for that observation and
    # price: only ethereum of the key families was observed, the rest is unavailable.
    readiness = load_readiness()
    unavailable = tuple(c.value for c in KECCAK_CHAINS if c.value != "ethereum")
    for row in scorer_row_types(risk.filter(pl.col("has_activity"))).iter_rows(named=True):
        observation = observation_from_row(row)
        assert row["exposure"] == row["observed_exposure"] and row["coverage_unavailable"] == list(unavailable)
        unpriced = row["price_usd"] is None  # the test environment: testnet coins have no USD value
        assert unpriced == (row["environment"] == "test")
        price = None if unpriced else PriceQuote(Decimal(str(row["price_usd"])), row["price_as_of"])
        expected = scan_record(
            observation,
            score_observation(observation, price, readiness),
            a,
            Environment(row["environment"]),
            row["scanned_at"],
            "pipeline",
            Coverage(("ethereum",), unavailable, limits_of(observation)),
        )
        stored = next(r for r in published if (r[0], r[1], r[3]) == (a, row["environment"], row["address"]))
        assert json.loads(stored[4]) == json.loads(expected.result)

    con = store.connect()
    assert con.execute("SELECT count(*) FROM address_risk_latest").fetchall() == [(5,)]
    assert con.execute("SELECT count(*) FROM watchlist WHERE chain = 'ethereum'").fetchall() == [(6,)]
    assert con.execute("SELECT price_usd FROM native_prices WHERE environment = 'live'").fetchall() == [(3123.45,)]


def test_rerunning_a_partition_replaces_its_rows(world: dict, today: date) -> None:
    assert run(world, "ethereum").success
    first = {r[3]: r[6] for r in world["dir"].results()}
    assert run(world, "ethereum").success
    store = world["dir"].analytics
    con = store.connect()
    distinct = "SELECT count(*), count(DISTINCT (environment, address)) FROM address_risk"
    assert con.execute(distinct).fetchall() == [(5, 5)]
    assert con.execute("SELECT count(*) FROM address_observations").fetchall() == [(5,)]
    assert con.execute("SELECT count(*) FROM watchlist_exports").fetchall() == [(6,)]
    files = sorted(p.name for p in store.partition_dir("address_risk", today, "ethereum").iterdir())
    assert files == ["daily.parquet"]  # replaced in place; no temporary file left behind
    results = world["dir"].results()
    assert len(results) == 5 and all(r[6] >= first[r[3]] for r in results)


def test_a_chain_that_is_down_fails_its_partition_only(world: dict, today: date) -> None:
    down = run(world, "polygon", raise_on_error=False)
    assert not down.success
    failure = next(e for e in down.all_events if e.event_type_value == "STEP_FAILURE")
    assert "polygon unavailable" in failure.event_specific_data.error.message
    assert not world["dir"].analytics.daily_file("address_observations", today, "polygon").exists()

    bitcoin = run(world, "bitcoin")
    assert bitcoin.success
    (row,) = pl.read_parquet(world["dir"].analytics.daily_file("address_risk", today, "bitcoin")).iter_rows(named=True)
    assert (row["address"], row["balance"], row["source"]) == (BTC_ADDRESS, Decimal(50_000_000), "esplora")
    assert (row["coverage_checked"], row["coverage_unavailable"]) == (["bitcoin"], ["cosmos"])  # cosmos not run
    assert [r[2] for r in world["dir"].results()] == ["bitcoin"]
    members = pl.read_parquet(world["dir"].analytics.daily_file("key_exposure", today, "bitcoin"))
    assert sorted(members["address"]) == sorted([BTC_ADDRESS, *BTC_SIBLINGS]) and members["kind"].is_null().all()


def test_a_failing_blocking_check_stops_publishing(snapshot_world, monkeypatch, today: date) -> None:
    data_dir, resources = snapshot_world(10)
    real = pipeline_assets.risk_rows

    def broken(*args, **kwargs):
        return real(*args, **kwargs).with_columns(pl.lit(None, pl.UInt8()).alias("address_reuse_score"))

    monkeypatch.setattr(pipeline_assets, "risk_rows", broken)
    result = materialize(RUN, partition_key=partition("ethereum", today), resources=resources, raise_on_error=False)
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks == {
        "no_null_scores": False,
        "weights_sum_to_one": True,
        "row_counts_match": True,
        "family_links_hold": True,
    }
    materialized = {m.asset_key for m in result.get_asset_materialization_events()}
    assert AssetKey("published_scan_results") not in materialized and data_dir.results() == []


def test_checks_catch_tampered_files(snapshot_world, today: date) -> None:
    data_dir, resources = snapshot_world(10)
    assert materialize(RUN, partition_key=partition("ethereum", today), resources=resources).success
    store = data_dir.analytics
    path = store.daily_file("address_risk", today, "ethereum")
    good = pl.read_parquet(path)
    assert all(passed for passed, _ in risk_file_checks(store, "ethereum", today).values())

    store.write_frame("address_risk", path, good.head(9))
    assert not risk_file_checks(store, "ethereum", today)["row_counts_match"][0]
    store.write_frame("address_risk", path, good.with_columns(pl.col("risk_value") + 1))
    checks = risk_file_checks(store, "ethereum", today)
    assert not checks["weights_sum_to_one"][0] and checks["no_null_scores"][0]
    raised = pl.col("exposure_evidence").list.len() == 0  # a raise with nothing to show for it
    store.write_frame(
        "address_risk",
        path,
        good.with_columns(
            exposure=pl.when(raised).then(pl.lit("EXPOSED_AT_REST")).otherwise(pl.col("exposure")),
            observed_exposure=pl.when(raised).then(pl.lit("EXPOSED_ON_SPEND")).otherwise(pl.col("observed_exposure")),
        ),
    )
    passed, found = risk_file_checks(store, "ethereum", today)["family_links_hold"]
    assert not passed and found["raised_without_evidence"] > 0 and found["complete_with_gaps"] == 0
    store.write_frame("address_risk", path, good.with_columns(exposure_complete=pl.lit(True)))
    passed, found = risk_file_checks(store, "ethereum", today)["family_links_hold"]
    assert not passed and found == {"raised_without_evidence": 0, "complete_with_gaps": 10}


def test_partition_keys_name_chain_and_day() -> None:
    chain, day = chain_day("ethereum|2026-11-22")
    assert (chain.value, day.isoformat()) == ("ethereum", "2026-11-22")


def test_a_snapshot_recorded_from_anvil_replays_the_same_scores(world: dict, tmp_path: Path) -> None:
    from chains.codecs.detect import parse_address
    from chains.registry import Chain
    from pipelines.runner import LoopThread
    from pipelines.sources import ClientChainData, RecordingChainData, SnapshotChainData, write_snapshot
    from services.settings import load_settings

    config = world["resources"]["chain_data"].config_file
    addresses = [parse_address(world[name], "ethereum") for name in ("signed", "fresh", "contract")]
    with LoopThread() as loop:
        recorder = RecordingChainData(ClientChainData(load_settings(config_file=Path(config)).chains))
        live = loop.run(recorder.observe(Environment.LIVE, Chain.ETHEREUM, addresses))
        loop.run(recorder.aclose())
        write_snapshot(tmp_path / "recorded.jsonl", recorder.recorded)
        replayed = loop.run(
            SnapshotChainData.from_file(tmp_path / "recorded.jsonl").observe(
                Environment.LIVE, Chain.ETHEREUM, addresses
            )
        )
    assert replayed == live


def test_only_today_is_observed_past_days_keep_their_snapshot(tmp_path: Path) -> None:
    today, snapshot = date(2026, 11, 22), tmp_path / "daily.parquet"
    assert pipeline_assets.observe_now(today, snapshot, today)
    assert pipeline_assets.observe_now(today - timedelta(days=1), snapshot, today)  # a run that crossed midnight
    with pytest.raises(Failure, match="cannot be observed now"):
        pipeline_assets.observe_now(today - timedelta(days=2), snapshot, today)
    snapshot.write_bytes(b"stored")
    assert pipeline_assets.observe_now(today, snapshot, today)  # today's re-run replaces today's rows
    assert not pipeline_assets.observe_now(today - timedelta(days=1), snapshot, today)
    assert not pipeline_assets.observe_now(today - timedelta(days=30), snapshot, today)


def test_a_past_partition_is_rescored_from_its_snapshot_never_from_todays_state(snapshot_world, today: date) -> None:
    data_dir, resources = snapshot_world(10)
    assert materialize(RUN, partition_key=partition("ethereum", today), resources=resources).success
    store, past = data_dir.analytics, today - timedelta(days=3)
    past_key = f"ethereum|{past.isoformat()}"

    missing = materialize(RUN, partition_key=past_key, resources=resources, raise_on_error=False)
    assert not missing.success
    failure = next(e for e in missing.all_events if e.event_type_value == "STEP_FAILURE")
    assert "cannot be observed now" in failure.event_specific_data.error.message
    assert not store.daily_file("address_observations", past, "ethereum").exists()

    snapshots = {}
    for table in ("watchlist", "family_targets", "address_observations", "key_exposure", "native_prices"):
        target = store.daily_file(table, past, "ethereum")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(store.daily_file(table, today, "ethereum").read_bytes())
        snapshots[table] = target.read_bytes()
    assert materialize(RUN, partition_key=past_key, resources=resources).success
    assert {table: store.daily_file(table, past, "ethereum").read_bytes() for table in snapshots} == snapshots
    assert pl.read_parquet(store.daily_file("address_risk", past, "ethereum")).height == 10
