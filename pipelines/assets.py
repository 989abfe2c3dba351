"""The rescoring assets, partitioned by chain and by day, and their checks.

Partitions: ``CHAIN_DAY`` = the 19 chains × scan dates (daily, UTC, today included), keyed
``<chain>|<YYYY-MM-DD>``. A chain's day runs in two phases (``pipelines.automation``):

    observe (job observe_watched)                          score (job score_watched)
    watched_addresses ─┐
                       ├▶ chain_observations ─────────────┐
    family_targets ────┘   key_exposure ── every chain ──▶├▶ address_risk ─▶ published_scan_results
                          native_prices ──────────────────┘   (4 blocking checks)

Exposure is a property of the key (issue 14, ``pipelines.families``): ``family_targets``
lists the chain's siblings of addresses watched on any chain of its family group (the 15
EVM chains and Tron; Bitcoin and Cosmos), so the observe phase observes each family
member once a day, on its own chain, and records it in ``key_exposure`` with what revealed
its key. ``address_risk`` of a chain depends on the ``key_exposure`` of every chain of its
group that day (``FAMILY_MAPPING``): it links each watched address to its family as the
API does (``chains.evidence.with_family``), so a key exposed anywhere marks all its watched
addresses; a family chain whose observe run failed or did not run is reported unavailable
(``exposureComplete: false``). The score phase of a chain is started by
``observed_families_sensor`` once the observe runs of its group have finished.

Each asset writes its partition's Parquet file (``storage.analytics``) and the next one
reads it back in batches, so memory stays flat however many addresses are watched. A
re-run replaces the partition's files. The chain's state can only be observed now, so a
re-run of a past day keeps that day's stored snapshot (watch list, family targets,
observations and their key-family members, prices) and re-scores it; a past day without
one fails rather than pass today's state off as that day's (``observe_now``). A chain's
outage (``ChainUnavailable``) is retried by Dagster a few times, then fails that chain's
partition only. ``chain_readiness`` is partitioned by day alone. ``newly_watched_scores``
(not partitioned) scores addresses the sensor found, with their families looked up on the
spot as a scan does, so they are served within a minute of being watched.

Resources are injected clients (``pipelines.resources``): an asset opens the ones it needs
with ``with resource.open() as client`` and the resource owns everything opened for it.
Dates come from the partition key, and times from the injected ``clock`` resource, never
from a hidden wall clock.
"""

import warnings
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import polars as pl
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetDep,
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    BetaWarning,
    Config,
    DailyPartitionsDefinition,
    DimensionPartitionMapping,
    Failure,
    IdentityPartitionMapping,
    MaterializeResult,
    MetadataValue,
    MultiPartitionKey,
    MultiPartitionMapping,
    MultiPartitionsDefinition,
    RetryRequested,
    StaticPartitionMapping,
    StaticPartitionsDefinition,
    asset,
    asset_check,
    multi_asset,
)
from pydantic import Field

from chains.clients.prices import Price
from chains.environment import Environment
from chains.errors import ChainUnavailable
from chains.keys import family_group
from chains.registry import CHAINS, Chain
from core.clock import Clock
from pipelines.families import LINK_CHUNK, FamilyLinks, family_links, link_frame, sibling_sources, with_index
from pipelines.rescore import (
    DAILY,
    FAMILY_TARGET_ORDER,
    LINK_CHECK_COLUMNS,
    NEW,
    Batch,
    ObservedBatch,
    ObserveStats,
    export_family_targets,
    export_watchlist,
    family_target_rows,
    link_problems,
    price_rows,
    read_batches,
    records_for,
    risk_problems,
    risk_rows,
    watch_entries_frame,
    watchers_in_range,
)
from pipelines.resources import (
    AnalyticsResource,
    ChainDataClient,
    ChainDataResource,
    ClockResource,
    OperationalStore,
    OperationalStoreResource,
    PriceClient,
    PriceResource,
)
from scoring import load_readiness
from scoring.model import WEIGHT_PERCENT
from scoring.readiness import ReadinessData
from services.exposure_index import ExposureIndex, IndexAnswer
from storage.analytics import TABLES, AnalyticsStore
from storage.bitcoin_index import BitcoinIndexStore
from storage.errors import StoreUnavailable
from storage.models import WatchedAddress

