"""The webhook outbox on both engines: events reach the endpoints subscribed to them in the
transaction of the change; the daily rescoring's diff raises events only for what changed
(and not what the chain-head follower already alerted); claims are exclusive and lapse."""

from __future__ import annotations

import json
from datetime import timedelta

from chains.environment import Environment
from services.daily_alerts import daily_alerts
from services.webhooks import new_event
from storage.database import Database
from storage.models import ScanResult
from storage.sql_alert_state import AlertState, SqlAlertStateStore
from storage.sql_scans import SqlScanStore
from storage.sql_webhooks import SqlWebhookStore
from storage.webhook_records import EventType, Webhook
from tests.storage.test_engine_parity import NOW, accounts

LIVE = Environment.LIVE


def _webhook(webhook_id: str, account: str, events: tuple[EventType, ...]) -> Webhook:
    return Webhook(webhook_id, account, LIVE, "https://hooks.example/x", events, None, b"sealed", None, None, NOW)


def _result(account: str, address: str, exposed: bool, score: str, balance: str, hours: int) -> ScanResult:
    body = {"publicKeyExposed": exposed, "riskScore": score, "balanceAtRisk": balance, "exposureEvidence": []}
    at = NOW + timedelta(hours=hours)
    return ScanResult(account, LIVE, "bitcoin", address, json.dumps(body), 50, score, "v", at, at, "pipeline")


async def _outbox(db: Database) -> list[tuple[str, str, str]]:
    rows = await db.fetch_all(
        "SELECT d.webhook_id, e.type, e.body FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id"
        " ORDER BY e.created_at, d.id"
    )
    return [(w, t, json.loads(b)["data"]["address"]) for w, t, b in rows]


async def test_events_reach_subscribed_enabled_endpoints_only(database: Database) -> None:
    await accounts(database, "usr_1", "usr_2")
    store = SqlWebhookStore(database)
    assert await store.create(_webhook("wh_a", "usr_1", (EventType.KEY_EXPOSED,)), cap=2)
    assert await store.create(_webhook("wh_b", "usr_1", (EventType.RISK_CHANGED,)), cap=2)
    assert await store.create(_webhook("wh_c", "usr_1", (EventType.KEY_EXPOSED,)), cap=2) is None  # the cap
    assert await store.create(_webhook("wh_d", "usr_2", (EventType.KEY_EXPOSED,)), cap=2)
    event = new_event("usr_1", LIVE, EventType.KEY_EXPOSED, NOW, {"address": "0xa"})
    assert await store.emit(event) == [f"{event.id}.wh_a"]
    ping = new_event("usr_1", LIVE, EventType.PING, NOW, {"address": "-"})
    assert await store.emit(ping, only_webhook="wh_b") == [f"{ping.id}.wh_b"]
    claimed = await store.claim_due(NOW, NOW + timedelta(seconds=30), 10)
    assert sorted(c.delivery.id for c in claimed) == sorted([f"{event.id}.wh_a", f"{ping.id}.wh_b"])
    assert await store.claim_due(NOW, NOW + timedelta(seconds=30), 10) == []  # held
    again = await store.claim_due(NOW + timedelta(seconds=31), NOW + timedelta(seconds=60), 10)
    assert len(again) == 2  # the claims lapsed
    assert {c.body for c in again} == {event.body, ping.body}


async def test_the_daily_diff_raises_what_changed(database: Database) -> None:
    await accounts(database, "usr_1")
    webhooks = SqlWebhookStore(database)
    every = (EventType.KEY_EXPOSED, EventType.RISK_CHANGED, EventType.BALANCE_CHANGED)
    await webhooks.create(_webhook("wh_a", "usr_1", every), cap=5)
    scans = SqlScanStore(database)
    rule = daily_alerts(lambda: NOW)
    await scans.save_results([_result("usr_1", "bc1a", False, "W2", "1 BTC", 0)], rule)
    assert await _outbox(database) == []  # the baseline
    await scans.save_results([_result("usr_1", "bc1a", False, "W2", "1 BTC", 1)], rule)
    assert await _outbox(database) == []  # nothing changed
    await scans.save_results([_result("usr_1", "bc1a", True, "W4", "2 BTC", 2)], rule)
    assert sorted(t for _, t, _ in await _outbox(database)) == ["balance.changed", "key.exposed", "risk.changed"]
    await scans.save_results([_result("usr_1", "bc1a", False, "W1", "0 BTC", 1)], rule)  # older data: not written
    assert len(await _outbox(database)) == 3


async def test_what_the_follower_alerted_is_not_alerted_again(database: Database) -> None:
    await accounts(database, "usr_1")
    every = (EventType.KEY_EXPOSED, EventType.RISK_CHANGED, EventType.BALANCE_CHANGED)
    await SqlWebhookStore(database).create(_webhook("wh_a", "usr_1", every), cap=5)
    scans = SqlScanStore(database)
    rule = daily_alerts(lambda: NOW)
    await scans.save_results([_result("usr_1", "bc1a", False, "W2", "1 BTC", 0)], rule)
    seen = AlertState("usr_1", "bitcoin", "bc1a", True, 10**8, (), 100, NOW)
    await SqlAlertStateStore(database).record(LIVE, [seen], [])
    await scans.save_results([_result("usr_1", "bc1a", True, "W4", "2 BTC", 1)], rule)
    assert [t for _, t, _ in await _outbox(database)] == ["risk.changed"]  # exposure and balance: the follower's


async def test_an_exposure_the_diff_alerts_is_marked_for_the_follower(database: Database) -> None:
    await accounts(database, "usr_1")
    await SqlWebhookStore(database).create(_webhook("wh_a", "usr_1", (EventType.KEY_EXPOSED,)), cap=5)
    alerts = SqlAlertStateStore(database)
    await alerts.record(LIVE, [AlertState("usr_1", "bitcoin", "bc1a", False, 0, (), 100, NOW)], [])
    scans = SqlScanStore(database)
    rule = daily_alerts(lambda: NOW)
    await scans.save_results([_result("usr_1", "bc1a", False, "W2", "1 BTC", 0)], rule)
    await scans.save_results([_result("usr_1", "bc1a", True, "W4", "1 BTC", 1)], rule)
    assert [t for _, t, _ in await _outbox(database)] == ["key.exposed"]
    assert (await alerts.states(LIVE))[("usr_1", "bitcoin", "bc1a")].exposed
