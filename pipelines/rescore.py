"""Rescoring, free of Dagster: watch list and family targets → observations and key-family
members → prices → linked risk → published results.

Every step streams: it reads its input in batches (the store's watch-list export, Parquet
batches) and writes through ``ParquetFileWriter``, so memory depends on the batch size, not
on how many addresses are watched. Rows are kept in (environment, address) order from the
watch-list export on, which lets the publish step find an address's watchers with a range
read. Nothing here runs SQL: the operational store is reached through ``storage``.

Key families (``pipelines.families``): a chain's observation targets are its watched
addresses and the siblings there of addresses watched on its family's chains
(``export_family_targets``), each observed once; every target lands in ``key_exposure``
with its evidence (``member_rows``), and ``pipelines.families.link_frame`` links each
watched address to its family before scoring.

The publish step builds each stored result with ``scoring.records.scored_scan`` from
``scoring.result.wallet_risk`` (``storage.scan_records`` makes it one record per tenant):
exactly what the scan endpoint stores for the same linked observation, price and coverage.
Addresses with neither activity nor evidence are scored for the analytics tables but not
published (the scan endpoint answers SCAN_003 for them).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from itertools import groupby
from pathlib import Path
from typing import Protocol

import polars as pl

from chains.clients.prices import Price
from chains.codecs.address import Address
from chains.codecs.detect import parse_address
from chains.environment import Environment
from chains.errors import ChainError
from chains.evidence import Coverage, evidence_of
from chains.keys import family_key, siblings
from chains.observation import AccountType, EvidenceKind, Exposure, ExposureEvidence, Observation
from chains.registry import CHAINS, Chain
from pipelines.families import sibling_sources
from pipelines.runner import LoopThread, ordered
from pipelines.sources import ChainData, PriceData
from scoring import observations_to_frame, score_frame, wallet_risk, weighted_risk_value
from scoring.readiness import ReadinessData
from scoring.records import scored_scan
from scoring.risk import SCORE_COLUMN
from services.daily_alerts import daily_alerts
from services.exposure_index import IndexAnswer
from services.observer import limits_of
from storage.analytics import TABLES, ParquetFileWriter, conform
from storage.database import Row
from storage.models import ScanResult, WatchedAddress
from storage.repository import ScanStore
from storage.scan_records import scan_result
from storage.sql_scans import WATCH_EXPORT_COLUMNS

DAILY = "daily"
NEW = "new"
SOURCE = "pipeline"


@dataclass(frozen=True, slots=True)
class Batch:
    """Provenance stamped on every row a run writes."""

    scan_date: date
    batch: str  # DAILY or NEW
    run_id: str

    def columns(self) -> list[pl.Expr]:
        return [
            pl.lit(self.scan_date, pl.Date()).alias("scan_date"),
            pl.lit(self.batch).alias("batch"),
            pl.lit(self.run_id).alias("run_id"),
        ]


# --- watch list -------------------------------------------------------------------------

_WATCH_SCHEMA = {name: pl.String() for name in WATCH_EXPORT_COLUMNS}  # rows as the store exports them


def _watch_frame(rows: Sequence[tuple], batch: Batch, exported_at: datetime) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_WATCH_SCHEMA, orient="row").with_columns(
        pl.col("created_at").str.to_datetime(time_unit="us", time_zone="UTC"),
        *batch.columns(),
        pl.lit(exported_at, pl.Datetime("us", "UTC")).alias("exported_at"),
    )


class WatchExport(Protocol):
    """What the exports read the watch list from (``pipelines.resources.OperationalStore``)."""

    def export_watchlist(self, chain: str, chunk: int) -> Generator[list[Row], None, None]:
        """Every tenant's entries on ``chain`` in (environment, address, account) order,
        ``chunk`` rows at a time, as one snapshot; closing the generator ends the read."""
        ...


def export_watchlist(
    scans: WatchExport,
    chain: Chain,
    writer: ParquetFileWriter,
    batch: Batch,
    exported_at: datetime,
    chunk: int = 10_000,
) -> tuple[int, int]:
    """Stream every tenant's watched addresses on ``chain`` (both environments) into
    ``writer``, ordered by (environment, address, account); returns the row count and
    the number of distinct (environment, address) pairs.

    The store reads it as one statement, so the export is a consistent snapshot of the
    watch list."""
    distinct, previous = 0, None
    rows_of = scans.export_watchlist(chain.value, chunk)
    try:
        for rows in rows_of:
            for row in rows:
                if (row[2], row[4]) != previous:
                    distinct, previous = distinct + 1, (row[2], row[4])
            writer.write(_watch_frame(rows, batch, exported_at))
    finally:
        rows_of.close()  # ends the read statement now, even when a write failed
    return writer.rows, distinct


def watch_entries_frame(entries: Sequence[WatchedAddress], batch: Batch, exported_at: datetime) -> pl.DataFrame:
    """Watch-list rows of the given entries (the new-address sensor's runs)."""
    rows = sorted(
        (
            (
                e.id,
                e.account_id,
                e.environment.value,
                e.chain,
                e.address,
                e.label,
                e.created_at.astimezone(UTC).isoformat(),
            )
            for e in entries
        ),
        key=lambda r: (r[2], r[4], r[1]),
    )
    return _watch_frame(rows, batch, exported_at)


# --- family targets ---------------------------------------------------------------------

FAMILY_TARGET_ORDER = ("environment", "address", "family")


def family_target_rows(
    rows: Iterable[tuple[str, str]], source: Chain, chain: Chain, batch: Batch, invalid: list[str] | None = None
) -> pl.DataFrame:
    """``family_targets`` rows: the siblings on ``chain`` of the (environment, address)
    pairs watched on ``source``, each with the watched address's family. Addresses that do
    not parse are skipped (their own chain's run reports them) and listed in ``invalid``."""
    found: list[tuple[str, str, str, str]] = []
    for env, text in rows:
        try:
            address = parse_address(text, source, Environment(env).network)
        except ChainError as exc:
            if invalid is not None:
                invalid.append(f"{env}:{source}:{text}: {exc}")
            continue
        family = family_key(address)
        found.extend((env, chain.value, str(sibling), family) for sibling in siblings(address, on=chain))
    frame = pl.DataFrame(
        found,
        schema={"environment": pl.String(), "chain": pl.String(), "address": pl.String(), "family": pl.String()},
        orient="row",
    )
    return frame.with_columns(*batch.columns())


def export_family_targets(
    scans: WatchExport,
    chain: Chain,
    writer: ParquetFileWriter,
    batch: Batch,
    chunk: int = 10_000,
    sources: Sequence[Chain] | None = None,
) -> tuple[int, int]:
    """Stream the siblings on ``chain`` of every address watched on ``sources`` (default:
    the chains of its family group that can have siblings there,
    ``pipelines.families.sibling_sources``) into ``writer`` (sorted by environment,
    address, family; repeats dropped); returns the number of watched addresses read and of
    invalid ones skipped."""
    read, invalid = 0, list[str]()
    for source in sibling_sources(chain) if sources is None else sources:
        rows_of = scans.export_watchlist(source.value, chunk)
        previous: tuple[str, str] | None = None
        try:
            for rows in rows_of:
                distinct: list[tuple[str, str]] = []
                for row in rows:
                    if (row[2], row[4]) != previous:
                        previous = (str(row[2]), str(row[4]))
                        distinct.append(previous)
                read += len(distinct)
                writer.write(family_target_rows(distinct, source, chain, batch, invalid))
        finally:
            rows_of.close()
    return read, len(invalid)


# --- targets ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """One address to observe: whether it is watched on the chain, and the families it is
    observed for as another address's sibling."""

    address: str
    watched: bool
    families: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TargetBatch:
    """Distinct addresses of one environment, in (environment, address) order."""

    environment: Environment
    targets: tuple[Target, ...]

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(t.address for t in self.targets)


def _watched_keys(frames: Iterable[pl.DataFrame]) -> Iterator[tuple[str, str, str | None]]:
    for frame in frames:
        for env, address in zip(frame["environment"].to_list(), frame["address"].to_list(), strict=True):
            yield env, address, None


def _family_keys(frames: Iterable[pl.DataFrame]) -> Iterator[tuple[str, str, str | None]]:
    for frame in frames:
        yield from zip(
            frame["environment"].to_list(), frame["address"].to_list(), frame["family"].to_list(), strict=True
        )


def merged_targets(watch: Iterable[pl.DataFrame], family: Iterable[pl.DataFrame] = ()) -> Iterator[tuple[str, Target]]:
    """(environment, ``Target``) of watch-list frames and ``family_targets`` frames, both
    sorted by (environment, address): each address once, in that order."""
    merged = heapq.merge(_watched_keys(watch), _family_keys(family), key=lambda item: (item[0], item[1]))
    for (env, address), items in groupby(merged, key=lambda item: (item[0], item[1])):
        families: dict[str, None] = {}
        watched = False
        for _, _, found in items:
            if found is None:
                watched = True  # one address watched by several tenants is observed once
            else:
                families[found] = None
        yield env, Target(address, watched, tuple(families))


def target_batches(
    frames: Iterable[pl.DataFrame], batch_size: int, family: Iterable[pl.DataFrame] = ()
) -> Iterator[TargetBatch]:
    """Distinct addresses of watch-list frames (and of ``family_targets`` frames) sorted by
    (environment, address), grouped into batches of at most ``batch_size`` addresses of
    one environment."""
    environment: str | None = None
    pending: list[Target] = []
    for env, target in merged_targets(frames, family):
        if env != environment or len(pending) >= batch_size:
            if pending and environment is not None:  # set together with the first address
                yield TargetBatch(Environment(environment), tuple(pending))
            environment, pending = env, []
        pending.append(target)
    if pending and environment is not None:
        yield TargetBatch(Environment(environment), tuple(pending))


def read_batches(path: Path, columns: Sequence[str] | None = None, chunk: int = 10_000) -> Iterator[pl.DataFrame]:
    """A Parquet file in order, ``chunk`` rows at a time."""
    frame = pl.scan_parquet(path)
    if columns is not None:
        frame = frame.select(columns)
    yield from frame.collect_batches(chunk_size=chunk, maintain_order=True)


# --- observations -----------------------------------------------------------------------


@dataclass
class ObserveStats:
    """What an observation pass saw: watched addresses observed, siblings observed for
    their families, invalid watched addresses skipped."""

    observed: int = 0
    siblings: int = 0
    invalid: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ObservedBatch:
    """One observe() call's rows: the watched addresses' ``address_observations`` rows and
    every target's ``key_exposure`` rows; ``siblings`` counts the targets not watched."""

    observations: pl.DataFrame
    members: pl.DataFrame
    siblings: int = 0


def _typed(batch: TargetBatch, chain: Chain, stats: ObserveStats) -> list[tuple[Target, Address]]:
    network = batch.environment.network
    typed = []
    for target in batch.targets:
        try:
            typed.append((target, parse_address(target.address, chain, network)))
        except ChainError as exc:  # stored before a codec fix, or edited by hand: skip, report
            stats.invalid.append(f"{batch.environment.value}:{target.address}: {exc}")
    return typed


def observation_rows(
    observations: Sequence[Observation], environment: Environment, batch: Batch, families: Sequence[str]
) -> pl.DataFrame:
    """Observations as rows of ``address_observations`` (no price yet), with each
    address's own family key."""
    frame = observations_to_frame(observations).drop("price_usd", "price_as_of")
    return conform(
        frame.with_columns(
            pl.lit(environment.value).alias("environment"),
            (pl.col("balance").cast(pl.Float64) / pl.lit(10.0).pow(pl.col("decimals").cast(pl.Int32))).alias(
                "balance_native"
            ),
            ((pl.col("tx_count") > 0) | (pl.col("balance") > 0)).alias("has_activity"),
            pl.Series("family", list(families), dtype=pl.String()),
            *batch.columns(),
        ),
        TABLES["address_observations"],
    )


_MEMBER_SCHEMA = {
    "family": pl.String(),
    "chain": pl.String(),
    "address": pl.String(),
    "address_type": pl.String(),
    "kind": pl.String(),
    "txid": pl.String(),
    "block_height": pl.Int64(),
    "observed_at": pl.Datetime("us", "UTC"),
}


def member_rows(
    found: Sequence[tuple[Observation, Sequence[str]]], environment: Environment, batch: Batch
) -> pl.DataFrame:
    """``key_exposure`` rows: each observation under each family it was observed for, one
    row per evidence (``chains.evidence.evidence_of``: the client's, or what its fields
    imply), or one row with a null ``kind`` when nothing revealed the key."""
    rows = []
    for observation, families in found:
        evidence = evidence_of(observation) or (None,)
        for family in families:
            for item in evidence:
                rows.append(
                    (
                        family,
                        item.chain if item else observation.chain,
                        item.address if item else observation.address,
                        observation.address_type,
                        item.kind.value if item else None,
                        item.txid if item else None,
                        item.block_height if item else None,
                        observation.observed_at,
                    )
                )
    frame = pl.DataFrame(rows, schema=_MEMBER_SCHEMA, orient="row")
    return conform(
        frame.with_columns(pl.lit(environment.value).alias("environment"), *batch.columns()), TABLES["key_exposure"]
    )


def observed_batch(
    found: Sequence[Observation], targets: Sequence[tuple[Target, Address]], environment: Environment, batch: Batch
) -> ObservedBatch:
    """The rows of one observe() call: watched targets in ``address_observations`` (with
    their own family), every target in ``key_exposure`` (a watched one under its own family
    too)."""
    watched, families, members = [], [], []
    for observation, (target, address) in zip(found, targets, strict=True):
        own = family_key(address)
        if target.watched:
            watched.append(observation)
            families.append(own)
        member_of = dict.fromkeys(((own,) if target.watched else ()) + target.families)
        members.append((observation, tuple(member_of)))
    return ObservedBatch(
        observation_rows(watched, environment, batch, families),
        member_rows(members, environment, batch),
        len(found) - len(watched),
    )


def observe_stream(
    loop: LoopThread,
    source: ChainData,
    chain: Chain,
    batches: Iterable[TargetBatch],
    batch: Batch,
    concurrency: int,
    stats: ObserveStats,
) -> Iterator[ObservedBatch]:
    """Observation and member rows per target batch, ``concurrency`` observe() calls in
    flight, in order.

    The first call of each environment goes alone: it checks the endpoint (a client
    verifies the chain id on its first call) before the others are sent, so a wrong URL
    fails once instead of ``concurrency`` times. ``ChainUnavailable`` from any call
    propagates (the chain's partition fails)."""
    first_calls: dict[Environment, asyncio.Future[None]] = {}

    async def observe(target: TargetBatch) -> ObservedBatch | None:
        typed = _typed(target, chain, stats)
        if not typed:
            return None
        addresses = [address for _, address in typed]
        gate = first_calls.get(target.environment)
        if gate is None:
            gate = first_calls[target.environment] = asyncio.get_running_loop().create_future()
            try:
                found = await source.observe(target.environment, chain, addresses)
            finally:
                gate.set_result(None)
        else:
            await gate
            found = await source.observe(target.environment, chain, addresses)
        return observed_batch(found, typed, target.environment, batch)

    for observed in ordered(loop, observe, batches, concurrency):
        if observed is not None:
            stats.observed += observed.observations.height
            stats.siblings += observed.siblings
            yield observed


# --- prices -----------------------------------------------------------------------------


def price_rows(
    chain: Chain, found: dict[Environment, Price | None], batch: Batch, fetched_at: datetime
) -> pl.DataFrame:
    """One ``native_prices`` row per environment (price null when unknown)."""
    symbol = CHAINS[chain].symbol
    rows = [
        {
            "environment": env.value,
            "chain": chain.value,
            "symbol": symbol,
            "price_usd": None if price is None else float(price.usd),
            "price_as_of": None if price is None else price.as_of,
            "price_source": None if price is None else price.source,
        }
        for env, price in found.items()
    ]
    frame = pl.DataFrame(
        rows,
        schema={
            "environment": pl.String(),
            "chain": pl.String(),
            "symbol": pl.String(),
            "price_usd": pl.Float64(),
            "price_as_of": pl.Datetime("us", "UTC"),
            "price_source": pl.String(),
        },
    )
    return conform(
        frame.with_columns(*batch.columns(), pl.lit(fetched_at, pl.Datetime("us", "UTC")).alias("fetched_at")),
        TABLES["native_prices"],
    )


async def fetch_prices(
    source: PriceData, chain: Chain, environments: Iterable[Environment] = tuple(Environment)
) -> dict[Environment, Price | None]:
    """The chain's native-coin price in each environment."""
    symbol = CHAINS[chain].symbol
    return {env: (await source.prices(env, [symbol])).get(symbol) for env in environments}


# --- risk -------------------------------------------------------------------------------


def risk_rows(
    observations: pl.DataFrame, prices: pl.DataFrame, readiness: ReadinessData, scanned_at: datetime
) -> pl.DataFrame:
    """Score linked observation rows (``address_observations`` rows through
    ``pipelines.families.link_frame``) with the vectorised scorer."""
    priced = observations.join(
        prices.select("environment", "symbol", "price_usd", "price_as_of"),
        on=["environment", "symbol"],
        how="left",
        maintain_order="left",
    ).with_columns(pl.col("balance").cast(pl.Int128()))
    scored = score_frame(priced, readiness)
    return conform(
        scored.with_columns(pl.lit(scanned_at, pl.Datetime("us", "UTC")).alias("scanned_at")), TABLES["address_risk"]
    )


def risk_problems(frame: pl.DataFrame) -> dict[str, int]:
    """Counts of rows breaking the scorer's invariants (every count 0 when healthy):
    null scores, and risk values that do not equal the weighted factor scores (as
    ``scoring.weighted_risk_value`` computes them; rows missing a score are counted by
    the first check only)."""
    score_columns = [*SCORE_COLUMN.values(), "risk_value", "risk_score", "chain_grade"]
    all_scores = pl.all_horizontal(pl.col(c).is_not_null() for c in SCORE_COLUMN.values())
    counts = frame.select(
        null_scores=pl.any_horizontal(pl.col(c).is_null() for c in score_columns).sum(),
        risk_value_mismatch=((weighted_risk_value() != pl.col("risk_value")) & all_scores).fill_null(False).sum(),
    )
    return {name: int(value) for name, value in counts.row(0, named=True).items()}


LINK_CHECK_COLUMNS = ("coverage_unavailable", "exposure_complete")


def link_problems(frame: pl.DataFrame) -> dict[str, int]:
    """Counts of linked rows breaking ``chains.evidence.with_family``'s rule (0 when
    healthy): an exposure changed by the family that is not ``EXPOSED_AT_REST`` or has no
    evidence, and a verdict called complete with a family chain unavailable."""
    raised = pl.col("exposure") != pl.col("observed_exposure")
    counts = frame.select(
        raised_without_evidence=(
            raised
            & ((pl.col("exposure") != Exposure.EXPOSED_AT_REST.value) | (pl.col("exposure_evidence").list.len() == 0))
        ).sum(),
        complete_with_gaps=(pl.col("exposure_complete") & (pl.col("coverage_unavailable").list.len() > 0)).sum(),
    )
    return {name: int(value) for name, value in counts.row(0, named=True).items()}


# --- publish ----------------------------------------------------------------------------


def observation_from_row(row: dict) -> Observation:
    """Rebuild the linked ``Observation`` of one risk row (for ``scored_scan``): its
    exposure after the family and its evidence, as ``chains.evidence.with_family`` gives."""
    return Observation(
        chain=row["chain"],
        address=row["address"],
        address_type=row["address_type"],
        account_type=AccountType(row["account_type"]),
        balance=int(row["balance"]),
        decimals=row["decimals"],
        symbol=row["symbol"],
        tx_count=row["tx_count"],
        outbound_tx_count=row["outbound_tx_count"],
        exposure=Exposure(row["exposure"]),
        public_key=row["public_key"],
        address_reuse_count=row["address_reuse_count"],
        first_activity=row["first_activity"],
        last_activity=row["last_activity"],
        source=row["source"],
        height=row["height"],
        observed_at=row["observed_at"],
        evidence=tuple(
            ExposureEvidence(e["chain"], e["address"], EvidenceKind(e["kind"]), e["txid"], e["block_height"])
            for e in row["exposure_evidence"] or ()
        ),
    )


def coverage_from_row(row: dict, observation: Observation, index: IndexAnswer | None = None) -> Coverage:
    """What the verdict of one risk row saw (the published ``coverage``), with the state of
    its environment's Bitcoin exposure index (``index``) as a scan states it."""
    hashed = index is not None and str(row["family"]).startswith("hash160:")
    bitcoin_height = observation.height if observation.chain == Chain.BITCOIN.value else None
    return Coverage(
        checked=tuple(row["coverage_checked"] or ()),
        unavailable=tuple(row["coverage_unavailable"] or ()),
        limits=limits_of(observation, index, bitcoin_height),
        index_height=index.complete_to if hashed and index is not None else None,
    )


def scorer_row_types(frame: pl.DataFrame) -> pl.DataFrame:
    """Risk rows read back from Parquet with the integer balance ``wallet_risk`` expects."""
    return frame.with_columns(pl.col("balance").cast(pl.Int128()))


def published(risk: pl.DataFrame) -> pl.DataFrame:
    """The rows a scan would answer: addresses with activity, or whose key has left
    evidence somewhere (the others are the scan endpoint's SCAN_003)."""
    return risk.filter(pl.col("has_activity") | (pl.col("exposure_evidence").list.len() > 0))


def records_for(
    risk: pl.DataFrame,
    watchers: pl.DataFrame,
    readiness: ReadinessData,
    index: Mapping[str, IndexAnswer] | None = None,
) -> list[ScanResult]:
    """One stored result per (tenant, environment, chain, address) of the published rows.

    ``watchers`` has ``environment``, ``address`` and ``account_id`` columns; ``index`` the
    Bitcoin exposure index state of each environment (``link_frame`` used the same)."""
    by_target: dict[tuple[str, str], list[str]] = {}
    for env, address, account in watchers.select("environment", "address", "account_id").iter_rows():
        by_target.setdefault((env, address), []).append(account)
    records: list[ScanResult] = []
    for row in scorer_row_types(published(risk)).iter_rows(named=True):
        accounts = sorted(set(by_target.get((row["environment"], row["address"]), ())))
        if not accounts:
            continue  # unwatched since the export
        observation = observation_from_row(row)
        coverage = coverage_from_row(row, observation, (index or {}).get(row["environment"]))
        scan = scored_scan(observation, wallet_risk(row, readiness), row["scanned_at"], coverage)
        environment = Environment(row["environment"])
        records.extend(scan_result(scan, account, environment, SOURCE) for account in accounts)
    return records


async def publish(store: ScanStore, records: list[ScanResult]) -> tuple[int, int]:
    """Save ``records`` in one transaction (a group commit on SQLite); a stored result
    computed from newer chain data (an API refresh after this run observed the address)
    is kept. What changed since the stored results raises webhook events in the same
    transaction (``services.daily_alerts``). Returns (saved, skipped)."""
    saved = await store.save_results(records, daily_alerts(lambda: datetime.now(UTC))) if records else 0
    return saved, len(records) - saved


def watchers_in_range(watch_file: Path, risk: pl.DataFrame) -> pl.DataFrame:
    """The watch-list rows of ``risk``'s addresses, read from the (sorted) export by key
    range, so each publish batch reads only the row groups it needs."""
    parts = []
    for (env,), rows in risk.group_by("environment", maintain_order=True):
        low, high = rows["address"].min(), rows["address"].max()
        parts.append(
            pl.scan_parquet(watch_file)
            .filter((pl.col("environment") == env) & pl.col("address").is_between(pl.lit(low), pl.lit(high)))
            .select("environment", "address", "account_id")
            .collect()
        )
    if not parts:
        return pl.DataFrame(schema={"environment": pl.String(), "address": pl.String(), "account_id": pl.String()})
    return pl.concat(parts)
