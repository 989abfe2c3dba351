"""Webhook endpoints of a tenant (``/v1/webhooks``) and the events they receive.

An endpoint belongs to the account and environment of the secret key that made it and
receives that environment's events of the types it subscribes to. Its URL is checked
when it is made (``services.outbound``: https, no private or metadata addresses after
DNS resolution unless ``QDAY_WEBHOOK_ALLOW_PRIVATE``) and again at every delivery, since
what a name resolves to can change. Its secret is shown once, at creation or rotation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chains.environment import Environment
from core.clock import Clock, iso
from core.ids import new_id
from services.accounts import Principal, environment_of
from services.caps import WEBHOOK_CAPS, WEBHOOKS, cap_reached
from services.errors import InvalidRequest, NotFound
from services.outbound import Resolver, check_destination
from services.pagination import Page, PageRequest, keyset_after, keyset_cursor, page_of
from services.webhook_delivery import WebhookDeliverer
from services.webhook_signing import SIGNING_ALGORITHM, WebhookSigner, new_endpoint_secret, seal_secret
from storage.sql_webhooks import SqlWebhookStore
from storage.webhook_records import SUBSCRIBABLE, DeliveryAttempt, EventType, OutboxEvent, Webhook, WebhookDelivery

WEBHOOK_PAGES = "webhooks"
DELIVERY_PAGES = "webhook-deliveries"
#: How long the secret a rotation replaced still signs deliveries (beside the new one).
ROTATION_OVERLAP = timedelta(hours=24)
MAX_DESCRIPTION = 200


@dataclass(frozen=True, slots=True)
class WebhookWithSecret:
    """An endpoint just made or rotated, with its secret in clear (shown this once)."""

    webhook: Webhook
    secret: str


@dataclass(frozen=True, slots=True)
class TestSent:
    """A test ping: its event id and its first attempt (None: another worker took it)."""

    event_id: str
    attempt: DeliveryAttempt | None


def event_body(event_id: str, event_type: EventType, created_at: datetime, data: dict[str, Any]) -> bytes:
    """The JSON delivered for an event: ``{id, type, createdAt, data}``, compact UTF-8."""
    document = {"id": event_id, "type": event_type.value, "createdAt": iso(created_at), "data": data}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def new_event(
    account_id: str, environment: Environment, event_type: EventType, created_at: datetime, data: dict[str, Any]
) -> OutboxEvent:
    """An outbox event for an account and environment, with a fresh ``evt_`` id."""
    event_id = new_id("evt")
    body = event_body(event_id, event_type, created_at, data)
    return OutboxEvent(event_id, account_id, environment, event_type, body, created_at)


def _event_types(names: list[str]) -> tuple[EventType, ...]:
    allowed = [t.value for t in SUBSCRIBABLE]
    if not names or len(names) > len(allowed) or len(set(names)) != len(names) or not set(names) <= set(allowed):
        raise InvalidRequest(
            f"invalid request: events must be distinct values of {', '.join(allowed)} (field 'events')",
            field="events",
            reason="unknown, repeated or no event types",
            allowed=allowed,
        )
    return tuple(EventType(n) for n in names)


def _no_webhook(webhook_id: str) -> NotFound:
    """REQ_005 for an endpoint the caller does not have (its id cut to 40 characters)."""
    return NotFound(f"no webhook {webhook_id[:40]}", id=webhook_id[:40])


class WebhookService:
    """Endpoints, their secrets, test pings and delivery history, for the API."""

    def __init__(
        self,
        store: SqlWebhookStore,
        signer: WebhookSigner,
        deliverer: WebhookDeliverer,
        seal_key: bytes,
        clock: Clock,
        *,
        allow_private: bool,
        resolver: Resolver | None = None,
    ) -> None:
        self._store = store
        self._signer = signer
        self._deliverer = deliverer
        self._seal_key = seal_key
        self._clock = clock
        self._allow_private = allow_private
        self._resolver = resolver

    async def create(
        self, principal: Principal, url: str, events: list[str], description: str | None
    ) -> WebhookWithSecret:
        """A new endpoint and its secret; ``UnsafeDestination`` (REQ_001, field ``url``)
        for a refused URL, ``PlanCapReached`` beyond the plan's endpoints."""
        types = _event_types(events)
        if description is not None and len(description) > MAX_DESCRIPTION:
            raise InvalidRequest(
                f"invalid request: description is longer than {MAX_DESCRIPTION} characters (field 'description')",
                field="description",
                reason="too long",
            )
        await check_destination(url, allow_private=self._allow_private, resolver=self._resolver)
        account = principal.account
        webhook_id = new_id("wh")
        secret = new_endpoint_secret()
        webhook = Webhook(
            webhook_id,
            account.id,
            environment_of(principal),
            url,
            types,
            description,
            seal_secret(self._seal_key, webhook_id, account.id, secret),
            None,
            None,
            self._clock.now(),
        )
        cap = WEBHOOK_CAPS[account.plan]
        if await self._store.create(webhook, cap) is None:
            raise cap_reached(WEBHOOKS, cap, account.plan)
        return WebhookWithSecret(webhook, secret)

    async def _owned(self, principal: Principal, webhook_id: str) -> Webhook:
        webhook = await self._store.get(principal.account.id, environment_of(principal), webhook_id)
        if webhook is None:
            raise _no_webhook(webhook_id)
        return webhook

    async def get(self, principal: Principal, webhook_id: str) -> Webhook:
        """The caller's endpoint (REQ_005 when it is not theirs)."""
        return await self._owned(principal, webhook_id)

    async def endpoints(self, principal: Principal, page: PageRequest | None = None) -> Page[Webhook]:
        """A page of the caller's endpoints in its environment, oldest first."""
        page = page or PageRequest()
        after = keyset_after(WEBHOOK_PAGES, page.cursor)
        rows = await self._store.page(principal.account.id, environment_of(principal), after, page.limit + 1)
        return page_of(rows, page.limit, lambda w: keyset_cursor(WEBHOOK_PAGES, w.created_at, w.id))

    async def delete(self, principal: Principal, webhook_id: str) -> None:
        """Delete an endpoint and its delivery history (REQ_005 when it is not theirs)."""
        if not await self._store.remove(principal.account.id, environment_of(principal), webhook_id):
            raise _no_webhook(webhook_id)

    async def rotate_secret(self, principal: Principal, webhook_id: str) -> WebhookWithSecret:
        """A new secret for the endpoint; the one it replaces signs too for 24 hours."""
        current = await self._owned(principal, webhook_id)
        account_id = principal.account.id
        secret = new_endpoint_secret()
        rotated = await self._store.rotate_secret(
            account_id,
            current.environment,
            webhook_id,
            seal_secret(self._seal_key, webhook_id, account_id, secret),
            current.secret,
            self._clock.now() + ROTATION_OVERLAP,
        )
        if rotated is None:  # deleted meanwhile
            raise _no_webhook(webhook_id)
        return WebhookWithSecret(rotated, secret)

    async def enable(self, principal: Principal, webhook_id: str) -> Webhook:
        """Turn a disabled endpoint back on (new events reach it again)."""
        enabled = await self._store.enable(principal.account.id, environment_of(principal), webhook_id)
        if enabled is None:
            raise _no_webhook(webhook_id)
        return enabled

    async def test(self, principal: Principal, webhook_id: str) -> TestSent:
        """Send a ``ping`` event to the endpoint now, through the outbox like any event (a
        failed ping is retried as any delivery), and return its first attempt."""
        webhook = await self._owned(principal, webhook_id)
        now = self._clock.now()
        event = new_event(webhook.account_id, webhook.environment, EventType.PING, now, {"webhookId": webhook.id})
        delivery_ids = await self._store.emit(event, only_webhook=webhook.id)
        if not delivery_ids:  # disabled: the outbox keeps the event, nobody receives it
            raise InvalidRequest(
                f"webhook {webhook.id} is disabled; enable it first (POST /v1/webhooks/{webhook.id}/enable)",
                field="id",
                reason="disabled",
            )
        return TestSent(event.id, await self._deliverer.deliver_now(delivery_ids[0]))

    async def deliveries(
        self, principal: Principal, webhook_id: str, page: PageRequest | None = None
    ) -> Page[tuple[WebhookDelivery, list[DeliveryAttempt]]]:
        """A page of the endpoint's deliveries, oldest first, each with its attempts."""
        await self._owned(principal, webhook_id)
        page = page or PageRequest()
        after = keyset_after(DELIVERY_PAGES, page.cursor)
        rows = await self._store.deliveries(webhook_id, after, page.limit + 1)
        return page_of(rows, page.limit, lambda d: keyset_cursor(DELIVERY_PAGES, d[0].created_at, d[0].id))

    async def signing_key(self) -> tuple[str, bytes]:
        """The algorithm and public key every delivery's ML-DSA signature verifies under."""
        key = await self._signer.key()
        return SIGNING_ALGORITHM.value, key.public_key
