"""The Bitcoin tip sensor and the height-range asset against the loopback Core node: what the
sensor asks for (once per range and tip), what a run writes, a reorg, a missing node.

Ranges are ``SIZE`` heights here (``BitcoinNodeResource.range_size``; 1000 in production), so
the 12-block test chain spans three partitions and a reorg can leave one of them alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    Definitions,
    RunRequest,
    SensorResult,
    SkipReason,
    build_sensor_context,
    materialize,
)

from pipelines.bitcoin import (
    HEIGHT_RANGES,
    BitcoinNodeResource,
    bitcoin_block_range,
    bitcoin_tip_sensor,
    parse_range_key,
    range_key,
)
from pipelines.definitions import build_definitions
from pipelines.resources import AnalyticsResource
from pipelines.runner import LoopThread
from services.settings import load_settings
from tests.bitcoin_chain import BuiltBlock, ChainBuilder, revealing_blocks
from tests.core_rpc import CoreRpcServer
from tests.services.test_bitcoin_follow import exposure, revealed

SIZE = 5
KEYS = ["regtest:000000000-000000004", "regtest:000000005-000000009", "regtest:000000010-000000014"]


@pytest.fixture
def core() -> Iterator[CoreRpcServer]:
    """A loopback Core node on its own event-loop thread: the sensor and the asset block the
    test's thread while their client, on another loop, talks to it."""
    with LoopThread("core-rpc") as loop:
        server = loop.run(CoreRpcServer().__aenter__())
        try:
            yield server
        finally:
            loop.run(server.__aexit__(None, None, None))


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    with DagsterInstance.ephemeral() as inst:
        yield inst


def build() -> tuple[ChainBuilder, list[BuiltBlock]]:
    """12 blocks: 8 coinbase-only (heights 0-7), two revealing keys (8 and 9), two more."""
    chain = ChainBuilder()
    reveal = revealing_blocks(chain, chain.extend(None, 8)[-1])
    return chain, chain.branch(chain.extend(reveal.blocks[1], 2)[-1])


def resources(root: Path, node: BitcoinNodeResource) -> dict[str, Any]:
    return {"bitcoin_node": node, "analytics": AnalyticsResource(root=str(root))}


def tick(instance: DagsterInstance, res: dict[str, Any], cursor: str | None) -> SensorResult | SkipReason:
    """One evaluation of the sensor; the partitions it adds are added, as the daemon does."""
    result = bitcoin_tip_sensor(build_sensor_context(instance=instance, cursor=cursor, resources=res))
    assert isinstance(result, SensorResult | SkipReason)
    if isinstance(result, SensorResult):
        for added in result.dynamic_partitions_requests or ():
            instance.add_dynamic_partitions(added.partitions_def_name, list(added.partition_keys or ()))
    return result


def requested(result: SensorResult | SkipReason) -> list[tuple[str, str]]:
    """(partition key, run key) of each run asked for."""
    if isinstance(result, SkipReason):
        return []
    return [(str(r.partition_key), str(r.run_key)) for r in result.run_requests or ()]


def run(instance: DagsterInstance, res: dict[str, Any], request: RunRequest) -> dict[str, Any]:
    """Materialise the partition a run request names, with its run config; the run's metadata."""
    result = materialize(
        [bitcoin_block_range],
        partition_key=request.partition_key,
        run_config=request.run_config,
        resources=res,
        instance=instance,
    )
    assert result.success
    (event,) = result.asset_materializations_for_node("bitcoin_block_range")
    return {name: value.value for name, value in event.metadata.items()}


def failure(instance: DagsterInstance, res: dict[str, Any], key: str) -> str:
    """The error message of a run of partition ``key`` that fails."""
    instance.add_dynamic_partitions(HEIGHT_RANGES, [key])
    result = materialize(
        [bitcoin_block_range], partition_key=key, resources=res, instance=instance, raise_on_error=False
    )
    assert not result.success
    (event,) = result.get_step_failure_events()
    error = event.step_failure_data.error
    assert error is not None
    return error.message


def test_partition_keys() -> None:
    assert range_key("mainnet", (413_000, 413_999)) == "mainnet:000413000-000413999"
    assert parse_range_key("regtest:000000005-000000009") == ("regtest", (5, 9))
    for bad in ("000000005-000000009", ":000000005-000000009", "regtest:5-9"):
        with pytest.raises(ValueError):
            parse_range_key(bad)


def test_the_sensor_asks_for_each_range_once_and_its_runs_fill_the_index(
    tmp_path: Path, core: CoreRpcServer, instance: DagsterInstance
) -> None:
    chain, blocks = build()
    core.set_chain([b.raw for b in blocks])
    res = resources(tmp_path, BitcoinNodeResource(url=core.url, range_size=SIZE))

    first = tick(instance, res, None)
    assert isinstance(first, SensorResult) and first.cursor is not None
    tip = blocks[-1].hash
    assert requested(first) == [(key, f"{key}@{tip}") for key in KEYS]
    assert instance.get_dynamic_partitions(HEIGHT_RANGES) == KEYS
    assert json.loads(first.cursor) == {"tip": tip, "first": {"regtest": 0}}

    again = tick(instance, res, first.cursor)  # same tip: nothing new
    assert isinstance(again, SkipReason) and "unchanged" in str(again.skip_message)
    reset = tick(instance, res, None)  # a reset cursor asks again under the same run keys: Dagster runs them once
    assert requested(reset) == requested(first)
    assert isinstance(reset, SensorResult) and not reset.dynamic_partitions_requests  # the partitions are there

    runs = [run(instance, res, request) for request in first.run_requests or ()]
    assert [(m["part"], m["fetched"], m["kept"], m["unchanged"]) for m in runs] == [
        ("000000000-000000004", 5, 0, False),
        ("000000005-000000009", 5, 0, False),
        ("000000010-000000014", 2, 0, False),
    ]
    assert runs[0]["complete_to"] == 4 and runs[-1]["complete_to"] == 11 and runs[-1]["index_tip_height"] == 11
    assert {m["node_tip_height"] for m in runs} == {11} and {m["node_tip_hash"] for m in runs} == {tip}
    assert exposure(tmp_path) == revealed(blocks) != set()
    rerun = run(instance, res, (first.run_requests or [])[1])
    assert (rerun["fetched"], rerun["kept"], rerun["unchanged"]) == (0, 5, True)

    grown = chain.extend(blocks[-1], 1)  # a new block: the top range again, under the new tip
    core.set_chain([b.raw for b in [*blocks, *grown]])
    following = tick(instance, res, first.cursor)
    assert requested(following) == [(KEYS[2], f"{KEYS[2]}@{grown[-1].hash}")]


