"""The new-address sensor (evaluated with ``build_sensor_context``) and the runs it asks for."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dagster import DagsterInstance, build_sensor_context, materialize

from chains.environment import Environment
from chains.keys import KECCAK_CHAINS
from chains.registry import Chain
from pipelines import automation
from pipelines.assets import RESCORING_ASSETS, newly_watched_scores, risk_checks
from pipelines.automation import OVERLAP, WatchCursor, new_watched_sensor
from pipelines.resources import SnapshotChainDataResource
from pipelines.sources import write_snapshot
from tests.pipelines.support import DataDir, evm_address, evm_observation, partition

SOLANA_ADDRESS = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T"


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def tick(data_dir: DataDir, instance, cursor: str | None):
    resources = data_dir.resources()
    context = build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"operational_store": resources["operational_store"], "clock": resources["clock"]},
    )
    result = new_watched_sensor(context)
    return result


def requested_ids(result) -> list[list[str]]:
    return [r.run_config["ops"]["newly_watched_scores"]["config"]["watch_ids"] for r in result.run_requests]


def test_the_sensor_asks_for_new_entries_once(data_dir: DataDir, instance) -> None:
    account = data_dir.account("a@example.com")
    old = data_dir.watch(account, "ethereum", evm_address(1), created_at=datetime.now(UTC) - timedelta(days=2))
    recent = data_dir.watch(account, "ethereum", evm_address(2), created_at=datetime.now(UTC) - timedelta(minutes=5))

    first = tick(data_dir, instance, None)  # first start: the last hour only, not every address ever watched
    assert requested_ids(first) == [[recent.id]] and old.id not in first.cursor

    again = tick(data_dir, instance, first.cursor)
    assert again.run_requests == [] and again.skip_reason is not None

    new = [
        data_dir.watch(account, chain, address)
        for chain, address in (("ethereum", evm_address(3)), ("bitcoin", "bc1qrw8us6s8x05ks479fyevq03qr243m703jmvdex"))
    ]
    third = tick(data_dir, instance, again.cursor)
    assert sorted(requested_ids(third)[0]) == sorted(e.id for e in new)
    assert third.run_requests[0].run_key != first.run_requests[0].run_key


def test_a_late_commit_inside_the_overlap_is_not_missed(data_dir: DataDir, instance) -> None:
    account = data_dir.account("a@example.com")
    first = data_dir.watch(account, "ethereum", evm_address(1))
    result = tick(data_dir, instance, None)
    cursor = WatchCursor.parse(result.cursor)
    # created (its timestamp taken) before the cursor's newest entry, committed after the tick
    late = data_dir.watch(account, "ethereum", evm_address(2), created_at=cursor.after - OVERLAP / 2)
    following = tick(data_dir, instance, result.cursor)
    assert requested_ids(following) == [[late.id]] and first.id in result.cursor


def test_a_burst_asks_for_the_observe_runs_of_the_chains_families(data_dir: DataDir, instance, monkeypatch) -> None:
    monkeypatch.setattr(automation, "BURST", 3)
    account = data_dir.account("a@example.com")
    for n in range(4):
        data_dir.watch(account, "ethereum", evm_address(n + 1))
    data_dir.watch(account, "base", evm_address(9))
    data_dir.watch(account, "solana", SOLANA_ADDRESS)
    result = tick(data_dir, instance, None)
    today = data_dir.today.isoformat()  # the date of the sensor's clock
    # the new addresses' siblings are observed on every chain of their key family
    expected = [*KECCAK_CHAINS, Chain.SOLANA]
    assert sorted((r.job_name, r.partition_key) for r in result.run_requests) == sorted(
        ("observe_watched", f"{c.value}|{today}") for c in expected
    )


def test_a_sensor_run_serves_new_addresses_and_the_daily_run_supersedes_it(
    data_dir: DataDir, instance, tmp_path: Path
) -> None:
    account, other = data_dir.account("a@example.com"), data_dir.account("b@example.com")
    addresses = [evm_address(n) for n in range(1, 5)]
    for address in addresses[:3]:
        data_dir.watch(account, "ethereum", address, created_at=datetime.now(UTC) - timedelta(hours=3))
    snapshot = tmp_path / "snapshot.jsonl"
    write_snapshot(
        snapshot,
        [evm_observation(a, 10**18, 2) for a in addresses]
        + [evm_observation(addresses[3], 10**18, 2, Environment.TEST)],
    )
    resources = data_dir.resources(chain_data=SnapshotChainDataResource(snapshot_file=str(snapshot)))
    assert materialize(
        [*RESCORING_ASSETS, *risk_checks], partition_key=partition("ethereum", data_dir.today), resources=resources
    ).success

    # a new address, and an address another tenant already has in today's daily rows
    data_dir.watch(account, "ethereum", addresses[3])
    data_dir.watch(account, "ethereum", addresses[3], Environment.TEST)
    data_dir.watch(other, "ethereum", addresses[0])
    cursor = WatchCursor(datetime.now(UTC) - timedelta(minutes=1), frozenset()).dump()
    (request,) = tick(data_dir, instance, cursor).run_requests
    result = materialize([newly_watched_scores], run_config=request.run_config, resources=resources)
    assert result.success
    published = {(r[0], r[1], r[3]) for r in data_dir.results()}
    expected = {(account, "live", addresses[3]), (account, "test", addresses[3]), (other, "live", addresses[0])}
    assert expected <= published

    con = data_dir.analytics.connect()
    count = "SELECT count(*), count(DISTINCT (environment, address)) FROM address_risk"
    assert con.execute(count).fetchall() == [(5, 5)]  # one row per address and day, new ones included
    assert con.execute("SELECT count(*) FROM watchlist").fetchall() == [(6,)]
    assert materialize(
        [*RESCORING_ASSETS, *risk_checks], partition_key=partition("ethereum", data_dir.today), resources=resources
    ).success
    assert con.execute(count).fetchall() == [(5, 5)]
    assert con.execute("SELECT count(*) FROM address_risk WHERE batch = 'new'").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM watchlist").fetchall() == [(6,)]


def test_a_sensor_run_with_a_chain_down_still_scores_the_others(data_dir: DataDir, tmp_path: Path) -> None:
    account = data_dir.account("a@example.com")
    entries = [data_dir.watch(account, "ethereum", evm_address(1)), data_dir.watch(account, "base", evm_address(1))]
    snapshot = tmp_path / "snapshot.jsonl"
    write_snapshot(
        snapshot, [evm_observation(evm_address(1), 10**18, 1), evm_observation(evm_address(1), 10**18, 1, chain="base")]
    )
    chain_data = SnapshotChainDataResource(snapshot_file=str(snapshot), unavailable_chains=["base"], outage_retries=0)
    config = {"ops": {"newly_watched_scores": {"config": {"watch_ids": [e.id for e in entries]}}}}
    result = materialize(
        [newly_watched_scores],
        run_config=config,
        resources=data_dir.resources(chain_data=chain_data),
        raise_on_error=False,
    )
    assert not result.success
    assert [r[2] for r in data_dir.results()] == ["ethereum"]


def test_cursor_round_trip() -> None:
    cursor = WatchCursor(datetime(2026, 11, 22, tzinfo=UTC), frozenset({"wat_a"}))
    assert WatchCursor.parse(cursor.dump()) == cursor
    assert json.loads(cursor.dump())["seen"] == ["wat_a"]
