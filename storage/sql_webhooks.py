"""``WebhookStore`` on either engine (migration 0013): endpoints, the outbox, deliveries
claimed by lease, their attempts, and the service's signing keys.

``add_event`` runs inside the caller's transaction, so an event and the change it reports
commit together (or neither does). Workers claim due deliveries by setting
``claimed_until``: on PostgreSQL the candidate rows are locked with ``SKIP LOCKED``, so
workers on several nodes take disjoint batches; SQLite runs one writer at a time anyway.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from chains.environment import Environment
from storage.database import Database, Row, Tx
from storage.models import Keyset
from storage.sql import dt, insert_or_get, page_clause, ts
from storage.webhook_records import (
    ClaimedDelivery,
    DeliveryAttempt,
    DeliveryState,
    EventType,
    OutboxEvent,
    ServiceKey,
    Webhook,
    WebhookDelivery,
)

_WEBHOOK = (
    "id, account_id, environment, url, events, description, secret, previous_secret, previous_secret_expires_at,"
    " created_at, failing_since, disabled_at, disabled_reason"
)
_WEBHOOK_W = ", ".join(f"w.{c.strip()}" for c in _WEBHOOK.split(","))
_DELIVERY_D = (
    "d.id, d.webhook_id, d.event_id, e.type, d.state, d.attempts, d.next_attempt_at, d.created_at, d.finished_at"
)
_ATTEMPT = "delivery_id, attempt, attempted_at, status, latency_ms, error"
_SERVICE_KEY = "name, algorithm, public_key, key_ref, backend, wrapping_key, created_at"
#: The account's endpoints in both environments: what the webhook cap counts.
_ENDPOINT_COUNT = "SELECT count(*) FROM webhooks WHERE account_id = ?"


def _webhook(row: Row) -> Webhook:
    return Webhook(
        row[0],
        row[1],
        Environment(row[2]),
        row[3],
        tuple(EventType(e) for e in json.loads(row[4])),
        row[5],
        bytes(row[6]),
        None if row[7] is None else bytes(row[7]),
        dt(row[8]),
        dt(row[9]),
        dt(row[10]),
        dt(row[11]),
        row[12],
    )


def _delivery(row: Row) -> WebhookDelivery:
    return WebhookDelivery(
        row[0],
        row[1],
        row[2],
        EventType(row[3]),
        DeliveryState(row[4]),
        int(row[5]),
        dt(row[6]),
        dt(row[7]),
        dt(row[8]),
    )


def _attempt(row: Row) -> DeliveryAttempt:
    return DeliveryAttempt(row[0], int(row[1]), dt(row[2]), row[3], float(row[4]), row[5])


def _webhook_values(w: Webhook) -> Row:
    return (
        w.id,
        w.account_id,
        w.environment.value,
        w.url,
        json.dumps([e.value for e in w.events]),
        w.description,
        w.secret,
        w.previous_secret,
        ts(w.previous_secret_expires_at),
        ts(w.created_at),
        ts(w.failing_since),
        ts(w.disabled_at),
        w.disabled_reason,
    )


def webhook_cap_lock(account_id: str) -> str:
    """The ``Tx.lock`` key of an account's webhook cap (checked and added under it)."""
    return f"webhooks:{account_id}"


async def add_event(tx: Tx, event: OutboxEvent, only_webhook: str | None = None) -> list[str]:
    """Put ``event`` in the outbox with a pending delivery, due now, for every enabled
    endpoint of its account and environment subscribed to its type (``only_webhook``: to
    that endpoint alone, whatever it subscribes to: a test ping). Runs in the caller's
    transaction; the delivery ids made (ids ``<event id>.<webhook id>``)."""
    rows = await tx.fetch_all(
        "SELECT id, events FROM webhooks WHERE account_id = ? AND environment = ? AND disabled_at IS NULL",
        (event.account_id, event.environment.value),
    )
    targets = [
        webhook_id
        for webhook_id, events in rows
        if (webhook_id == only_webhook if only_webhook is not None else event.type.value in json.loads(events))
    ]
    await tx.execute(
        "INSERT INTO webhook_events (id, account_id, environment, type, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (event.id, event.account_id, event.environment.value, event.type.value, event.body, ts(event.created_at)),
    )
    ids = [f"{event.id}.{webhook_id}" for webhook_id in targets]
    if ids:
        created = ts(event.created_at)
        await tx.execute_many(
            "INSERT INTO webhook_deliveries (id, webhook_id, event_id, state, attempts, next_attempt_at, created_at)"
            " VALUES (?, ?, ?, 'pending', 0, ?, ?)",
            [
                (delivery_id, webhook_id, event.id, created, created)
                for delivery_id, webhook_id in zip(ids, targets, strict=True)
            ],
        )
    return ids