START_DATE = "2026-01-01"
CHAIN_PARTITIONS = StaticPartitionsDefinition([chain.value for chain in CHAINS])
DAILY_PARTITIONS = DailyPartitionsDefinition(start_date=START_DATE, end_offset=1, timezone="UTC")
"""Days in UTC; ``end_offset=1`` makes today's partition exist, so the 02:00 run scores today."""
CHAIN_DAY = MultiPartitionsDefinition({"chain": CHAIN_PARTITIONS, "date": DAILY_PARTITIONS})
with warnings.catch_warnings():  # the mapping classes are marked beta; they are what a mapping by dimension needs
    warnings.simplefilter("ignore", BetaWarning)
    FAMILY_MAPPING = MultiPartitionMapping(
        {
            "chain": DimensionPartitionMapping(
                "chain",
                StaticPartitionMapping({chain.value: {c.value for c in family_group(chain)} for chain in CHAINS}),
            ),
            "date": DimensionPartitionMapping("date", IdentityPartitionMapping()),
        }
    )
"""A chain's day depends on the same day of every chain of its family group (itself included)."""

RESCORING = "rescoring"
PUBLISH_BATCH = 1_000
RISK_BATCH = 10_000
RISK_CHECKS = ("no_null_scores", "weights_sum_to_one", "row_counts_match", "family_links_hold")


def chain_day(key: str | MultiPartitionKey) -> tuple[Chain, date]:
    """The chain and scan date of a ``CHAIN_DAY`` key (``ethereum|2026-11-22``)."""
    if not isinstance(key, MultiPartitionKey):
        key = CHAIN_DAY.get_partition_key_from_str(key)
    dims = key.keys_by_dimension
    return Chain(dims["chain"]), date.fromisoformat(dims["date"])


def observe_now(day: date, snapshot: Path, today: date) -> bool:
    """Whether a run of ``day`` fetches the watch list, chain state or prices now (True)
    or keeps the snapshot stored for that day (False). Today is always fetched (a re-run
    replaces today's rows); so is yesterday while it has no snapshot yet (a run that
    crossed midnight). Older days keep theirs, and fail without one: backfilling them
    with today's state would rewrite history under the wrong date."""
    if day >= today or (day == today - timedelta(days=1) and not snapshot.exists()):
        return True
    if snapshot.exists():
        return False
    raise Failure(
        description=f"no snapshot was stored for {day} ({snapshot}), and the state of {day} cannot be "
        f"observed now (today is {today}): only today's partition can be fetched, past "
        "partitions can only be re-scored from their stored snapshot"
    )


def _kept(context: AssetExecutionContext, snapshot: Path, asset_key: str | None = None) -> MaterializeResult:
    context.log.info(f"kept the stored snapshot {snapshot} (a past day cannot be observed again)")
    rows = pl.scan_parquet(snapshot).select(pl.len()).collect().item()
    return MaterializeResult(
        asset_key=asset_key,
        metadata={"rows": rows, "kept_snapshot": True, "path": MetadataValue.path(str(snapshot))},
    )


def _upstream_fault(context: AssetExecutionContext, retries: int, seconds: float, exc: Exception, what: str):
    """Retry an upstream fault (chain outage, operational store busy) a few times, then fail."""
    if context.retry_number < retries:
        context.log.warning(f"{what}: {exc}; retry {context.retry_number + 1} of {retries} in {seconds:g} s")
        return RetryRequested(max_retries=retries, seconds_to_wait=seconds)
    return Failure(description=f"{what}: {exc}", metadata={"error_code": getattr(exc, "code", "")})


# --- the chain-day partition ------------------------------------------------------------


