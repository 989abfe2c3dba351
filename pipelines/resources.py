"""Dagster resources: chain data, prices, the operational store and the analytics folder.

Chain data and prices each have an abstract resource with a real implementation (built
from the qday settings file, the same ``[chains]`` configuration the API reads) and a
replay one for tests; assets declare the abstract type, so a test swaps implementations
by passing another resource to ``materialize``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

from chains.clients.prices import StaticPrices
from chains.endpoints import ChainEndpoints
from pipelines.sources import (
    ChainData,
    ClientChainData,
    OraclePriceData,
    PriceData,
    SnapshotChainData,
    StaticPriceData,
)
from storage.analytics import AnalyticsStore
from storage.group_commit import GroupCommitWriter
from storage.scans_sqlite import SqliteScanStore
from storage.sqlite import open_database


def _endpoints(config_file: str | None) -> ChainEndpoints:
    from services.settings import load_settings  # the one place settings (file + QDAY_* variables) are read

    return load_settings(config_file=Path(config_file) if config_file else None).chains


class ChainDataResource(ConfigurableResource):
    """Abstract source of chain observations, with the batching and outage policy of a run."""

    batch_size: int = Field(default=500, description="Addresses per observe() call.")
    concurrency: int = Field(default=4, description="observe() calls in flight per chain.")
    outage_retries: int = Field(default=2, description="Dagster retries of a step after ChainUnavailable.")
    outage_retry_seconds: float = Field(default=120.0, description="Wait before each such retry.")

    def open(self) -> ChainData:
        """A connected source; call on the run's event loop, ``aclose`` it afterwards."""
        raise NotImplementedError


class EndpointChainDataResource(ChainDataResource):
    """The real chain clients on the configured endpoints."""

    config_file: str | None = Field(
        default=None,
        description="qday settings TOML (its [chains] table); "
        "QDAY_CONFIG and QDAY_<CHAIN>_* variables apply as for the API.",
    )

    def open(self) -> ChainData:
        return ClientChainData(_endpoints(self.config_file))


class SnapshotChainDataResource(ChainDataResource):
    """Replays a recorded snapshot file (``pipelines.sources.write_snapshot``)."""

    snapshot_file: str
    unavailable_chains: list[str] = Field(default_factory=list, description="Chains that fail as if down.")

    def open(self) -> ChainData:
        return SnapshotChainData.from_file(Path(self.snapshot_file), self.unavailable_chains)


class PriceResource(ConfigurableResource):
    """Abstract source of native-coin USD prices."""

    def open(self) -> PriceData:
        """A connected source; call on the run's event loop, ``aclose`` it afterwards."""
        raise NotImplementedError


class OraclePriceResource(PriceResource):
    """Chainlink feeds of each environment, then the packaged static price file."""

    config_file: str | None = None

    def open(self) -> PriceData:
        return OraclePriceData(_endpoints(self.config_file))


class StaticPriceResource(PriceResource):
    """A static price file for both environments (default: ``chains/data/prices.toml``)."""

    prices_file: str | None = None

    def open(self) -> PriceData:
        static = StaticPrices.from_file(self.prices_file) if self.prices_file else StaticPrices.from_file()
        return StaticPriceData(static)


@dataclass
class OperationalStore:
    """An open connection to the operational SQLite file and its scan store."""

    conn: sqlite3.Connection
    scans: SqliteScanStore


class OperationalStoreResource(ConfigurableResource):
    """The operational SQLite file (``<data_dir>/qday.sqlite``), shared with the API (WAL)."""

    database: str
    synchronous: str = "FULL"

    @contextmanager
    def open(self, writer: bool = True) -> Iterator[OperationalStore]:
        """A connection (migrations applied) and a scan store whose ``save_results`` goes
        through its own group-commit writer (``writer=False`` for read-only use); both
        closed on exit."""
        path = Path(self.database)
        conn = open_database(path, self.synchronous)
        group = GroupCommitWriter(path, self.synchronous) if writer else None
        try:
            yield OperationalStore(conn, SqliteScanStore(conn, group))
        finally:
            if group is not None:
                group.close()
            conn.close()


class AnalyticsResource(ConfigurableResource):
    """The analytics folder (``<data_dir>/analytics``): Parquet tables and their views."""

    root: str

    def store(self) -> AnalyticsStore:
        store = AnalyticsStore(Path(self.root))
        store.ensure_layout()
        return store
