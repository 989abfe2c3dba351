"""Dagster resources: chain data, prices, the operational store, the analytics folder and
the clock, each injected into the assets that declare it.

Chain data, prices and the clock each have an abstract resource with a real implementation
(chain data and prices built from the qday settings file, the same ``[chains]`` configuration
the API reads; the wall clock) and a replay one for tests (a recorded snapshot, a static
price file, a stopped clock); assets declare the abstract type, so a test swaps
implementations by passing another resource to ``materialize``.

A resource owns the life of what it opens: ``open()`` is a context manager that yields an
open client (its async source running on the client's own event-loop thread, or the scan
store with its group-commit writer) and closes everything on exit, so an asset only calls
the client. Each ``with`` is one connection, as long as the asset step that opens it: a
step Dagster retries after an outage starts with fresh clients.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import polars as pl
from dagster import ConfigurableResource
from pydantic import Field

from chains.clients.prices import Price, StaticPrices
from chains.endpoints import ChainEndpoints
from chains.environment import Environment
from chains.registry import Chain
from core.clock import SystemClock
from pipelines.rescore import (
    Batch,
    ObservedBatch,
    ObserveStats,
    fetch_prices,
    observe_stream,
    publish,
    target_batches,
)
from pipelines.runner import LoopThread
from pipelines.sources import (
    ChainData,
    ClientChainData,
    OraclePriceData,
    PriceData,
    SnapshotChainData,
    StaticPriceData,
)
from services.caps import DEFAULT_ENTERPRISE_WATCH_CAP
from services.exposure_index import ExposureIndex
from services.observer import ChainObserver
from services.settings import load_settings
from storage.analytics import AnalyticsStore
from storage.database import Database, Row
from storage.engines import open_database
from storage.models import ScanResult, WatchedAddress
from storage.sql_scans import SqlScanStore


def configured_endpoints(config_file: str | None) -> ChainEndpoints:
    """The chain endpoints of the qday settings (file + QDAY_* variables), as the API reads them."""
    return load_settings(config_file=Path(config_file) if config_file else None).chains


class _Closable(Protocol):
    async def aclose(self) -> None: ...


S = TypeVar("S", bound=_Closable)
T = TypeVar("T")


@contextmanager
def on_own_loop(make: Callable[[], S]) -> Iterator[tuple[LoopThread, S]]:
    """An event-loop thread and a source built on it (its HTTP clients belong to that
    loop); the source is closed, then the loop stopped, on exit."""

    async def build() -> S:
        return make()

    with LoopThread() as loop:
        source = loop.run(build())
        try:
            yield loop, source
        finally:
            loop.run(source.aclose())


# --- chain data -------------------------------------------------------------------------


class ChainDataClient:
    """An open source of chain observations (from ``ChainDataResource.open``)."""

    def __init__(
        self,
        loop: LoopThread,
        source: ChainData,
        batch_size: int,
        concurrency: int,
        family_chains: frozenset[str] | None = None,
    ) -> None:
        self._loop = loop
        self._source = source
        self.batch_size = batch_size
        self.concurrency = concurrency
        self._family_chains = family_chains

    def family_allowed(self, chain: Chain) -> bool:
        """True when ``chain`` may be looked up for the siblings of addresses watched
        elsewhere (``ChainDataResource.family_chains``)."""
        return self._family_chains is None or chain.value in self._family_chains

    def observer(self, index: ExposureIndex, wait_seconds: float) -> ChainObserver | None:
        """A scans' chain observer over this source's clients (what wallet scans need: the
        clients themselves, for coins), None when the source has none (a snapshot)."""
        if not isinstance(self._source, ClientChainData):
            return None
        clients = {env: self._source.clients(env) for env in Environment}
        family = self._family_chains if self._family_chains is not None else [c.value for c in Chain]
        return ChainObserver(clients, family, wait_seconds, index)

    @property
    def loop(self) -> LoopThread:
        """The event-loop thread this client's HTTP clients live on."""
        return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this client's event loop (where its HTTP clients live)."""
        return self._loop.run(coro)

    def observe(
        self,
        chain: Chain,
        watch: Iterable[pl.DataFrame],
        batch: Batch,
        stats: ObserveStats,
        family: Iterable[pl.DataFrame] = (),
    ) -> Iterator[ObservedBatch]:
        """Observation and ``key_exposure`` rows of the distinct (environment, address)
        pairs of watch-list frames and ``family_targets`` frames, each sorted by them:
        ``batch_size`` addresses per call, ``concurrency`` calls in flight, rows in
        (environment, address) order (``pipelines.rescore.observe_stream``)."""
        targets = target_batches(watch, self.batch_size, family)
        return observe_stream(self._loop, self._source, chain, targets, batch, self.concurrency, stats)