@asset(partitions_def=CHAIN_DAY, group_name=RESCORING, kinds={"sqlite", "parquet"})
def watched_addresses(
    context: AssetExecutionContext,
    operational_store: OperationalStoreResource,
    analytics: AnalyticsResource,
    clock: ClockResource,
) -> MaterializeResult:
    """Every tenant's watched addresses on the chain (both environments), exported from the
    operational store in (environment, address) order: the ``watchlist`` table."""
    chain, day = chain_day(context.partition_key)
    store = analytics.store()
    target = store.daily_file("watchlist", day, chain.value)
    now = clock.now()
    if not observe_now(day, target, now.date()):
        return _kept(context, target)
    with operational_store.open(writer=False) as op, store.writer("watchlist", target) as writer:
        rows, distinct = export_watchlist(op, chain, writer, Batch(day, DAILY, context.run.run_id), now)
    return MaterializeResult(
        metadata={"rows": rows, "distinct_addresses": distinct, "path": MetadataValue.path(str(target))}
    )


@asset(partitions_def=CHAIN_DAY, group_name=RESCORING, kinds={"sqlite", "parquet"})
def family_targets(
    context: AssetExecutionContext,
    operational_store: OperationalStoreResource,
    chain_data: ChainDataResource,
    analytics: AnalyticsResource,
    clock: ClockResource,
) -> MaterializeResult:
    """The chain's addresses that share a key with a watched address: the siblings on this
    chain (``chains.keys.siblings(address, on=chain)``) of every address watched on a chain of its
    family group (``sibling_sources``), with the watched address's family, sorted by
    (environment, address): ``family_targets``. Only same-chain siblings when
    ``chain_data.family_chains`` leaves the chain out."""
    chain, day = chain_day(context.partition_key)
    store = analytics.store()
    target = store.daily_file("family_targets", day, chain.value)
    now = clock.now()
    if not observe_now(day, target, now.date()):
        return _kept(context, target)
    same_chain = tuple(c for c in sibling_sources(chain) if c is chain)  # Bitcoin's own key hashes
    sources = sibling_sources(chain) if chain_data.family_allowed(chain) else same_chain
    batch = Batch(day, DAILY, context.run.run_id)
    with (
        operational_store.open(writer=False) as op,
        store.writer("family_targets", target, sort_by=FAMILY_TARGET_ORDER) as writer,
    ):
        read, invalid = export_family_targets(op, chain, writer, batch, sources=sources)
    return MaterializeResult(
        metadata={
            "rows": writer.rows,
            "watched_read": read,
            "invalid_skipped": invalid,
            "source_chains": ", ".join(c.value for c in sources),
            "path": MetadataValue.path(str(target)),
        }
    )


