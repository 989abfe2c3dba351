"""Following a Bitcoin Core node's tip into the exposure index, as Dagster partitions.

The node-fed part of the chain-wide index (``storage.bitcoin_index``, origin ``rpc``) is kept
in ranges of heights (``services.bitcoin_follow``); here each range is a partition of
``bitcoin_block_range``, in the dynamic partitions ``bitcoin_height_ranges``, keyed
``<network>:<part>`` (``mainnet:000413000-000413999``). Materialising a partition makes its
part hold the node's active chain (blocks kept when their hash did not change, the others
fetched) and relinks the network's best chain, so a reorg rewrites exactly the ranges it
touched.

``bitcoin_tip_sensor`` (every 30 s) asks the node for its tip. When the tip hash is the one
in its cursor it skips; otherwise it plans (``plan_follow``: the ranges from the lowest
height whose stored block is missing or differs from the node's, up to the tip), adds the
planned ranges as partitions and asks for one ``bitcoin_index_job`` run per range, with
run key ``<partition key>@<tip hash>``: Dagster starts one run per range and tip, however
often the sensor ticks. A range whose run is still queued or running is held back (it is
asked for again, under the tip of that later tick, once that run is over), so a long
catch-up does not queue a new run per range at every block; the cursor then keeps its
previous tip, so the next tick plans again. The cursor also keeps, per network, where
following began: ranges run in any order, and a lower range that failed while a higher
one succeeded is still planned at the next tip.

Where following starts with nothing node-fed indexed yet: just past the height up to which
the block files (``qday bitcoin ingest-blocks``) made the index complete, else genesis,
unless ``BitcoinNodeResource.start_height`` is set lower (``plan_follow``).

The node is the live environment's Bitcoin Core (``QDAY_BITCOIN_RPC_URL``, credentials in
its userinfo, or ``bitcoin_rpc`` of the ``[chains]`` live endpoints); without one the
sensor skips, saying so. Runs of different ranges may run at once (the run coordinator
allows one run per partition): each writes only its own part, and the relinking that
follows is serialised by a lock file, so the best chain written last was read after every
part published before it.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from dagster import (
    AssetExecutionContext,
    AssetSelection,
    Config,
    ConfigurableResource,
    DefaultSensorStatus,
    DynamicPartitionsDefinition,
    Failure,
    MaterializeResult,
    RunConfig,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    asset,
    define_asset_job,
    in_process_executor,
    sensor,
)
from pydantic import Field

from chains.clients.bitcoin_core import BitcoinCoreClient, ChainTip
from chains.endpoints import BITCOIN_RPC_TIMEOUT, EndpointConfig
from chains.environment import Environment
from pipelines.automation import UNFINISHED
from pipelines.resources import AnalyticsResource, configured_endpoints, on_own_loop
from pipelines.runner import LoopThread
from services.bitcoin_follow import RANGE_SIZE, FollowPlan, RangeReport, parse_part, part_name, plan_follow, sync_range
from storage.bitcoin_index import COMPACT_AFTER, BitcoinIndexStore

BITCOIN_INDEX = "bitcoin_index"
TIP_SENSOR_INTERVAL_SECONDS = 30
NOT_CONFIGURED = (
    "no Bitcoin Core node is configured: set QDAY_BITCOIN_RPC_URL (http://user:password@host:8332) "
    "or bitcoin_rpc in the [chains] live endpoints of the qday settings"
)

HEIGHT_RANGES = "bitcoin_height_ranges"
bitcoin_height_ranges = DynamicPartitionsDefinition(name=HEIGHT_RANGES)
"""The height ranges followed so far, keyed ``<network>:<part>`` (``range_key``)."""


def range_key(network: str, span: tuple[int, int]) -> str:
    """The partition key of a network's range of heights (``regtest:000000000-000000999``)."""
    return f"{network}:{part_name(*span)}"


def parse_range_key(key: str) -> tuple[str, tuple[int, int]]:
    """The network and range of a ``range_key`` (``ValueError`` for anything else)."""
    network, _, part = key.partition(":")
    if not network:
        raise ValueError(f"not a height-range partition key: {key!r}")
    return network, parse_part(part)


# --- the node ---------------------------------------------------------------------------


