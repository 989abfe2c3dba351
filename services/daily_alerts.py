"""The events the daily rescoring raises, day over day (``ResultAlerts`` for
``ScanStore.save_results``): each published result against the one it replaces.

- ``risk.changed`` when the W-level (``riskScore``) changed;
- ``key.exposed`` when the key is on chain now and was not in the stored result, unless the
  chain-head follower already alerted it (it marks the tenant's ``alert_state``);
- ``balance.changed`` when the balance at risk changed, for addresses no follower follows
  (EVM and Bitcoin balances are alerted at the block by the follower; Solana's, Cosmos's and
  Tron's here).

A tenant's first result for an address is the baseline: no event. ``data`` is the shape
every address event has: ``{address, chain, before, after, exposureEvidence}``, ``before``
and ``after`` holding ``publicKeyExposed``, ``balance`` and ``riskScore``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from services.webhooks import new_event
from storage.models import ScanResult
from storage.webhook_records import EventType, OutboxEvent, ResultAlerts


def _side(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "publicKeyExposed": bool(result.get("publicKeyExposed")),
        "balance": result.get("balanceAtRisk"),
        "riskScore": result.get("riskScore"),
    }


def daily_alerts(now: Callable[[], datetime]) -> ResultAlerts:
    """The day-over-day rule, stamping events with ``now()``."""

    def alerts(before: str | None, exposed_seen: bool | None, after: ScanResult) -> list[OutboxEvent]:
        if before is None:
            return []
        old, new = json.loads(before), json.loads(after.result)
        data = {
            "address": after.address,
            "chain": after.chain,
            "before": _side(old),
            "after": _side(new),
            "exposureEvidence": new.get("exposureEvidence", []),
        }
        kinds: list[EventType] = []
        if new.get("publicKeyExposed") and not old.get("publicKeyExposed") and not exposed_seen:
            kinds.append(EventType.KEY_EXPOSED)
        if new.get("riskScore") != old.get("riskScore"):
            kinds.append(EventType.RISK_CHANGED)
        if exposed_seen is None and new.get("balanceAtRisk") != old.get("balanceAtRisk"):
            kinds.append(EventType.BALANCE_CHANGED)
        at = now()
        return [new_event(after.account_id, after.environment, kind, at, data) for kind in kinds]

    return alerts