@multi_asset(
    name="chain_observations",
    specs=[
        AssetSpec(
            "chain_observations",
            deps=[watched_addresses, family_targets],
            group_name=RESCORING,
            kinds={"parquet"},
            description="What the chain says about each watched address: address_observations.",
        ),
        AssetSpec(
            "key_exposure",
            deps=[watched_addresses, family_targets],
            group_name=RESCORING,
            kinds={"parquet"},
            description="Every watched address and family target of the chain under each key family it "
            "was observed for, with what revealed the key: key_exposure.",
        ),
    ],
    partitions_def=CHAIN_DAY,
)
def chain_observations(
    context: AssetExecutionContext, chain_data: ChainDataResource, analytics: AnalyticsResource, clock: ClockResource
) -> Iterator[MaterializeResult]:
    """The chain's watched addresses and family targets, each observed once, in batches of
    ``chain_data.batch_size`` through the chain's client: ``address_observations`` (the
    watched ones) and ``key_exposure`` (all of them, with their evidence)."""
    chain, day = chain_day(context.partition_key)
    store = analytics.store()
    target = store.daily_file("address_observations", day, chain.value)
    members = store.daily_file("key_exposure", day, chain.value)
    if not observe_now(day, target, clock.today()):
        if not members.exists():
            raise Failure(description=f"the snapshot of {day} has no key_exposure file ({members})")
        yield _kept(context, target, "chain_observations")
        yield _kept(context, members, "key_exposure")
        return
    stats = ObserveStats()
    batch = Batch(day, DAILY, context.run.run_id)
    watch = read_batches(store.daily_file("watchlist", day, chain.value), ["environment", "address"])
    family = read_batches(store.daily_file("family_targets", day, chain.value), ["environment", "address", "family"])
    try:
        with (
            chain_data.open() as source,
            store.writer("address_observations", target) as writer,
            store.writer("key_exposure", members) as member_writer,
        ):
            for observed in source.observe(chain, watch, batch, stats, family):
                writer.write(observed.observations)
                member_writer.write(observed.members)
    except ChainUnavailable as exc:
        raise _upstream_fault(
            context, chain_data.outage_retries, chain_data.outage_retry_seconds, exc, f"{chain} unavailable"
        ) from exc
    for problem in stats.invalid[:20]:
        context.log.warning(f"skipped invalid watched address {problem}")
    yield MaterializeResult(
        asset_key="chain_observations",
        metadata={
            "rows": stats.observed,
            "invalid_addresses": len(stats.invalid),
            "path": MetadataValue.path(str(target)),
        },
    )
    exposed = pl.scan_parquet(members).filter(pl.col("kind").is_not_null()).select(pl.len()).collect().item()
    yield MaterializeResult(
        asset_key="key_exposure",
        metadata={
            "rows": member_writer.rows,
            "siblings_observed": stats.siblings,
            "evidence_rows": exposed,
            "path": MetadataValue.path(str(members)),
        },
    )


@asset(partitions_def=CHAIN_DAY, group_name=RESCORING, deps=[watched_addresses], kinds={"parquet"})
def native_prices(
    context: AssetExecutionContext, prices: PriceResource, analytics: AnalyticsResource, clock: ClockResource
) -> MaterializeResult:
    """The USD price of the chain's native coin in each environment that has watched
    addresses on it (null when no source has a usable one): ``native_prices``."""
    chain, day = chain_day(context.partition_key)
    store = analytics.store()
    target = store.daily_file("native_prices", day, chain.value)
    if not observe_now(day, target, clock.today()):
        return _kept(context, target)
    watch = store.daily_file("watchlist", day, chain.value)
    present = pl.scan_parquet(watch).select(pl.col("environment").unique()).collect()["environment"].to_list()
    environments = sorted(Environment(e) for e in present)
    found: dict[Environment, Price | None] = dict.fromkeys(environments)
    valued = [e for e in environments if prices.valued(e, chain)]  # test networks: no USD value
    if valued:  # nothing watched on this chain: no upstream call at all
        with prices.open() as source:
            found.update(source.native_prices(chain, valued))
    frame = price_rows(chain, found, Batch(day, DAILY, context.run.run_id), clock.now())
    store.write_frame("native_prices", target, frame)
    return MaterializeResult(
        metadata={
            f"{row['environment']}_usd": row["price_usd"] if row["price_usd"] is not None else "unknown"
            for row in frame.iter_rows(named=True)
        }
    )


def day_members(store: AnalyticsStore, chain: Chain, day: date) -> dict[str, pl.LazyFrame]:
    """The ``key_exposure`` files of ``day`` of every chain of the chain's family group
    (those that exist: a chain whose observe run failed or did not run has none)."""
    found = {c.value: store.daily_file("key_exposure", day, c.value) for c in family_group(chain)}
    return {name: pl.scan_parquet(path) for name, path in found.items() if path.exists()}


def bitcoin_index(store: AnalyticsStore) -> tuple[ExposureIndex, dict[str, IndexAnswer]]:
    """The chain-wide Bitcoin exposure index of the analytics folder, and each environment's
    state of it (for the verdicts' limits)."""
    index = ExposureIndex(BitcoinIndexStore(store.root))
    return index, {env.value: index.state(env) for env in Environment}