class ChainDataResource(ConfigurableResource):
    """Abstract source of chain observations, with the batching and outage policy of a run."""

    batch_size: int = Field(default=500, description="Addresses per observe() call.")
    concurrency: int = Field(default=4, description="observe() calls in flight per chain.")
    outage_retries: int = Field(default=2, description="Dagster retries of a step after ChainUnavailable.")
    outage_retry_seconds: float = Field(default=120.0, description="Wait before each such retry.")
    family_wait_seconds: float = Field(default=5.0, description="Wait for each family chain in wallet scans.")
    family_chains: list[str] | None = Field(
        default=None,
        description="Chains observed for the siblings of addresses watched elsewhere (the settings' "
        "family_chains; None: all). A family's chain left out is reported unavailable.",
    )

    def source(self) -> ChainData:
        """A new source (called on the client's event loop); implemented by each kind."""
        raise NotImplementedError

    def family_allowed(self, chain: Chain) -> bool:
        """True when ``chain`` may be looked up for the siblings of addresses watched on
        other chains (siblings on an address's own chain are always observed, as a scan does)."""
        return self.family_chains is None or chain.value in self.family_chains

    @contextmanager
    def open(self) -> Iterator[ChainDataClient]:
        """An open client, closed (connections released, loop stopped) on exit."""
        allowed = None if self.family_chains is None else frozenset(self.family_chains)
        with on_own_loop(self.source) as (loop, source):
            yield ChainDataClient(loop, source, self.batch_size, self.concurrency, allowed)


class EndpointChainDataResource(ChainDataResource):
    """The real chain clients on the configured endpoints."""

    config_file: str | None = Field(
        default=None,
        description="qday settings TOML (its [chains] table); "
        "QDAY_CONFIG and QDAY_<CHAIN>_* variables apply as for the API.",
    )

    def source(self) -> ChainData:
        return ClientChainData(configured_endpoints(self.config_file))


class SnapshotChainDataResource(ChainDataResource):
    """Replays a recorded snapshot file (``pipelines.sources.write_snapshot``)."""

    snapshot_file: str
    unavailable_chains: list[str] = Field(default_factory=list, description="Chains that fail as if down.")

    def source(self) -> ChainData:
        return SnapshotChainData.from_file(Path(self.snapshot_file), self.unavailable_chains)


# --- prices -----------------------------------------------------------------------------


class PriceClient:
    """An open source of native-coin USD prices (from ``PriceResource.open``)."""

    def __init__(self, loop: LoopThread, source: PriceData) -> None:
        self._loop = loop
        self._source = source

    def native_prices(self, chain: Chain, environments: Iterable[Environment]) -> dict[Environment, Price | None]:
        """The chain's native-coin price in each environment (None when unknown)."""
        return self._loop.run(fetch_prices(self._source, chain, environments))


class PriceResource(ConfigurableResource):
    """Abstract source of native-coin USD prices."""

    def source(self) -> PriceData:
        """A new source (called on the client's event loop); implemented by each kind."""
        raise NotImplementedError

    def valued(self, environment: Environment, chain: Chain) -> bool:
        """False where coins have no USD value: the test environment's networks (a price
        there would turn faucet coins into dollars at risk)."""
        return environment is Environment.LIVE

    @contextmanager
    def open(self) -> Iterator[PriceClient]:
        """An open client, closed (connections released, loop stopped) on exit."""
        with on_own_loop(self.source) as (loop, source):
            yield PriceClient(loop, source)


class OraclePriceResource(PriceResource):
    """Chainlink feeds of each environment, then the packaged static price file."""

    config_file: str | None = None

    def source(self) -> PriceData:
        return OraclePriceData(configured_endpoints(self.config_file))

    def valued(self, environment: Environment, chain: Chain) -> bool:
        """Also False for a chain served by a local node under another chain id (``make devnet``)."""
        return configured_endpoints(self.config_file)[environment].has_market_value(chain)


class StaticPriceResource(PriceResource):
    """A static price file for both environments (default: ``chains/data/prices.toml``)."""

    prices_file: str | None = None

    def source(self) -> PriceData:
        static = StaticPrices.from_file(self.prices_file) if self.prices_file else StaticPrices.from_file()
        return StaticPriceData(static)


