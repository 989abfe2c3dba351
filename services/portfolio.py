"""A tenant's portfolio for the dashboard: its watched addresses with their W-levels and
balances at risk, aggregated by chain × level in the store and paged, plus the whole list
for a CSV export. Filters are checked here (an unknown chain or level is REQ_003)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chains.environment import Environment
from chains.registry import Chain
from services.errors import InvalidRequest
from services.pagination import Page, PageRequest, keyset_after, keyset_cursor, page_of
from storage.sql_portfolio import UNSCORED, PortfolioCell, PortfolioFilter, PortfolioRow, SqlPortfolio

#: The W-levels a filter may name, most urgent last (``W4``: act now), and unscored.
LEVELS = ("W1", "W2", "W3", "W4", UNSCORED)
PORTFOLIO_PAGES = "portfolio"


@dataclass(frozen=True, slots=True)
class Portfolio:
    """The aggregates of the filtered portfolio and one page of its addresses."""

    cells: list[PortfolioCell]
    page: Page[PortfolioRow]

    @property
    def addresses(self) -> int:
        """How many addresses the filter selects (every page)."""
        return sum(c.addresses for c in self.cells)

    @property
    def balance_usd(self) -> float:
        """Their balance at risk in USD (addresses without a price count 0)."""
        return sum(c.balance_usd for c in self.cells)


def chains() -> list[str]:
    """The chains a filter may name, in registry order."""
    return [c.value for c in Chain]


def portfolio_filter(chain: str | None, level: str | None) -> PortfolioFilter:
    """The filter from the raw query values (empty: none); REQ_003 naming the field when a
    chain is not one of the 19 or a level not ``W1``-``W4`` / ``unscored``."""
    chain = chain or None
    level = level or None
    if chain is not None and chain not in chains():
        raise InvalidRequest(f"unknown chain {chain[:40]!r}", field="chain", reason="unknown chain")
    if level is not None and level not in LEVELS:
        raise InvalidRequest(f"level must be one of {', '.join(LEVELS)}", field="level", reason="unknown level")
    return PortfolioFilter(chain, level)


class PortfolioService:
    """Portfolio reads for one tenant and environment at a time."""

    def __init__(self, store: SqlPortfolio) -> None:
        self._store = store

    async def overview(
        self, account_id: str, environment: Environment, only: PortfolioFilter, page: PageRequest
    ) -> Portfolio:
        """The aggregates of the filtered portfolio and the page ``page`` asks for."""
        cells = await self._store.cells(account_id, environment, only)
        after = keyset_after(PORTFOLIO_PAGES, page.cursor)
        rows = await self._store.page(account_id, environment, only, after, page.limit + 1)
        return Portfolio(cells, page_of(rows, page.limit, lambda r: keyset_cursor(PORTFOLIO_PAGES, r.created_at, r.id)))

    async def export(self, account_id: str, environment: Environment, only: PortfolioFilter) -> Sequence[PortfolioRow]:
        """Every filtered address, for a CSV export."""
        return await self._store.page(account_id, environment, only, None, None)