def linked_batches(
    observations: Path,
    members: dict[str, pl.LazyFrame],
    chunk: int = RISK_BATCH,
    window: int = LINK_CHUNK,
    index: ExposureIndex | None = None,
) -> Iterator[tuple[FamilyLinks, pl.DataFrame]]:
    """The observation file in batches of ``chunk`` rows, each with the family links of a
    window of ``window`` rows around it (and the Bitcoin ``index``'s evidence for them): one
    pass over the members per window, while only one batch of full observation rows is held
    at a time."""
    links, end, offset = None, 0, 0
    for frame in read_batches(observations, chunk=chunk):
        if links is None or offset + frame.height > end:
            size = max(window, frame.height)
            families = pl.scan_parquet(observations).slice(offset, size).select("environment", "family")
            links = with_index(family_links(members, families), families.collect(), index)
            end = offset + size
        yield links, frame
        offset += frame.height


@asset(
    partitions_def=CHAIN_DAY,
    group_name=RESCORING,
    deps=[
        AssetDep(AssetKey("chain_observations")),
        AssetDep(AssetKey("key_exposure"), partition_mapping=FAMILY_MAPPING),
        native_prices,
    ],
    kinds={"polars", "parquet"},
)
def address_risk(
    context: AssetExecutionContext, analytics: AnalyticsResource, clock: ClockResource
) -> MaterializeResult:
    """Each observation linked to its key family (``pipelines.families.link_frame`` over the
    day's ``key_exposure`` of every chain of the family group) and scored by
    ``scoring.score_frame`` (five factors, risk value and band, chain grade): this day's
    rows of ``address_risk``."""
    chain, day = chain_day(context.partition_key)
    store = analytics.store()
    readiness = load_readiness()
    prices = pl.read_parquet(store.daily_file("native_prices", day, chain.value))
    members = day_members(store, chain, day)
    missing = [c.value for c in family_group(chain) if c.value not in members]
    if missing:
        context.log.warning(f"no key_exposure of {day} for {', '.join(missing)}: those chains are unavailable")
    scanned_at = clock.now()
    target = store.daily_file("address_risk", day, chain.value)
    observations = store.daily_file("address_observations", day, chain.value)
    index, states = bitcoin_index(store)
    with store.writer("address_risk", target) as writer:
        for links, frame in linked_batches(observations, members, index=index):
            writer.write(risk_rows(link_frame(frame, links, states), prices, readiness, scanned_at))
    bands = pl.scan_parquet(target).group_by("risk_score").agg(pl.len()).collect().sort("risk_score").iter_rows()
    linked = (
        pl.scan_parquet(target)
        .select(
            by_family=(pl.col("exposure") != pl.col("observed_exposure")).sum(),
            incomplete=(~pl.col("exposure_complete")).sum(),
        )
        .collect()
        .row(0, named=True)
    )
    return MaterializeResult(
        metadata={
            "rows": writer.rows,
            "path": MetadataValue.path(str(target)),
            "family_chains_seen": ", ".join(members),
            "exposed_by_family": linked["by_family"],
            "incomplete_verdicts": linked["incomplete"],
            **{f"count_{band}": count for band, count in bands},
        }
    )


@asset(partitions_def=CHAIN_DAY, group_name=RESCORING, deps=[address_risk], kinds={"sqlite"})
def published_scan_results(
    context: AssetExecutionContext, operational_store: OperationalStoreResource, analytics: AnalyticsResource
) -> MaterializeResult:
    """The scores written to the operational store, one result per (tenant, environment,
    chain, address), so the scan endpoint serves them (source ``pipeline``)."""
    chain, day = chain_day(context.partition_key)
    store = analytics.store()
    readiness = load_readiness()
    watch = store.daily_file("watchlist", day, chain.value)
    _, states = bitcoin_index(store)
    saved = skipped = 0
    try:
        with operational_store.open() as op:
            for frame in read_batches(store.daily_file("address_risk", day, chain.value), chunk=PUBLISH_BATCH):
                done, passed = op.publish(records_for(frame, watchers_in_range(watch, frame), readiness, states))
                saved, skipped = saved + done, skipped + passed
    except StoreUnavailable as exc:
        raise _upstream_fault(context, 3, 10.0, exc, "operational store unavailable") from exc
    return MaterializeResult(metadata={"published": saved, "skipped_fresher": skipped})


