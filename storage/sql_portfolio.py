"""A tenant's portfolio read from the operational store: its watched addresses beside their
latest scan results, filtered by chain and W-level, aggregated in SQL (counts, balance at
risk in USD and in each chain's unit, by chain × level) and paged by keyset, so a watch list
of any size costs one grouped query and one page of rows (the dashboard, issue 20)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from chains.environment import Environment
from storage.database import Database
from storage.sql import dt, page_clause

#: The level of an address without a stored result (watched, not scanned yet).
UNSCORED = "unscored"


@dataclass(frozen=True, slots=True)
class PortfolioFilter:
    """Which watched addresses: all, or those of one chain and/or one level (``W1``-``W4``,
    or ``UNSCORED``)."""

    chain: str | None = None
    level: str | None = None


@dataclass(frozen=True, slots=True)
class PortfolioCell:
    """The addresses of one chain at one level: how many, and their balance at risk."""

    chain: str
    level: str
    addresses: int
    balance_usd: float
    balance_native: float


@dataclass(frozen=True, slots=True)
class PortfolioRow:
    """One watched address with its latest result (None: not scanned yet)."""

    id: str
    chain: str
    address: str
    label: str | None
    created_at: datetime
    level: str
    risk_value: int | None
    result: str | None
    scanned_at: datetime | None


_FROM = (
    " FROM watchlist w LEFT JOIN scan_results r ON r.account_id = w.account_id"
    " AND r.environment = w.environment AND r.chain = w.chain AND r.address = w.address"
    " WHERE w.account_id = ? AND w.environment = ?"
)


def _where(account_id: str, environment: Environment, only: PortfolioFilter) -> tuple[str, tuple[object, ...]]:
    sql = _FROM
    args: tuple[object, ...] = (account_id, environment.value)
    if only.chain is not None:
        sql += " AND w.chain = ?"
        args += (only.chain,)
    if only.level == UNSCORED:
        sql += " AND r.risk_score IS NULL"
    elif only.level is not None:
        sql += " AND r.risk_score = ?"
        args += (only.level,)
    return sql, args


class SqlPortfolio:
    """Portfolio reads on either engine (the JSON of a result is read by each engine's own
    functions: ``json_extract`` on SQLite, ``jsonb`` on PostgreSQL)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        if db.dialect == "postgresql":
            usd = "(r.result::jsonb ->> 'balanceAtRiskUsd')::float8"
            native = "split_part(r.result::jsonb ->> 'balanceAtRisk', ' ', 1)::float8"
        else:
            usd = "json_extract(r.result, '$.balanceAtRiskUsd')"
            native = "CAST(substr(json_extract(r.result, '$.balanceAtRisk'), 1,"
            native += " instr(json_extract(r.result, '$.balanceAtRisk') || ' ', ' ') - 1) AS REAL)"
        self._sums = f"COUNT(*), COALESCE(SUM({usd}), 0), COALESCE(SUM({native}), 0)"

    async def cells(self, account_id: str, environment: Environment, only: PortfolioFilter) -> list[PortfolioCell]:
        """Counts and balances at risk by chain × level of the filtered addresses."""
        where, args = _where(account_id, environment, only)
        level = f"COALESCE(r.risk_score, '{UNSCORED}')"
        rows = await self._db.fetch_all(
            f"SELECT w.chain, {level}, {self._sums}{where} GROUP BY w.chain, {level} ORDER BY w.chain, {level}", args
        )
        return [PortfolioCell(r[0], r[1], int(r[2]), float(r[3] or 0), float(r[4] or 0)) for r in rows]

    async def page(
        self,
        account_id: str,
        environment: Environment,
        only: PortfolioFilter,
        after: tuple[datetime, str] | None,
        limit: int | None,
    ) -> list[PortfolioRow]:
        """The filtered addresses after ``after`` in watch order (oldest first), ``limit`` of
        them (None: all, for an export)."""
        where, args = _where(account_id, environment, only)
        tail, tail_args = page_clause(after, limit, "w.")
        rows = await self._db.fetch_all(
            "SELECT w.id, w.chain, w.address, w.label, w.created_at, r.risk_score, r.risk_value, r.result,"
            f" r.scanned_at{where}{tail}",
            args + tail_args,
        )
        return [
            PortfolioRow(
                r[0], r[1], r[2], r[3], dt(r[4]), r[5] or UNSCORED, r[6], r[7], dt(r[8]) if r[8] is not None else None
            )
            for r in rows
        ]