def test_a_reorg_asks_for_the_ranges_it_touched_and_their_runs_rewrite_them(
    tmp_path: Path, core: CoreRpcServer, instance: DagsterInstance
) -> None:
    chain, blocks = build()
    core.set_chain([b.raw for b in blocks])
    node = BitcoinNodeResource(url=core.url, range_size=SIZE)
    res = resources(tmp_path, node)
    first = tick(instance, res, None)
    assert isinstance(first, SensorResult)
    for request in first.run_requests or ():
        run(instance, res, request)

    # branch B leaves the chain after height 8: block 9, whose spends revealed keys, goes
    # stale, and B is longer; heights 0-4 are the same on both branches
    b_blocks = chain.branch(chain.extend(blocks[8], 4)[-1])
    core.set_chain([b.raw for b in b_blocks])
    job = build_definitions(load_settings(env={}), bitcoin_node=node).resolve_job_def("bitcoin_index_job")
    queued = instance.create_run_for_job(job, status=DagsterRunStatus.NOT_STARTED, tags={"dagster/partition": KEYS[2]})
    held = tick(instance, res, first.cursor)  # the top range's run has not started: it is held back
    assert isinstance(held, SensorResult) and held.cursor is not None
    tip = b_blocks[-1].hash
    assert requested(held) == [(KEYS[1], f"{KEYS[1]}@{tip}")]
    assert json.loads(held.cursor)["tip"] == blocks[-1].hash  # so the next tick plans again

    instance.report_run_canceled(queued)
    reorg = tick(instance, res, held.cursor)
    assert isinstance(reorg, SensorResult) and reorg.cursor is not None
    assert requested(reorg) == [(key, f"{key}@{tip}") for key in KEYS[1:]]
    assert json.loads(reorg.cursor)["tip"] == tip
    runs = [run(instance, res, request) for request in reorg.run_requests or ()]
    assert [(m["fetched"], m["kept"]) for m in runs] == [(1, 4), (3, 0)]
    assert runs[-1]["complete_to"] == 12
    assert exposure(tmp_path) == revealed(b_blocks)
    stale = {txid for _, txid, _, _ in revealed(blocks[9:10])}  # the spends of the block that went stale
    assert stale and not [row for row in exposure(tmp_path) if row[1] in stale]


def test_without_a_node_the_sensor_skips_and_a_run_fails_saying_what_to_set(
    tmp_path: Path, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("QDAY_BITCOIN_RPC_URL", "QDAY_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    res = resources(tmp_path, BitcoinNodeResource())
    skipped = tick(instance, res, None)
    assert isinstance(skipped, SkipReason) and "QDAY_BITCOIN_RPC_URL" in str(skipped.skip_message)
    assert "QDAY_BITCOIN_RPC_URL" in failure(instance, res, KEYS[0])


def test_the_settings_node_is_followed_and_a_range_of_another_network_fails(
    tmp_path: Path, core: CoreRpcServer, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, blocks = build()
    core.set_chain([b.raw for b in blocks])
    monkeypatch.delenv("QDAY_CONFIG", raising=False)
    monkeypatch.setenv("QDAY_BITCOIN_RPC_URL", core.url)
    res = resources(tmp_path, BitcoinNodeResource(range_size=SIZE, start_height=7))
    result = tick(instance, res, None)
    assert [key for key, _ in requested(result)] == KEYS[1:]  # following starts at start_height
    assert isinstance(result, SensorResult) and json.loads(str(result.cursor))["first"] == {"regtest": 7}
    assert "follows regtest, not mainnet" in failure(instance, res, "mainnet:000000005-000000009")


def test_the_definitions_load_with_the_bitcoin_index(tmp_path: Path) -> None:
    node = BitcoinNodeResource(url="http://qday:secret@127.0.0.1:18443", range_size=SIZE)
    defs = build_definitions(load_settings(env={"QDAY_DATA_DIR": str(tmp_path)}), bitcoin_node=node)
    Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    sensor = repo.get_sensor_def("bitcoin_tip_sensor")
    assert sensor.job_name == "bitcoin_index_job" and sensor.minimum_interval_seconds == 30
    assert sensor.default_status is DefaultSensorStatus.RUNNING
    graph = repo.get_job("bitcoin_index_job").asset_layer.asset_graph
    assert {key.to_user_string() for key in graph.executable_asset_keys} == {"bitcoin_block_range"}
    assert bitcoin_block_range.partitions_def is not None
    assert defs.resources is not None and defs.resources["bitcoin_node"] is node
    default = build_definitions(load_settings(env={"QDAY_DATA_DIR": str(tmp_path)})).resources
    assert default is not None and isinstance(default["bitcoin_node"], BitcoinNodeResource)
    assert default["bitcoin_node"].url is None  # the settings' node, read when it is opened