# --- checks -----------------------------------------------------------------------------


def risk_file_checks(
    store: AnalyticsStore, chain: str, day: date, names: tuple[str, ...] = RISK_CHECKS
) -> dict[str, tuple[bool, dict]]:
    """The named checks of a partition's ``address_risk`` file: name -> (passed, metadata).
    The row count comes from Parquet metadata; the score checks read the file in batches."""
    observations = store.daily_file("address_observations", day, chain)
    risk = store.daily_file("address_risk", day, chain)
    found: dict[str, tuple[bool, dict]] = {}
    if {"no_null_scores", "weights_sum_to_one"} & set(names):
        problems = {"null_scores": 0, "risk_value_mismatch": 0}
        for frame in read_batches(risk):
            for name, count in risk_problems(frame).items():
                problems[name] += count
        weight_total = sum(WEIGHT_PERCENT.values())
        found["no_null_scores"] = (problems["null_scores"] == 0, {"rows_with_null_scores": problems["null_scores"]})
        found["weights_sum_to_one"] = (
            weight_total == 100 and problems["risk_value_mismatch"] == 0,
            {"weight_total": weight_total / 100, "risk_values_off_the_weighted_sum": problems["risk_value_mismatch"]},
        )
    if "row_counts_match" in names:
        counts = {
            name: pl.scan_parquet(path).select(pl.len()).collect().item()
            for name, path in (("observation_rows", observations), ("risk_rows", risk))
        }
        found["row_counts_match"] = (counts["observation_rows"] == counts["risk_rows"], counts)
    if "family_links_hold" in names:
        broken = {"raised_without_evidence": 0, "complete_with_gaps": 0}
        for frame in read_batches(risk, ["exposure", "observed_exposure", "exposure_evidence", *LINK_CHECK_COLUMNS]):
            for name, count in link_problems(frame).items():
                broken[name] += count
        found["family_links_hold"] = (not any(broken.values()), broken)
    return {name: found[name] for name in names}


def _risk_check(name: str, description: str):
    @asset_check(asset=address_risk, name=name, blocking=True, description=description)
    def check(context: AssetCheckExecutionContext, analytics: AnalyticsResource) -> AssetCheckResult:
        chain, day = chain_day(context.partition_key)
        passed, metadata = risk_file_checks(analytics.store(), chain.value, day, (name,))[name]
        return AssetCheckResult(passed=passed, metadata=metadata)

    return check


risk_checks = [
    _risk_check("no_null_scores", "Every row has all five factor scores, a risk value, band and grade."),
    _risk_check("weights_sum_to_one", "The factor weights sum to 1 and every risk value is their weighted sum."),
    _risk_check("row_counts_match", "address_risk has exactly one row per address_observations row."),
    _risk_check(
        "family_links_hold",
        "An exposure raised by the key family is EXPOSED_AT_REST with evidence; a complete verdict "
        "has no family chain unavailable.",
    ),
]


# --- chain readiness --------------------------------------------------------------------


