"""A tenant's risk history read from the ``address_risk`` Parquet files the rescoring
pipelines write (``storage.analytics``), through DuckDB views, for the dashboard (issue 20):
one address's W-level and risk value day by day, and the watched addresses (and their
balance in USD) per W-level per day.

``address_risk`` rows belong to an address, not to a tenant; a row counts for a tenant on a
day when the same day's watch-list export (``watchlist_exports``: every tenant's entries, as
the pipeline exported them) lists the address for that tenant. So a tenant sees the days it
watched an address, never another tenant's watch list.

The queries are blocking (DuckDB reads files): callers run them off the event loop. One
in-memory DuckDB database per reader (the API keeps one for its life) holds the views; each
query opens its own cursor on it, so queries from several threads never share a connection.
The views glob the folders at query time: files a run lands later are read by the next query.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import duckdb

from chains.environment import Environment
from storage.analytics import AnalyticsStore


@dataclass(frozen=True, slots=True)
class RiskDay:
    """One address on one scan date, as that day's rescoring scored it."""

    day: date
    level: str
    risk_value: int
    balance_native: float
    symbol: str
    balance_usd: float | None
    public_key_exposed: bool
    exposure_complete: bool


@dataclass(frozen=True, slots=True)
class LevelDay:
    """The tenant's watched addresses at one W-level on one scan date, and their balance in USD
    (addresses without a price count 0)."""

    day: date
    level: str
    addresses: int
    balance_usd: float


#: The tenant's (scan date, chain, address) rows of the watch-list exports.
_WATCHED = (
    "SELECT DISTINCT scan_date, chain, address FROM watchlist_exports"
    " WHERE account_id = ? AND environment = ? AND scan_date BETWEEN ? AND ?"
)


class RiskHistory:
    """Reads of the ``address_risk`` history of one analytics folder (blocking)."""

    def __init__(self, root: Path) -> None:
        self._store = AnalyticsStore(root)
        self._lock = threading.Lock()
        self._database: duckdb.DuckDBPyConnection | None = None

    def _cursor(self) -> duckdb.DuckDBPyConnection | None:
        """A cursor on the views; None while no pipeline has laid out the folder (no history
        exists: the reader does not create the layout, the pipelines do)."""
        with self._lock:
            if self._database is None:
                if not self._store.has_layout():
                    return None
                database = duckdb.connect(":memory:")
                database.execute("SET enable_object_cache = true")  # Parquet footers read once
                self._store.create_views(database)
                self._database = database
            return self._database.cursor()

    def close(self) -> None:
        """Close the views' database (the reader opens it again if asked after)."""
        with self._lock:
            if self._database is not None:
                self._database.close()
                self._database = None

    def address_days(
        self, account_id: str, environment: Environment, chain: str, address: str, since: date, until: date
    ) -> list[RiskDay]:
        """The address's scored days from ``since`` to ``until`` (inclusive) on which the
        tenant watched it, oldest first; empty when there is no history yet."""
        cursor = self._cursor()
        if cursor is None:
            return []
        with cursor:
            rows = cursor.execute(
                "SELECT r.scan_date, r.risk_score, r.risk_value, r.balance_native, r.symbol, r.balance_usd,"
                " r.public_key_exposed, r.exposure_complete"
                f" FROM address_risk r JOIN ({_WATCHED}) w USING (scan_date, chain, address)"
                " WHERE r.environment = ? AND r.chain = ? AND r.address = ? AND r.scan_date BETWEEN ? AND ?"
                " ORDER BY r.scan_date",
                [account_id, environment.value, since, until, environment.value, chain, address, since, until],
            ).fetchall()
        return [RiskDay(r[0], r[1], int(r[2]), float(r[3]), r[4], r[5], bool(r[6]), bool(r[7])) for r in rows]

    def level_days(
        self,
        account_id: str,
        environment: Environment,
        since: date,
        until: date,
        chain: str | None = None,
        level: str | None = None,
    ) -> list[LevelDay]:
        """Per scan date from ``since`` to ``until`` and W-level: how many of the addresses the
        tenant watched that day were at that level, and their balance in USD (optionally
        one chain's, one level's), by date then level; empty when there is no history yet."""
        cursor = self._cursor()
        if cursor is None:
            return []
        where = " WHERE r.environment = ? AND r.scan_date BETWEEN ? AND ?"
        args: list[object] = [account_id, environment.value, since, until, environment.value, since, until]
        if chain is not None:
            where += " AND r.chain = ?"
            args.append(chain)
        if level is not None:
            where += " AND r.risk_score = ?"
            args.append(level)
        with cursor:
            rows = cursor.execute(
                "SELECT r.scan_date, r.risk_score, count(*), coalesce(sum(r.balance_usd), 0)"
                f" FROM address_risk r JOIN ({_WATCHED}) w USING (scan_date, chain, address){where}"
                " GROUP BY r.scan_date, r.risk_score ORDER BY r.scan_date, r.risk_score",
                args,
            ).fetchall()
        return [LevelDay(r[0], r[1], int(r[2]), float(r[3])) for r in rows]
