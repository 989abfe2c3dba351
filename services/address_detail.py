"""One address as the dashboard's detail page shows it, and the exposure trend of a
portfolio (issue 20): the tenant's latest stored scan result of the address (the body the
scan endpoint serves), its watch-list entry, and its W-level and risk value day by day from
the ``address_risk`` history the rescoring pipelines write (``storage.risk_history``).

An address is shown only to a tenant that watches or scanned it in the environment;
anything else, another tenant's addresses included, is not found (REQ_005). The history is
read off the event loop (DuckDB reads Parquet files)."""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import msgspec

from chains.environment import Environment
from core.clock import Clock
from services.accounts import Principal, environment_of
from services.errors import NotFound
from services.offload import run_blocking
from services.scans import resolve_address
from storage.models import ScanResult, WatchedAddress
from storage.repository import ScanStore
from storage.risk_history import LevelDay, RiskDay, RiskHistory
from storage.sql_portfolio import PortfolioFilter

#: Days of an address's history the detail page shows (today included).
HISTORY_DAYS = 90
#: Days of the portfolio's exposure trend (today included).
TREND_DAYS = 30


@dataclass(frozen=True, slots=True)
class AddressDetail:
    """An address of the tenant's: where, its watch entry (None: scanned, not watched), its
    latest stored result and that result's body (the spec's wallet-scan object; empty while
    not scored), and its scored days, oldest first."""

    chain: str
    address: str
    watch: WatchedAddress | None
    result: ScanResult | None
    body: dict[str, Any]
    history: list[RiskDay]


class AddressDetailService:
    """Detail and trend reads for one tenant and environment at a time."""

    def __init__(self, scans: ScanStore, history: RiskHistory, executor: Executor, clock: Clock) -> None:
        self._scans = scans
        self._history = history
        self._executor = executor
        self._clock = clock

    def _window(self, days: int) -> tuple[date, date]:
        today = self._clock.now().date()
        return today - timedelta(days=days - 1), today

    async def detail(self, principal: Principal, chain: str, address: str) -> AddressDetail:
        """The address (in its canonical form) as the principal's tenant knows it in the
        principal's environment. SCAN_002 for a chain not among the 19, SCAN_001 for an
        address not of that chain, REQ_005 when the tenant neither watches nor scanned it."""
        environment = environment_of(principal)
        target = resolve_address(address, chain, environment)
        chain_id, text = target.chain.value, str(target)
        account_id = principal.account.id
        watch = await self._scans.watched_entry(account_id, environment, chain_id, text)
        result = await self._scans.latest_result(account_id, environment, chain_id, text)
        if watch is None and result is None:
            raise NotFound(
                f"{text} on {chain_id} is neither watched nor scanned in the {environment.value} environment",
                id=text[:100],
            )
        since, until = self._window(HISTORY_DAYS)
        history = await run_blocking(
            self._executor, self._history.address_days, account_id, environment, chain_id, text, since, until
        )
        body = msgspec.json.decode(result.result) if result is not None else {}
        return AddressDetail(chain_id, text, watch, result, body, history)

    async def trend(self, account_id: str, environment: Environment, only: PortfolioFilter) -> list[LevelDay]:
        """The tenant's watched addresses (and their balance in USD) per W-level per day over
        the last ``TREND_DAYS`` days, filtered as the portfolio is; empty with no history."""
        since, until = self._window(TREND_DAYS)
        return await run_blocking(
            self._executor, self._history.level_days, account_id, environment, since, until, only.chain, only.level
        )