class BitcoinNode:
    """An open Bitcoin Core node (from ``BitcoinNodeResource.open``): the follower's calls,
    each run on the client's own event-loop thread, so sensors and assets call them
    synchronously."""

    def __init__(self, loop: LoopThread, client: BitcoinCoreClient, range_size: int) -> None:
        self._loop = loop
        self._client = client
        self._range_size = range_size

    def tip(self) -> ChainTip:
        """Height, hash and network of the node's best block."""
        return self._loop.run(self._client.tip())

    def plan(self, index: BitcoinIndexStore, start_height: int | None) -> FollowPlan:
        """The ranges (of the resource's ``range_size`` heights) to sync to reach the node's tip
        (``plan_follow``)."""
        return self._loop.run(plan_follow(self._client, index, start_height=start_height, size=self._range_size))

    def sync(
        self, index: BitcoinIndexStore, network: str, span: tuple[int, int], tip_height: int, first: int
    ) -> RangeReport:
        """Make the part of ``span`` hold the node's active chain from ``first`` up to ``tip_height``."""
        return self._loop.run(sync_range(self._client, index, network, span, tip_height, first))


class BitcoinNodeResource(ConfigurableResource["BitcoinNodeResource"]):
    """The live environment's Bitcoin Core node and how the index follows it.

    The node is ``url`` when set (tests point it at a loopback node), else the settings'
    ``QDAY_BITCOIN_RPC_URL`` (read when the node is opened, as the API reads it; keeping the
    credentials out of Dagster's run configuration). ``range_size`` heights make a range
    (a partition; tests use a few)."""

    config_file: str | None = Field(
        default=None,
        description="qday settings TOML (its [chains] table); QDAY_CONFIG and QDAY_BITCOIN_RPC_URL apply "
        "as for the API.",
    )
    url: str | None = Field(
        default=None, description="The node's RPC URL, credentials in its userinfo, instead of the settings' one."
    )
    start_height: int | None = Field(
        default=None,
        ge=0,
        description="Where following starts when it is lower than where the block files end (None: there).",
    )
    range_size: int = Field(default=RANGE_SIZE, ge=1, description="Heights per range (per partition).")

    def endpoint(self) -> EndpointConfig | None:
        """The node's endpoint (None: no node is configured)."""
        if self.url is not None:
            return EndpointConfig(self.url, timeout=BITCOIN_RPC_TIMEOUT)
        return configured_endpoints(self.config_file)[Environment.LIVE].bitcoin_rpc

    @contextmanager
    def open(self) -> Iterator[BitcoinNode]:
        """An open node, closed (connections released, loop stopped) on exit; a ``Failure``
        naming the settings to set when no node is configured."""
        endpoint = self.endpoint()
        if endpoint is None:
            raise Failure(description=NOT_CONFIGURED)
        with on_own_loop(lambda: BitcoinCoreClient(endpoint)) as (loop, client):
            yield BitcoinNode(loop, client, self.range_size)


# --- the asset and its job ----------------------------------------------------------------


class BitcoinRangeConfig(Config):
    """Where following began, which the sensor passes from its plan."""

    first: int | None = Field(
        default=None,
        ge=0,
        description="The lowest height followed (lower ones come from block files). Unset (a run by hand): "
        "the resource's start_height, else the range's first height.",
    )


@asset(partitions_def=bitcoin_height_ranges, group_name=BITCOIN_INDEX, kinds={"parquet"})
def bitcoin_block_range(
    context: AssetExecutionContext,
    config: BitcoinRangeConfig,
    bitcoin_node: BitcoinNodeResource,
    analytics: AnalyticsResource,
) -> MaterializeResult[None]:
    """The blocks and revealed keys of one range of heights, as the node's active chain has
    them now (the blocks still there are kept, the others fetched), then the network's best
    chain relinked (and the lookup buckets recompacted once ``COMPACT_AFTER`` parts are new):
    how a new block, and a reorg, reach the exposure index."""
    try:
        network, span = parse_range_key(context.partition_key)
    except ValueError as exc:
        raise Failure(description=str(exc)) from None
    first = next((h for h in (config.first, bitcoin_node.start_height) if h is not None), 0)
    index = BitcoinIndexStore(analytics.store().root)
    index.ensure_layout()
    with bitcoin_node.open() as node:
        tip = node.tip()
        if tip.network != network:
            raise Failure(
                description=f"the Bitcoin Core node follows {tip.network}, not {network} ({context.partition_key})"
            )
        report = node.sync(index, network, span, tip.height, first)
    state = index.link(network)
    compacted = index.compact_if_due(network, COMPACT_AFTER)
    context.log.info(f"{network} {report.part}: {report.fetched} fetched, {report.kept} kept; tip {tip.height}")
    return MaterializeResult(
        metadata={
            "network": network,
            "part": report.part,
            "fetched": report.fetched,
            "kept": report.kept,
            "unchanged": report.unchanged,
            "node_tip_height": tip.height,
            "node_tip_hash": tip.hash,
            "complete_to": state.complete_to,
            "index_tip_height": state.tip_height,
            "compacted_rows": compacted,
        }
    )


