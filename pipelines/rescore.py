"""Rescoring, free of Dagster: watch list → observations → prices → risk → published results.

Every step streams: it reads its input in batches (the store's watch-list export, Parquet
batches) and writes through ``ParquetFileWriter``, so memory depends on the batch size, not
on how many addresses are watched. Rows are kept in (environment, address) order from the
watch-list export on, which lets the publish step find an address's watchers with a range
read. Nothing here runs SQL: the operational store is reached through ``storage``.

The publish step builds each stored result with ``scoring.records.scored_scan`` from
``scoring.result.wallet_risk`` (``storage.scan_records`` makes it one record per tenant):
exactly what the scan endpoint stores for the same observation and price. Addresses the
chain has never seen are scored for the analytics tables but not published (the scan
endpoint answers SCAN_003 for them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

import polars as pl

from chains.clients.prices import Price
from chains.codecs.address import Address
from chains.codecs.detect import parse_address
from chains.environment import Environment
from chains.errors import ChainError
from chains.observation import AccountType, Exposure, Observation
from chains.registry import CHAINS, Chain
from pipelines.runner import LoopThread, ordered
from pipelines.sources import ChainData, PriceData
from scoring import observations_to_frame, score_frame, wallet_risk, weighted_risk_value
from scoring.readiness import ReadinessData
from scoring.records import scored_scan
from scoring.risk import SCORE_COLUMN
from storage.analytics import TABLES, ParquetFileWriter, conform
from storage.models import ScanResult, WatchedAddress
from storage.repository import ScanStore
from storage.scan_records import scan_result
from storage.scans_sqlite import WATCH_EXPORT_COLUMNS

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


def export_watchlist(
    scans: ScanStore,
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


# --- targets ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TargetBatch:
    """Distinct addresses of one environment, in (environment, address) order."""

    environment: Environment
    addresses: tuple[str, ...]


def target_batches(frames: Iterable[pl.DataFrame], batch_size: int) -> Iterator[TargetBatch]:
    """Distinct (environment, address) pairs from watch-list frames sorted by them,
    grouped into batches of at most ``batch_size`` addresses of one environment."""
    previous: tuple[str, str] | None = None
    environment: str | None = None
    pending: list[str] = []
    for frame in frames:
        for env, address in zip(frame["environment"].to_list(), frame["address"].to_list(), strict=True):
            if (env, address) == previous:
                continue  # one address watched by several tenants is observed once
            previous = (env, address)
            if env != environment or len(pending) >= batch_size:
                if pending and environment is not None:  # set together with the first address
                    yield TargetBatch(Environment(environment), tuple(pending))
                environment, pending = env, []
            pending.append(address)
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
    """What an observation pass saw."""

    observed: int = 0
    invalid: list[str] = field(default_factory=list)


def _typed(batch: TargetBatch, chain: Chain, stats: ObserveStats) -> list[Address]:
    network = batch.environment.network
    typed = []
    for text in batch.addresses:
        try:
            typed.append(parse_address(text, chain, network))
        except ChainError as exc:  # stored before a codec fix, or edited by hand: skip, report
            stats.invalid.append(f"{batch.environment.value}:{text}: {exc}")
    return typed


def observation_rows(observations: Sequence[Observation], environment: Environment, batch: Batch) -> pl.DataFrame:
    """Observations as rows of ``address_observations`` (no price yet)."""
    frame = observations_to_frame(observations).drop("price_usd", "price_as_of")
    return conform(
        frame.with_columns(
            pl.lit(environment.value).alias("environment"),
            (pl.col("balance").cast(pl.Float64) / pl.lit(10.0).pow(pl.col("decimals").cast(pl.Int32))).alias(
                "balance_native"
            ),
            ((pl.col("tx_count") > 0) | (pl.col("balance") > 0)).alias("has_activity"),
            *batch.columns(),
        ),
        TABLES["address_observations"],
    )


def observe_stream(
    loop: LoopThread,
    source: ChainData,
    chain: Chain,
    batches: Iterable[TargetBatch],
    batch: Batch,
    concurrency: int,
    stats: ObserveStats,
) -> Iterator[pl.DataFrame]:
    """Observation rows per target batch, ``concurrency`` observe() calls in flight, in order.

    The first call of each environment goes alone: it checks the endpoint (a client
    verifies the chain id on its first call) before the others are sent, so a wrong URL
    fails once instead of ``concurrency`` times. ``ChainUnavailable`` from any call
    propagates (the chain's partition fails)."""
    first_calls: dict[Environment, asyncio.Future[None]] = {}

    async def observe(target: TargetBatch) -> pl.DataFrame | None:
        typed = _typed(target, chain, stats)
        if not typed:
            return None
        gate = first_calls.get(target.environment)
        if gate is None:
            gate = first_calls[target.environment] = asyncio.get_running_loop().create_future()
            try:
                found = await source.observe(target.environment, chain, typed)
            finally:
                gate.set_result(None)
        else:
            await gate
            found = await source.observe(target.environment, chain, typed)
        return observation_rows(found, target.environment, batch)

    for frame in ordered(loop, observe, batches, concurrency):
        if frame is not None:
            stats.observed += frame.height
            yield frame


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
    """Score observation rows (``address_observations`` schema) with the vectorised scorer."""
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


# --- publish ----------------------------------------------------------------------------


def observation_from_row(row: dict) -> Observation:
    """Rebuild the ``Observation`` of one risk row (for ``scored_scan``)."""
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
    )


def scorer_row_types(frame: pl.DataFrame) -> pl.DataFrame:
    """Risk rows read back from Parquet with the integer balance ``wallet_risk`` expects."""
    return frame.with_columns(pl.col("balance").cast(pl.Int128()))


def records_for(risk: pl.DataFrame, watchers: pl.DataFrame, readiness: ReadinessData) -> list[ScanResult]:
    """One stored result per (tenant, environment, chain, address) of the active rows.

    ``watchers`` has ``environment``, ``address`` and ``account_id`` columns."""
    by_target: dict[tuple[str, str], list[str]] = {}
    for env, address, account in watchers.select("environment", "address", "account_id").iter_rows():
        by_target.setdefault((env, address), []).append(account)
    records: list[ScanResult] = []
    for row in scorer_row_types(risk.filter(pl.col("has_activity"))).iter_rows(named=True):
        accounts = sorted(set(by_target.get((row["environment"], row["address"]), ())))
        if not accounts:
            continue  # unwatched since the export
        scan = scored_scan(observation_from_row(row), wallet_risk(row, readiness), row["scanned_at"])
        environment = Environment(row["environment"])
        records.extend(scan_result(scan, account, environment, SOURCE) for account in accounts)
    return records


def fresher_elsewhere(store: ScanStore, record: ScanResult) -> bool:
    """True when the stored result was computed from newer chain data (e.g. an API
    refresh after this run observed the address): publishing would move it back."""
    stored = store.latest_result(record.account_id, record.environment, record.chain, record.address)
    return stored is not None and stored.data_as_of > record.data_as_of


async def publish(store: ScanStore, records: list[ScanResult]) -> tuple[int, int]:
    """Save ``records`` in one group commit, skipping those a fresher result supersedes;
    returns (saved, skipped)."""
    keep = [r for r in records if not fresher_elsewhere(store, r)]
    if keep:
        await store.save_results(keep)
    return len(keep), len(records) - len(keep)


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