@asset(partitions_def=DAILY_PARTITIONS, group_name="readiness", kinds={"parquet"})
def chain_readiness(context: AssetExecutionContext, analytics: AnalyticsResource) -> MaterializeResult:
    """The 19 chains' post-quantum readiness (``load_readiness()``): one row per chain factor."""
    day = date.fromisoformat(context.partition_key)
    readiness = load_readiness()
    rows = [
        {
            "chain": name,
            "category": CHAINS[Chain(name)].category.value,
            "family": info.family.value,
            "grade": info.grade.letter,
            "grade_label": info.grade.label,
            "factor": f.factor.value,
            "status": f.status.value,
            "detail": f.detail,
            "source": f.source,
            "scoring_version": readiness.scoring_version,
            "readiness_as_of": readiness.as_of,
            "scan_date": day,
            "run_id": context.run.run_id,
        }
        for name, info in readiness.chains.items()
        for f in info.factors
    ]
    store = analytics.store()
    target = store.daily_file("chain_readiness", day)
    store.write_frame("chain_readiness", target, pl.DataFrame(rows, schema=TABLES["chain_readiness"].schema))
    grades = {name: info.grade.letter for name, info in readiness.chains.items()}
    return MaterializeResult(metadata={"chains": len(grades), "grades": MetadataValue.json(grades)})


@asset_check(asset=chain_readiness, description="All 19 chains are graded.")
def all_chains_graded(context: AssetCheckExecutionContext, analytics: AnalyticsResource) -> AssetCheckResult:
    day = date.fromisoformat(context.partition_key)
    frame = pl.read_parquet(analytics.store().daily_file("chain_readiness", day))
    missing = sorted(set(c.value for c in CHAINS) - set(frame["chain"].to_list()))
    return AssetCheckResult(passed=not missing, metadata={"missing": ", ".join(missing) or "none"})


# --- newly watched addresses ------------------------------------------------------------


class NewWatchConfig(Config):
    """Which watch-list entries a sensor run scores."""

    watch_ids: list[str] = Field(description="Watch-list entry ids to score.")
    created_after: str | None = Field(default=None, description="ISO time before the oldest entry (bounds the read).")


@dataclass(frozen=True, slots=True)
class NewScoring:
    """What scoring newly watched entries needs: the run's open clients, its provenance
    (``batch``: today's date, ``NEW``, the run id), the readiness data and the clock."""

    chain_data: ChainDataClient
    prices: PriceClient
    operational: OperationalStore
    analytics: AnalyticsStore
    batch: Batch
    readiness: ReadinessData
    clock: Clock


@asset(group_name="new_addresses", kinds={"parquet", "sqlite"})
def newly_watched_scores(
    context: AssetExecutionContext,
    config: NewWatchConfig,
    operational_store: OperationalStoreResource,
    chain_data: ChainDataResource,
    prices: PriceResource,
    analytics: AnalyticsResource,
    clock: ClockResource,
) -> MaterializeResult:
    """Scores addresses added to watch lists since the sensor's last tick, linked to their
    key families looked up on the spot (as a scan does), publishes them, and adds them to
    today's analytics rows (``new-<run>.parquet`` files, ``key_exposure`` included) until
    the next daily run covers them. A chain that is down does not stop the others; a
    sibling chain that is down makes the verdicts incomplete."""
    wanted = set(config.watch_ids)
    after = datetime.fromisoformat(config.created_after) if config.created_after else None
    failed: dict[str, str] = {}
    unavailable: set[str] = set()
    published = 0
    with operational_store.open() as op, chain_data.open() as source, prices.open() as price_source:
        entries = [e for e in op.watched(created_after=after) if e.id in wanted]
        by_chain: dict[Chain, list[WatchedAddress]] = defaultdict(list)
        for entry in entries:
            by_chain[Chain(entry.chain)].append(entry)
        run = NewScoring(
            chain_data=source,
            prices=price_source,
            operational=op,
            analytics=analytics.store(),
            batch=Batch(clock.today(), NEW, context.run.run_id),
            readiness=load_readiness(),
            clock=clock,
        )
        for chain, group in by_chain.items():
            try:
                saved, down = _score_new(run, chain, group)
                published += saved
                unavailable.update(down)
            except ChainUnavailable as exc:
                failed[chain.value] = str(exc)
                context.log.warning(f"{chain} unavailable: {exc}")
    if failed:
        raise _upstream_fault(
            context,
            chain_data.outage_retries,
            chain_data.outage_retry_seconds,
            ChainUnavailable("; ".join(f"{c}: {m}" for c, m in failed.items())),
            f"{len(failed)} chain(s) unavailable",
        )
    return MaterializeResult(
        metadata={
            "entries": len(entries),
            "missing_entries": len(wanted) - len(entries),
            "published": published,
            "chains": ", ".join(c.value for c in by_chain),
            "family_chains_unavailable": ", ".join(sorted(unavailable)) or "none",
        }
    )


