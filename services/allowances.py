"""Plan allowances: what an account holds against each plan cap of ``services.caps``,
counted by the same queries the stores run when they enforce those caps (so the numbers a
user is shown are the ones a refusal would be based on). Free of HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.clock import Clock
from services.caps import API_KEY_CAP, WEBHOOK_CAPS, watch_cap
from storage.models import Account
from storage.repository import ScanStore, Store
from storage.sql_webhooks import SqlWebhookStore


@dataclass(frozen=True, slots=True)
class Allowance:
    """One plan cap: what it counts, how much of it the account uses, the plan's limit."""

    name: str
    short: str  # the chart's label
    used: int
    limit: int

    @property
    def percent(self) -> float:
        """The share of the cap in use, 0 to 100."""
        return min(100.0, self.used * 100.0 / self.limit) if self.limit > 0 else 100.0


class AllowanceService:
    """Counts an account's holdings against its plan's caps (both environments)."""

    def __init__(
        self,
        accounts: Store,
        scans: ScanStore,
        webhooks: SqlWebhookStore,
        clock: Clock,
        enterprise_watch_cap: int,
    ) -> None:
        self._accounts = accounts
        self._scans = scans
        self._webhooks = webhooks
        self._clock = clock
        self._enterprise_watch_cap = enterprise_watch_cap

    async def allowances(self, account: Account) -> list[Allowance]:
        """The account's plan caps and what it holds against each, counted as the caps
        count (both environments): watched addresses (wallet-derived ones included),
        current API keys (rotated-out keys in their grace period, deleted and expired
        ones not counted), webhook endpoints."""
        watched = await self._scans.watch_count(account.id)
        keys = await self._accounts.current_api_key_count(account.id, self._clock.now())
        webhooks = await self._webhooks.count(account.id)
        return [
            Allowance("Watched addresses", "Addresses", watched, watch_cap(account.plan, self._enterprise_watch_cap)),
            Allowance("API keys", "API keys", keys, API_KEY_CAP),
            Allowance("Webhook endpoints", "Webhooks", webhooks, WEBHOOK_CAPS[account.plan]),
        ]
