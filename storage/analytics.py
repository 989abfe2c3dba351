"""Analytical tables: Parquet files written atomically, read through DuckDB views.

Layout under ``<data_dir>/analytics/`` (see docs/analytics.md)::

    <table>/_empty.parquet                              zero rows: the table's schema
    <table>/date=YYYY-MM-DD/chain=<chain>/daily.parquet  one chain-day partition (rescoring run)
    <table>/date=YYYY-MM-DD/chain=<chain>/new-<run>.parquet  newly watched addresses (sensor run)
    key_exposure/date=…/chain=<chain>/…                 the key families' members seen on <chain>
    chain_readiness/date=YYYY-MM-DD/daily.parquet
    _scratch/<id>/                                       a writer's private part files

Rules that let the API, a pipeline run and any number of analysts work at once:

- Every Parquet file has one writer. It writes under a temporary name in the target
  folder (``.<name>.<id>.tmp``, which no reader's glob matches), fsyncs it and renames it
  over the target: a reader sees the old file or the new one, never a partial one.
  Re-running a partition replaces its file, so a row is never stored twice.
- Nothing holds a DuckDB database file open read-write. Readers open DuckDB in memory
  (``connect``) or a catalog file holding only views (``write_catalog``), opened read-only.
- Views glob each table folder recursively; the ``_empty.parquet`` file makes the glob
  match (and gives the schema) before the first run.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import Final

import duckdb
import polars as pl

from scoring.frame import OBSERVATION_FIELDS, OBSERVATION_SCHEMA
from scoring.risk import SCORED_SCHEMA
from storage.bitcoin_index import BITCOIN_TABLES, BITCOIN_VIEWS, bitcoin_view_statements
from storage.bitcoin_supply import SUPPLY_TABLES, SUPPLY_VIEWS, supply_view_statements
from storage.parquet_files import EMPTY_FILE, ParquetFileWriter, Table, conform, publish, temp_name, write_schema_file

__all__ = ["TABLES", "VIEWS", "AnalyticsStore", "ParquetFileWriter", "Table", "conform"]

UTC_TS: Final = pl.Datetime("us", "UTC")
BALANCE: Final = pl.Decimal(38, 0)
"""Base units, exact (DuckDB ``DECIMAL(38,0)``): 10^38 wei is far above any coin's supply."""

DAILY_FILE: Final = "daily.parquet"
NEW_PREFIX: Final = "new-"

#: Columns every row-per-address table carries to say where and when a row came from.
_PROVENANCE: Final = {
    "scan_date": pl.Date(),
    "batch": pl.String(),  # "daily" (the chain-day partition run) or "new" (the new-address sensor)
    "run_id": pl.String(),
}


def stored_dtype(dtype: pl.DataType) -> pl.DataType:
    """How a scorer column (``scoring.frame.OBSERVATION_SCHEMA``, ``scoring.risk.SCORED_SCHEMA``)
    is kept in Parquet: enums and categoricals as plain strings (any tool reads them, and a
    new enum value never makes older files unreadable), integer base units as an exact
    ``DECIMAL(38,0)``; every other type as it is."""
    if isinstance(dtype, pl.Enum | pl.Categorical):
        return pl.String()
    if dtype == pl.Int128():
        return BALANCE
    return dtype


def _observation_columns() -> dict[str, pl.DataType]:
    """The environment, ``Observation``'s fields as the scorer types them (stored), the
    balance in whole coins beside the base units, whether the address was ever used, and
    its key family (``pipelines.families.family_key``)."""
    columns: dict[str, pl.DataType] = {"environment": pl.String()}
    for name in OBSERVATION_FIELDS:
        columns[name] = stored_dtype(OBSERVATION_SCHEMA[name])
        if name == "balance":
            columns["balance_native"] = pl.Float64()
    return {**columns, "has_activity": pl.Boolean(), "family": pl.String()}


OBSERVATION_COLUMNS: Final = _observation_columns()
"""Columns of an observation row, derived from the scorer's input schema."""

EVIDENCE_DTYPE: Final = pl.Struct(
    {"chain": pl.String(), "address": pl.String(), "kind": pl.String(), "txid": pl.String(), "block_height": pl.Int64()}
)
"""One ``chains.observation.ExposureEvidence``: where and how a key was revealed."""

LINK_COLUMNS: Final = {
    "observed_exposure": pl.String(),
    "exposure_evidence": pl.List(EVIDENCE_DTYPE),
    "coverage_checked": pl.List(pl.String()),
    "coverage_unavailable": pl.List(pl.String()),
    "exposure_complete": pl.Boolean(),
}
"""Columns the key-family linkage adds to a scored row (``pipelines.families.link_frame``):
the exposure the address's own chain showed (``exposure`` is the linked one, as
``chains.evidence.with_family`` gives it), the evidence (own first, then its siblings'),
the family's chains seen that day and those that were not, and whether the verdict saw
everything (the published ``exposureComplete``)."""