# --- operational store ------------------------------------------------------------------


class OperationalStore:
    """An open scan store on the operational database (from ``OperationalStoreResource.open``),
    whose calls run on the store's own event-loop thread (where its connections live)."""

    def __init__(self, db: Database, loop: LoopThread, writable: bool = True) -> None:
        self.scans = SqlScanStore(db)
        self._loop = loop
        self._writable = writable

    def watched(self, created_after: datetime | None = None) -> list[WatchedAddress]:
        """Every tenant's watched addresses, optionally only those added after a time."""
        return self.run(self.scans.all_watched(created_after=created_after))

    def export_watchlist(self, chain: str, chunk: int) -> Generator[list[Row], None, None]:
        """Every tenant's entries on ``chain``, ``chunk`` rows at a time, read as one snapshot
        (``SqlScanStore.export_watchlist``); closing the generator ends the read."""
        stream = self.scans.export_watchlist(chain, chunk)

        async def next_chunk() -> list[Row] | None:
            return await anext(stream, None)

        try:
            while (rows := self.run(next_chunk())) is not None:
                yield rows
        finally:
            self.run(stream.aclose())

    def publish(self, records: list[ScanResult]) -> tuple[int, int]:
        """Save ``records`` in one transaction, keeping stored results of newer chain data
        (``pipelines.rescore.publish``); returns (saved, skipped). ``RuntimeError`` on a store
        opened for reading (``writer=False``: the exports and the sensor publish nothing)."""
        if not self._writable:
            raise RuntimeError("this operational store was opened read-only (writer=False)")
        return self.run(publish(self.scans, records))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a call of this store on its event loop and return its result."""
        return self._loop.run(coro)


class OperationalStoreResource(ConfigurableResource):
    """The operational database the API uses: PostgreSQL at ``database_url``, else the SQLite
    file (``<data_dir>/qday.sqlite``, shared with the API in WAL mode)."""

    database: str
    database_url: str = Field(default="", description="QDAY_DATABASE_URL: PostgreSQL instead of the SQLite file.")
    synchronous: str = "FULL"
    enterprise_watch_cap: int = Field(
        default=DEFAULT_ENTERPRISE_WATCH_CAP, description="The enterprise plan's watch cap (QDAY_ENTERPRISE_WATCH_CAP)."
    )

    @contextmanager
    def open(self, writer: bool = True, loop: LoopThread | None = None) -> Iterator[OperationalStore]:
        """The database (migrations applied) opened on an event-loop thread, and a scan
        store over it; on SQLite, writes go through a group-commit writer thread
        (``writer=False`` for read-only use: none, and ``publish`` refused). ``loop``: the
        thread of a client whose coroutines use this store too (a chain-data client's), else
        one of its own. All closed on exit."""

        async def connect() -> Database:
            return await open_database(self.database_url, Path(self.database), self.synchronous, group_commit=writer)

        with ExitStack() as stack:
            thread = loop or stack.enter_context(LoopThread())
            db = thread.run(connect())
            try:
                yield OperationalStore(db, thread, writable=writer)
            finally:
                thread.run(db.aclose())


# --- analytics folder -------------------------------------------------------------------


class AnalyticsResource(ConfigurableResource):
    """The analytics folder (``<data_dir>/analytics``): Parquet tables and their views."""

    root: str

    def store(self) -> AnalyticsStore:
        store = AnalyticsStore(Path(self.root))
        store.ensure_layout()
        return store


# --- clock ------------------------------------------------------------------------------


class ClockResource(ConfigurableResource):
    """The time of a run (UTC): the wall clock. It stamps ``exported_at``, ``fetched_at``
    and ``scanned_at``, tells which day is today (only today's partition is observed), and
    dates the sensor's runs. A ``core.clock.Clock``."""

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        return SystemClock().now()

    def today(self) -> date:
        """The current UTC date."""
        return self.now().date()


class FixedClockResource(ClockResource):
    """A stopped clock (tests, replays): every run sees the same time and the same date."""

    at: str = Field(description="ISO 8601 time with its UTC offset, e.g. 2026-11-22T02:00:00+00:00.")

    def now(self) -> datetime:
        found = datetime.fromisoformat(self.at)
        if found.tzinfo is None:
            raise ValueError(f"FixedClockResource.at needs a UTC offset: {self.at!r}")
        return found.astimezone(UTC)