bitcoin_index_job = define_asset_job(
    "bitcoin_index_job",
    selection=AssetSelection.assets(bitcoin_block_range),
    executor_def=in_process_executor,
    description="Sync one range of heights of the Bitcoin exposure index with the node's active chain.",
)


# --- the sensor ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TipCursor:
    """The node's tip hash when every range planned for it was asked for, and, by network,
    the height following began at."""

    tip: str | None = None
    first: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> "TipCursor":
        """The cursor of ``dump`` (empty: none yet)."""
        if not text:
            return cls()
        data = json.loads(text)
        return cls(data["tip"], {str(k): int(v) for k, v in data["first"].items()})

    def dump(self) -> str:
        """The cursor as the sensor stores it."""
        return json.dumps({"tip": self.tip, "first": self.first}, sort_keys=True)


def _running(context: SensorEvaluationContext) -> set[str]:
    """The partitions of ``bitcoin_index_job`` runs queued or running."""
    runs = context.instance.get_run_records(RunsFilter(job_name=bitcoin_index_job.name, statuses=UNFINISHED))
    return {key for run in runs if (key := run.dagster_run.tags.get("dagster/partition")) is not None}


@sensor(
    job=bitcoin_index_job,
    minimum_interval_seconds=TIP_SENSOR_INTERVAL_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    name="bitcoin_tip_sensor",
    description="Follows the Bitcoin Core node's tip: a run per range of heights that is new or changed (reorg).",
)
def bitcoin_tip_sensor(
    context: SensorEvaluationContext, bitcoin_node: BitcoinNodeResource, analytics: AnalyticsResource
) -> SensorResult | SkipReason:
    """Ask for the ranges the node's tip makes new or changed (see the module docstring)."""
    if bitcoin_node.endpoint() is None:
        return SkipReason(NOT_CONFIGURED)
    cursor = TipCursor.parse(context.cursor)
    index = BitcoinIndexStore(Path(analytics.root))
    with bitcoin_node.open() as node:
        tip = node.tip()
        if tip.hash == cursor.tip:
            return SkipReason(f"{tip.network} tip {tip.height} ({tip.hash}) unchanged since the last request")
        starts = [h for h in (bitcoin_node.start_height, cursor.first.get(tip.network)) if h is not None]
        plan = node.plan(index, min(starts, default=None))
    network = plan.tip.network
    keys = [range_key(network, span) for span in plan.ranges]
    known = set(context.instance.get_dynamic_partitions(HEIGHT_RANGES))
    busy = _running(context)
    config = RunConfig(ops={bitcoin_block_range.op.name: BitcoinRangeConfig(first=plan.first)})
    requests = [
        RunRequest(partition_key=k, run_key=f"{k}@{plan.tip.hash}", run_config=config) for k in keys if k not in busy
    ]
    held = [k for k in keys if k in busy]
    next_cursor = TipCursor(cursor.tip if held else plan.tip.hash, {**cursor.first, network: plan.first})
    added = [k for k in keys if k not in known]
    what = f"{network} tip {plan.tip.height}" + (f" (reorg from height {plan.from_height})" if plan.reorg else "")
    context.log.info(f"{what}: {len(requests)} range(s) asked for, {len(held)} held back while their runs go on")
    return SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[bitcoin_height_ranges.build_add_request(added)] if added else None,
        skip_reason=None if requests else SkipReason(f"{what}: no range to sync now"),
        cursor=next_cursor.dump(),
    )