def _concat(batches: list[ObservedBatch], part: str, table: str) -> pl.DataFrame:
    frames = [getattr(b, part) for b in batches]
    return pl.concat(frames) if frames else TABLES[table].schema.to_frame()


def _score_new(run: NewScoring, chain: Chain, entries: list[WatchedAddress]) -> tuple[int, list[str]]:
    """Observe one chain's new entries with their key families (the siblings on the chain
    itself in the same calls, then the other chains of the family concurrently; a sibling
    chain that is down is reported unavailable, as a scan does), link, price, score, land
    and publish them; the count published and the sibling chains that were unavailable."""
    batch, store = run.batch, run.analytics
    now = run.clock.now()
    watch = watch_entries_frame(entries, batch, now)
    watched = watch.select("environment", "address").unique(maintain_order=True).rows()
    siblings = {
        other: family_target_rows(watched, chain, other, batch).sort(FAMILY_TARGET_ORDER).unique(maintain_order=True)
        for other in family_group(chain)
        if other is chain or run.chain_data.family_allowed(other)
    }
    own = list(run.chain_data.observe(chain, [watch], batch, ObserveStats(), [siblings.pop(chain)]))
    observations = _concat(own, "observations", "address_observations")
    members = {chain: _concat(own, "members", "key_exposure")}
    unavailable = []

    def observe_siblings(other: Chain) -> list[ObservedBatch]:
        return list(run.chain_data.observe(other, [], batch, ObserveStats(), [siblings[other]]))

    wanted = [other for other, targets in siblings.items() if targets.height]
    with ThreadPoolExecutor(max_workers=max(len(wanted), 1), thread_name_prefix="qday-family") as pool:
        pending = {other: pool.submit(observe_siblings, other) for other in wanted}  # all chains at once
        for other, future in pending.items():
            try:
                members[other] = _concat(future.result(), "members", "key_exposure")
            except ChainUnavailable:
                unavailable.append(other.value)
    index, states = bitcoin_index(store)
    links = family_links({other.value: frame.lazy() for other, frame in members.items()})
    links = with_index(links, observations.select("environment", "family"), index)
    environments = sorted({e.environment for e in entries})
    price_frame = price_rows(chain, run.prices.native_prices(chain, environments), batch, now)
    risk = risk_rows(link_frame(observations, links, states), price_frame, run.readiness, run.clock.now())
    for table, frame in (
        ("watchlist", watch),
        ("address_observations", observations),
        ("native_prices", price_frame),
        ("address_risk", risk),
    ):
        store.write_frame(table, store.new_file(table, batch.scan_date, chain.value, batch.run_id), frame)
    for other, frame in members.items():
        store.write_frame(
            "key_exposure", store.new_file("key_exposure", batch.scan_date, other.value, batch.run_id), frame
        )
    saved, _ = run.operational.publish(records_for(risk, watch, run.readiness, states))
    return saved, unavailable


OBSERVE_ASSETS = [watched_addresses, family_targets, chain_observations, native_prices]
"""The observe phase of a chain's day (job ``observe_watched``)."""
SCORE_ASSETS = [address_risk, published_scan_results]
"""The score phase (job ``score_watched``), once the family group's observe runs are done."""
RESCORING_ASSETS = [*OBSERVE_ASSETS, *SCORE_ASSETS]
"""Both phases in one run (job ``rescore_watched``; the links see what the other chains
of the family group have observed that day so far)."""
ALL_ASSETS = [*RESCORING_ASSETS, chain_readiness, newly_watched_scores]
ALL_CHECKS = [*risk_checks, all_chains_graded]