SCORE_COLUMNS: Final = {
    **{name: stored_dtype(dtype) for name, dtype in OBSERVATION_SCHEMA.items() if name not in OBSERVATION_FIELDS},
    **{name: stored_dtype(dtype) for name, dtype in SCORED_SCHEMA.items()},
    "scanned_at": UTC_TS,
}
"""Columns a scored row adds: the price the scorer used, ``SCORED_SCHEMA``'s columns, and
when the row was scored."""


TABLES: Final[Mapping[str, Table]] = MappingProxyType(
    {
        t.name: t
        for t in (
            Table(
                "watchlist",
                pl.Schema(
                    {
                        "watch_id": pl.String(),
                        "account_id": pl.String(),
                        "environment": pl.String(),
                        "chain": pl.String(),
                        "address": pl.String(),
                        "label": pl.String(),
                        "created_at": UTC_TS,
                        **_PROVENANCE,
                        "exported_at": UTC_TS,
                    }
                ),
                ("watch_id",),
                "Export of the operational watch list (every tenant, both environments).",
            ),
            Table(
                "address_observations",
                pl.Schema({**OBSERVATION_COLUMNS, **_PROVENANCE}),
                ("environment", "chain", "address"),
                "What each chain said about each watched address, per scan date.",
            ),
            Table(
                "native_prices",
                pl.Schema(
                    {
                        "environment": pl.String(),
                        "chain": pl.String(),
                        "symbol": pl.String(),
                        "price_usd": pl.Float64(),
                        "price_as_of": UTC_TS,
                        "price_source": pl.String(),
                        **_PROVENANCE,
                        "fetched_at": UTC_TS,
                    }
                ),
                ("environment", "chain"),
                "USD price of each chain's native coin used for that day's scores (null: unknown).",
            ),
            Table(
                "address_risk",
                pl.Schema({**OBSERVATION_COLUMNS, **LINK_COLUMNS, **SCORE_COLUMNS, **_PROVENANCE}),
                ("environment", "chain", "address"),
                "Scored observations after key-family linkage: factor scores, risk value and band, "
                "chain grade, evidence and coverage; full history.",
            ),
            Table(
                "family_targets",
                pl.Schema(
                    {
                        "environment": pl.String(),
                        "chain": pl.String(),
                        "address": pl.String(),
                        "family": pl.String(),
                        **_PROVENANCE,
                    }
                ),
                ("environment", "address", "family"),
                "Addresses of a chain observed because they share a key with a watched address "
                "(of this chain or another): the watched address's family, per scan date.",
            ),
            Table(
                "key_exposure",
                pl.Schema(
                    {
                        "environment": pl.String(),
                        "family": pl.String(),
                        "chain": pl.String(),
                        "address": pl.String(),
                        "address_type": pl.String(),
                        "kind": pl.String(),
                        "txid": pl.String(),
                        "block_height": pl.Int64(),
                        "observed_at": UTC_TS,
                        **_PROVENANCE,
                    }
                ),
                ("environment", "family", "chain", "address"),
                "Every member of a watched key's family observed that day, with what revealed "
                "the key there (one row per evidence; kind null when nothing did).",
                many_per_key=True,
            ),
            Table(
                "wallet_risk",
                pl.Schema(
                    {
                        "environment": pl.String(),
                        "account_id": pl.String(),
                        "watch_id": pl.String(),
                        "descriptor": pl.String(),
                        "used_addresses": pl.Int64(),
                        "derived_addresses": pl.Int64(),
                        "balance_sat": pl.Int64(),
                        "exposed_balance_sat": pl.Int64(),
                        "balance_at_risk_usd": pl.Float64(),
                        "risk_value": pl.Int64(),
                        "risk_score": pl.String(),
                        "exposure_complete": pl.Boolean(),
                        "lookup_rounds": pl.Int64(),
                        "scanned_at": UTC_TS,
                        "scan_date": pl.Date(),
                        "run_id": pl.String(),
                    }
                ),
                ("watch_id",),
                "Watched wallets (descriptors, extended keys): one summary row per wallet, per scan date.",
            ),
            Table(
                "chain_readiness",
                pl.Schema(
                    {
                        "chain": pl.String(),
                        "category": pl.String(),
                        "family": pl.String(),
                        "grade": pl.String(),
                        "grade_label": pl.String(),
                        "factor": pl.String(),
                        "status": pl.String(),
                        "detail": pl.String(),
                        "source": pl.String(),
                        "scoring_version": pl.String(),
                        "readiness_as_of": pl.Date(),
                        "scan_date": pl.Date(),
                        "run_id": pl.String(),
                    }
                ),
                ("chain", "factor"),
                "Post-quantum readiness of the 19 chains: one row per chain factor, per scan date.",
            ),
        )
    }
    | dict(BITCOIN_TABLES)
    | dict(SUPPLY_TABLES)
)