class SqlWebhookStore:
    """Webhooks, their outbox and deliveries on an operational database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, webhook: Webhook, cap: int) -> Webhook | None:
        """Store a new endpoint unless its account already has ``cap`` of them (both
        environments): None then."""

        async def create(tx: Tx) -> Webhook | None:
            await tx.lock(webhook_cap_lock(webhook.account_id))
            row = await tx.fetch_one(_ENDPOINT_COUNT, (webhook.account_id,))
            if row is not None and int(row[0]) >= cap:
                return None
            await tx.execute(
                f"INSERT INTO webhooks ({_WEBHOOK}) VALUES ({', '.join('?' * 13)})", _webhook_values(webhook)
            )
            return webhook

        return await self._db.write(create)

    async def count(self, account_id: str) -> int:
        """How many endpoints the account has (both environments): what ``create``'s cap
        counts."""
        row = await self._db.fetch_one(_ENDPOINT_COUNT, (account_id,))
        return 0 if row is None else int(row[0])

    async def get(self, account_id: str, environment: Environment, webhook_id: str) -> Webhook | None:
        """The account's endpoint ``webhook_id`` in one environment, if it exists."""
        row = await self._db.fetch_one(
            f"SELECT {_WEBHOOK} FROM webhooks WHERE id = ? AND account_id = ? AND environment = ?",
            (webhook_id, account_id, environment.value),
        )
        return None if row is None else _webhook(row)

    async def page(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[Webhook]:
        """The account's endpoints in one environment, oldest first, after ``after``."""
        tail, args = page_clause(after, limit)
        rows = await self._db.fetch_all(
            f"SELECT {_WEBHOOK} FROM webhooks WHERE account_id = ? AND environment = ?{tail}",
            (account_id, environment.value, *args),
        )
        return [_webhook(r) for r in rows]

    async def remove(self, account_id: str, environment: Environment, webhook_id: str) -> bool:
        """Delete an endpoint with its deliveries and their attempts (its events stay for
        other endpoints); False when it is not the account's."""

        async def remove(tx: Tx) -> bool:
            owned = await tx.fetch_one(
                "SELECT 1 FROM webhooks WHERE id = ? AND account_id = ? AND environment = ?",
                (webhook_id, account_id, environment.value),
            )
            if owned is None:
                return False
            await tx.execute(
                "DELETE FROM webhook_attempts WHERE delivery_id IN"
                " (SELECT id FROM webhook_deliveries WHERE webhook_id = ?)",
                (webhook_id,),
            )
            await tx.execute("DELETE FROM webhook_deliveries WHERE webhook_id = ?", (webhook_id,))
            await tx.execute("DELETE FROM webhooks WHERE id = ?", (webhook_id,))
            return True

        return await self._db.write(remove)

    async def rotate_secret(
        self,
        account_id: str,
        environment: Environment,
        webhook_id: str,
        secret: bytes,
        previous: bytes,
        previous_expires_at: datetime,
    ) -> Webhook | None:
        """Replace the endpoint's sealed secret, keeping ``previous`` (the one replaced,
        sealed) until ``previous_expires_at``; None when it is not the account's."""

        async def rotate(tx: Tx) -> Webhook | None:
            row = await tx.fetch_one(
                "UPDATE webhooks SET secret = ?, previous_secret = ?, previous_secret_expires_at = ?"
                f" WHERE id = ? AND account_id = ? AND environment = ? RETURNING {_WEBHOOK}",
                (secret, previous, ts(previous_expires_at), webhook_id, account_id, environment.value),
            )
            return None if row is None else _webhook(row)

        return await self._db.write(rotate)

    async def enable(self, account_id: str, environment: Environment, webhook_id: str) -> Webhook | None:
        """Enable a disabled endpoint again (its failure streak forgotten); None when it is
        not the account's."""

        async def enable(tx: Tx) -> Webhook | None:
            row = await tx.fetch_one(
                "UPDATE webhooks SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL"
                f" WHERE id = ? AND account_id = ? AND environment = ? RETURNING {_WEBHOOK}",
                (webhook_id, account_id, environment.value),
            )
            return None if row is None else _webhook(row)

        return await self._db.write(enable)

    async def emit(self, event: OutboxEvent, only_webhook: str | None = None) -> list[str]:
        """``add_event`` in a transaction of its own; the delivery ids made."""
        return await self._db.write(lambda tx: add_event(tx, event, only_webhook))

    async def claim_due(self, now: datetime, claimed_until: datetime, limit: int) -> list[ClaimedDelivery]:
        """Claim up to ``limit`` pending deliveries due by ``now`` that nobody holds, until
        ``claimed_until``, earliest due first."""
        skip_locked = " FOR UPDATE SKIP LOCKED" if self._db.dialect == "postgresql" else ""

        async def claim(tx: Tx) -> list[ClaimedDelivery]:
            rows = await tx.fetch_all(
                "UPDATE webhook_deliveries SET claimed_until = ? WHERE id IN (SELECT id FROM webhook_deliveries"
                " WHERE state = 'pending' AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?)"
                f" ORDER BY next_attempt_at LIMIT ?{skip_locked}) RETURNING id",
                (ts(claimed_until), ts(now), ts(now), limit),
            )
            return await _claimed(tx, [r[0] for r in rows], claimed_until)

        return await self._db.write(claim)

    async def claim(self, delivery_id: str, now: datetime, claimed_until: datetime) -> ClaimedDelivery | None:
        """Claim one pending delivery whoever it is due for (a test ping sent at once);
        None when it is not pending or another worker holds it."""

        async def claim(tx: Tx) -> ClaimedDelivery | None:
            row = await tx.fetch_one(
                "UPDATE webhook_deliveries SET claimed_until = ? WHERE id = ? AND state = 'pending'"
                " AND (claimed_until IS NULL OR claimed_until <= ?) RETURNING id",
                (ts(claimed_until), delivery_id, ts(now)),
            )
            claimed = await _claimed(tx, [row[0]] if row else [], claimed_until)
            return claimed[0] if claimed else None

        return await self._db.write(claim)

    async def record_attempt(
        self, attempt: DeliveryAttempt, next_attempt_at: datetime | None, disable_reason: str | None = None
    ) -> None:
        """Keep one attempt and move its delivery on: delivered (no error), pending again
        at ``next_attempt_at``, or failed for good (neither). A failure starts the endpoint's
        failure streak (``failing_since``) and a success ends it; ``disable_reason``
        disables the endpoint and fails its pending deliveries."""
        at = ts(attempt.attempted_at)

        async def record(tx: Tx) -> None:
            if attempt.error is None:
                state, next_at, finished = DeliveryState.DELIVERED, None, at
            elif next_attempt_at is not None:
                state, next_at, finished = DeliveryState.PENDING, ts(next_attempt_at), None
            else:
                state, next_at, finished = DeliveryState.FAILED, None, at
            row = await tx.fetch_one(
                "UPDATE webhook_deliveries SET state = ?, attempts = ?, next_attempt_at = ?, claimed_until = NULL,"
                " finished_at = ? WHERE id = ? RETURNING webhook_id",
                (state.value, attempt.attempt, next_at, finished, attempt.delivery_id),
            )
            if row is None:  # the endpoint was deleted meanwhile, with its deliveries
                return
            await tx.execute(
                f"INSERT INTO webhook_attempts ({_ATTEMPT}) VALUES (?, ?, ?, ?, ?, ?)",
                (attempt.delivery_id, attempt.attempt, at, attempt.status, attempt.latency_ms, attempt.error),
            )
            webhook_id = row[0]
            if attempt.error is None:
                await tx.execute("UPDATE webhooks SET failing_since = NULL WHERE id = ?", (webhook_id,))
                return
            await tx.execute(
                "UPDATE webhooks SET failing_since = coalesce(failing_since, ?) WHERE id = ?", (at, webhook_id)
            )
            if disable_reason is not None:
                await tx.execute(
                    "UPDATE webhooks SET disabled_at = ?, disabled_reason = ? WHERE id = ? AND disabled_at IS NULL",
                    (at, disable_reason, webhook_id),
                )
                await tx.execute(
                    "UPDATE webhook_deliveries SET state = 'failed', next_attempt_at = NULL, claimed_until = NULL,"
                    " finished_at = ? WHERE webhook_id = ? AND state = 'pending'",
                    (at, webhook_id),
                )

        await self._db.write(record)

    async def deliveries(
        self, webhook_id: str, after: Keyset | None = None, limit: int | None = None
    ) -> list[tuple[WebhookDelivery, list[DeliveryAttempt]]]:
        """An endpoint's deliveries, oldest first after ``after``, each with its attempts
        in order (the caller checks the endpoint is the tenant's)."""
        tail, args = page_clause(after, limit, "d.")
        rows = await self._db.fetch_all(
            f"SELECT {_DELIVERY_D} FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id"
            f" WHERE d.webhook_id = ?{tail}",
            (webhook_id, *args),
        )
        deliveries = [_delivery(r) for r in rows]
        attempts: dict[str, list[DeliveryAttempt]] = {d.id: [] for d in deliveries}
        if deliveries:
            marks = ", ".join("?" * len(deliveries))
            for row in await self._db.fetch_all(
                f"SELECT {_ATTEMPT} FROM webhook_attempts WHERE delivery_id IN ({marks}) ORDER BY delivery_id, attempt",
                [d.id for d in deliveries],
            ):
                attempts[row[0]].append(_attempt(row))
        return [(d, attempts[d.id]) for d in deliveries]

    async def pending_count(self) -> int:
        """Deliveries still waiting for an attempt, all tenants (for metrics and tests)."""
        row = await self._db.fetch_one("SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'")
        return 0 if row is None else int(row[0])

    async def service_key(self, name: str) -> ServiceKey | None:
        """The service's key ``name``, if made."""
        row = await self._db.fetch_one(f"SELECT {_SERVICE_KEY} FROM service_keys WHERE name = ?", (name,))
        return None if row is None else _service_key(row)

    async def add_service_key(self, key: ServiceKey) -> ServiceKey:
        """Keep ``key`` unless a key of that name exists (another node made it first): the
        stored one either way."""

        async def add(tx: Tx) -> ServiceKey:
            values = (
                key.name,
                key.algorithm,
                key.public_key,
                key.key_ref,
                key.backend,
                key.wrapping_key,
                ts(key.created_at),
            )
            return _service_key(await insert_or_get(tx, "service_keys", _SERVICE_KEY, values, ("name",), (key.name,)))

        return await self._db.write(add)


def _service_key(row: Row) -> ServiceKey:
    return ServiceKey(row[0], row[1], bytes(row[2]), bytes(row[3]), row[4], row[5], dt(row[6]))


async def _claimed(tx: Tx, ids: Sequence[str], claimed_until: datetime) -> list[ClaimedDelivery]:
    if not ids:
        return []
    rows = await tx.fetch_all(
        f"SELECT {_DELIVERY_D}, e.body, {_WEBHOOK_W} FROM webhook_deliveries d"
        " JOIN webhook_events e ON e.id = d.event_id JOIN webhooks w ON w.id = d.webhook_id"
        f" WHERE d.id IN ({', '.join('?' * len(ids))}) ORDER BY d.next_attempt_at, d.id",
        list(ids),
    )
    return [ClaimedDelivery(_delivery(r[:9]), _webhook(r[10:]), bytes(r[9]), claimed_until) for r in rows]
