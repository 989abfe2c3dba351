"""Plan caps: how much of something one account may hold, by plan. The one rule the
API and ``qday watch import`` share; the stores count and insert in one transaction
(``ScanStore.watch``, ``Store.create_api_key``), so concurrent requests cannot overshoot.

| cap | free | builder | pro | enterprise |
|---|---:|---:|---:|---:|
| watched addresses (both environments) | 100 | 10,000 | 1,000,000 | ``enterprise_watch_cap`` (default 10,000,000) |
| current API keys (not deleted, rotated out or expired) | 20 | 20 | 20 | 20 |
| webhook endpoints (both environments) | 2 | 10 | 50 | 100 |
"""

from __future__ import annotations

from services.errors import PlanCapReached
from storage.models import Plan

WATCHLIST = "watchlist"
API_KEYS = "api_keys"
WEBHOOKS = "webhooks"
WATCH_CAPS: dict[Plan, int] = {Plan.FREE: 100, Plan.BUILDER: 10_000, Plan.PRO: 1_000_000}
#: The enterprise plan's watch cap unless configured (``QDAY_ENTERPRISE_WATCH_CAP``).
DEFAULT_ENTERPRISE_WATCH_CAP = 10_000_000
#: Current API keys per account, every plan (rotating a key does not add one).
API_KEY_CAP = 20
#: Webhook endpoints per account (both environments), by plan.
WEBHOOK_CAPS: dict[Plan, int] = {Plan.FREE: 2, Plan.BUILDER: 10, Plan.PRO: 50, Plan.ENTERPRISE: 100}
_WHAT = {WATCHLIST: "watched addresses", API_KEYS: "API keys", WEBHOOKS: "webhook endpoints"}


def watch_cap(plan: Plan, enterprise_cap: int = DEFAULT_ENTERPRISE_WATCH_CAP) -> int:
    """How many addresses an account of ``plan`` may watch (both environments together)."""
    return WATCH_CAPS.get(plan, enterprise_cap)


def cap_reached(cap: str, limit: int, plan: Plan) -> PlanCapReached:
    """The error for an account of ``plan`` that already holds ``limit`` of ``cap``."""
    what = _WHAT[cap]
    return PlanCapReached(
        f"plan cap reached: the {plan.value} plan allows {limit:,} {what} per account",
        cap=cap,
        limit=limit,
        plan=plan.value,
    )
