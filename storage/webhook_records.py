"""Records of webhooks kept in the operational store (migration 0013): endpoints, the
outbox of events, deliveries with their attempts, and the keys the service signs with."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from chains.environment import Environment
from storage.models import ScanResult


class EventType(enum.StrEnum):
    """What a webhook event reports (the ``type`` of a delivered body)."""

    KEY_EXPOSED = "key.exposed"  # a watched address's public key became visible
    RISK_CHANGED = "risk.changed"  # its quantum-risk level changed
    BALANCE_CHANGED = "balance.changed"  # the value at stake changed
    PING = "ping"  # POST /v1/webhooks/{id}/test; every endpoint receives it when tested


#: The event types an endpoint may subscribe to (a ping goes to the endpoint tested only).
SUBSCRIBABLE: tuple[EventType, ...] = (EventType.KEY_EXPOSED, EventType.RISK_CHANGED, EventType.BALANCE_CHANGED)


class DeliveryState(enum.StrEnum):
    """Where a delivery stands: waiting for its next attempt, done, or given up."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Webhook:
    """A tenant's endpoint. ``secret`` and ``previous_secret`` are sealed (never the
    secret itself); after a rotation the previous one also signs until it expires."""

    id: str
    account_id: str
    environment: Environment
    url: str
    events: tuple[EventType, ...]
    description: str | None
    secret: bytes = field(repr=False)
    previous_secret: bytes | None = field(repr=False)
    previous_secret_expires_at: datetime | None
    created_at: datetime
    failing_since: datetime | None = None
    disabled_at: datetime | None = None
    disabled_reason: str | None = None


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    """An event as it will be delivered: ``body`` holds the exact JSON bytes sent."""

    id: str
    account_id: str
    environment: Environment
    type: EventType
    body: bytes
    created_at: datetime


@dataclass(frozen=True, slots=True)
class WebhookDelivery:
    """One event to one endpoint: its state, attempts so far and the next one's time."""

    id: str
    webhook_id: str
    event_id: str
    event_type: EventType
    state: DeliveryState
    attempts: int
    next_attempt_at: datetime | None
    created_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    """One POST of a delivery: when, the HTTP status (None: no response), how long it
    took and why it failed (None: delivered)."""

    delivery_id: str
    attempt: int
    attempted_at: datetime
    status: int | None
    latency_ms: float
    error: str | None


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    """A delivery a worker holds until ``claimed_until``: what it needs to send it."""

    delivery: WebhookDelivery
    webhook: Webhook
    body: bytes
    claimed_until: datetime


@dataclass(frozen=True, slots=True)
class ServiceKey:
    """A key the service signs with, as custody made it: the public key and the backend's
    reference (``key_ref``; wrapped or remote, never private material)."""

    name: str
    algorithm: str
    public_key: bytes = field(repr=False)
    key_ref: bytes = field(repr=False)
    backend: str
    wrapping_key: str
    created_at: datetime


class ResultAlerts(Protocol):
    """The events a stored result replaced by a newer one raises (the daily rescoring's
    day-over-day diff): ``before`` the stored result's JSON (None: none stored),
    ``exposed_seen`` whether the chain-head follower has already seen the key on chain for
    this tenant (None: it has not looked), ``after`` the new result."""

    def __call__(self, before: str | None, exposed_seen: bool | None, after: ScanResult) -> list[OutboxEvent]:
        """The events (delivered in no particular order: receivers order by ``createdAt``)."""
        ...