class AnalyticsStore:
    """The ``analytics/`` folder of a data directory: file layout, writers, views."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def scratch(self) -> Path:
        """Private scratch space of writers (never read by views)."""
        return self.root / "_scratch"

    def table_dir(self, table: str) -> Path:
        return self.root / TABLES[table].name

    def partition_dir(self, table: str, scan_date: date, chain: str | None = None) -> Path:
        """The folder of one chain-day partition (or one day, for per-day tables)."""
        folder = self.table_dir(table) / f"date={scan_date.isoformat()}"
        return folder / f"chain={chain}" if chain is not None else folder

    def daily_file(self, table: str, scan_date: date, chain: str | None = None) -> Path:
        """The file a chain-day partition run writes (and a re-run replaces)."""
        return self.partition_dir(table, scan_date, chain) / DAILY_FILE

    def new_file(self, table: str, scan_date: date, chain: str, run_id: str) -> Path:
        """The file a newly-watched-address run writes for one chain."""
        return self.partition_dir(table, scan_date, chain) / f"{NEW_PREFIX}{run_id}.parquet"

    def writer(self, table: str, target: Path, *, sort_by: Sequence[str] = (), **options: int) -> ParquetFileWriter:
        """A ``ParquetFileWriter`` for ``target`` (a path from ``daily_file``/``new_file``)."""
        self.ensure_layout()
        return ParquetFileWriter(target, TABLES[table], self.scratch, sort_by=sort_by, **options)

    def write_frame(self, table: str, target: Path, frame: pl.DataFrame) -> int:
        """Write one frame as the whole file ``target`` (atomically)."""
        with self.writer(table, target) as writer:
            writer.write(frame)
        return writer.rows

    def ensure_layout(self, stale_scratch_seconds: float = 86_400) -> None:
        """Create the table folders and their ``_empty.parquet`` schema files when missing
        (temp name + rename; identical bytes if two processes race), and remove scratch
        folders a crashed writer left behind more than ``stale_scratch_seconds`` ago."""
        for table in TABLES.values():
            write_schema_file(self.root / table.name / EMPTY_FILE, table)
        if self.scratch.is_dir():
            cutoff = time.time() - stale_scratch_seconds
            for leftover in self.scratch.iterdir():
                if leftover.stat().st_mtime < cutoff:
                    shutil.rmtree(leftover, ignore_errors=True)

    def has_layout(self) -> bool:
        """True when every table's schema file exists (views can be created)."""
        return all((self.root / t / EMPTY_FILE).is_file() for t in TABLES)

    # --- views ----------------------------------------------------------------------------

    def view_statements(self) -> list[str]:
        """``CREATE OR REPLACE VIEW`` statements of every analytical view."""
        statements = []
        for name in ("watchlist_exports", "address_observations", "native_prices", "address_risk"):
            table = TABLES[name if name != "watchlist_exports" else "watchlist"]
            if name == "watchlist_exports":
                statements.append(f"CREATE OR REPLACE VIEW watchlist_exports AS SELECT * FROM {self._scan(table)}")
            else:
                statements.append(f"CREATE OR REPLACE VIEW {name} AS {self._deduplicated(table)}")
        statements.append(
            "CREATE OR REPLACE VIEW address_risk_latest AS SELECT * FROM address_risk"
            " QUALIFY row_number() OVER (PARTITION BY environment, chain, address"
            " ORDER BY scanned_at DESC, scan_date DESC) = 1"
        )
        statements.append(
            "CREATE OR REPLACE VIEW watchlist AS"
            " WITH latest AS (SELECT chain, max(scan_date) AS scan_date FROM watchlist_exports"
            "  WHERE batch = 'daily' GROUP BY chain)"
            " SELECT w.* EXCLUDE (batch, run_id, exported_at, scan_date) FROM watchlist_exports w"
            " LEFT JOIN latest l ON l.chain = w.chain"
            " WHERE (w.batch = 'daily' AND w.scan_date = l.scan_date)"
            "  OR (w.batch = 'new' AND w.scan_date >= coalesce(l.scan_date, DATE '0001-01-01'))"
            " QUALIFY row_number() OVER (PARTITION BY w.watch_id ORDER BY w.exported_at DESC) = 1"
        )
        statements.append(f"CREATE OR REPLACE VIEW key_exposure AS {self._deduplicated(TABLES['key_exposure'])}")
        statements.append(
            "CREATE OR REPLACE VIEW key_exposure_latest AS SELECT * FROM key_exposure"
            " QUALIFY dense_rank() OVER (PARTITION BY environment, family, chain, address"
            " ORDER BY scan_date DESC) = 1"
        )
        readiness = TABLES["chain_readiness"]
        statements.append(f"CREATE OR REPLACE VIEW chain_readiness AS SELECT * FROM {self._scan(readiness)}")
        statements.append(
            "CREATE OR REPLACE VIEW chain_readiness_latest AS SELECT * FROM chain_readiness"
            " WHERE scan_date = (SELECT max(scan_date) FROM chain_readiness)"
        )
        statements.append(f"CREATE OR REPLACE VIEW wallet_risk AS SELECT * FROM {self._scan(TABLES['wallet_risk'])}")
        statements.extend(bitcoin_view_statements(lambda name: self._scan(TABLES[name])))
        statements.extend(supply_view_statements(lambda name: self._scan(TABLES[name])))
        return statements

    def _glob(self, table: Table) -> str:
        path = str((self.root / table.name).resolve() / "**" / "*.parquet")
        return path.replace("'", "''")

    def _scan(self, table: Table, filename: bool = False) -> str:
        options = "union_by_name = true, hive_partitioning = false" + (", filename = true" if filename else "")
        return f"read_parquet('{self._glob(table)}', {options})"

    def _deduplicated(self, table: Table) -> str:
        """Daily rows, plus newly-watched rows no daily file of that date has yet (latest
        wins: one row per key, or every row of the latest observation of a key for a
        ``many_per_key`` table)."""
        key = ("scan_date", *table.key)
        scan = self._scan(table, filename=True)
        if "scanned_at" in table.schema:
            order = "scanned_at DESC, run_id DESC"
        elif "observed_at" in table.schema:
            order = "observed_at DESC, run_id DESC"
        else:
            order = "run_id DESC"
        rank = "dense_rank()" if table.many_per_key else "row_number()"
        match = " AND ".join(f"d.{k} = f.{k}" for k in key)
        return (
            f"WITH daily AS (SELECT * EXCLUDE (filename) FROM {scan} WHERE filename LIKE '%/{DAILY_FILE}'),"
            f" fresh AS (SELECT * EXCLUDE (filename) FROM {scan} WHERE filename LIKE '%/{NEW_PREFIX}%'"
            f"  QUALIFY {rank} OVER (PARTITION BY {', '.join(key)} ORDER BY {order}) = 1)"
            f" SELECT * FROM daily UNION ALL BY NAME"
            f" SELECT * FROM fresh f WHERE NOT EXISTS (SELECT 1 FROM daily d WHERE {match})"
        )

    def create_views(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create (or refresh) every view on ``con``; the layout must exist."""
        for statement in self.view_statements():
            con.execute(statement)

    def connect(self, *, threads: int | None = None, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with every view ready (an analyst's session).

        Creates the table layout first if this data directory has never had a run.
        """
        if not self.has_layout():
            self.ensure_layout()
        con = duckdb.connect(":memory:")
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        if memory_limit is not None:
            con.execute("SET memory_limit = '" + memory_limit.replace("'", "") + "'")
        self.create_views(con)
        return con

    def write_catalog(self, path: Path) -> Path:
        """A DuckDB file holding only the views (no data), for tools that want a database
        file: open it read-only (``duckdb.connect(path, read_only=True)``) so any number of
        sessions can share it. Written under a temporary name and renamed."""
        if not self.has_layout():
            self.ensure_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = temp_name(path)
        try:
            con = duckdb.connect(str(temp))
            try:
                self.create_views(con)
                con.execute("CHECKPOINT")
            finally:
                con.close()
            publish(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            Path(str(temp) + ".wal").unlink(missing_ok=True)
            raise
        return path


VIEWS: Final[tuple[str, ...]] = (
    "watchlist",
    "watchlist_exports",
    "address_observations",
    "native_prices",
    "address_risk",
    "address_risk_latest",
    "key_exposure",
    "key_exposure_latest",
    "chain_readiness",
    "chain_readiness_latest",
    "wallet_risk",
    *BITCOIN_VIEWS,
    *SUPPLY_VIEWS,
)
"""Every view ``AnalyticsStore.create_views`` defines."""
