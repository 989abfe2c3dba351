"""Models of the webhook endpoints (``/v1/webhooks``)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from api.models.accounts import Out, Strict, Timestamp

EventName = Literal["key.exposed", "risk.changed", "balance.changed"]
WebhookUrl = Annotated[
    str,
    Meta(
        min_length=8,
        max_length=2048,
        description="https URL the events are POSTed to; private, loopback, link-local and cloud-metadata "
        "addresses are refused after DNS resolution (REQ_001, field url) unless the server allows private "
        "receivers (QDAY_WEBHOOK_ALLOW_PRIVATE); redirects are never followed",
    ),
]


class WebhookRequest(Strict):
    """Body of POST /v1/webhooks."""

    url: WebhookUrl
    events: Annotated[list[EventName], Meta(min_length=1, max_length=3)]
    description: Annotated[str, Meta(max_length=200)] | None = None


class WebhookOut(Out):
    """An endpoint: what it receives, and whether it is enabled. ``failingSince``: the
    first failed attempt of its current failure streak; after 24 hours of failures it is
    disabled (``status: disabled``, ``disabledReason``)."""

    id: Annotated[str, Meta(pattern="^wh_[0-9a-f]+$")]
    url: str
    events: list[EventName]
    description: str | None
    status: Literal["enabled", "disabled"]
    created_at: Timestamp
    failing_since: Timestamp | None
    disabled_at: Timestamp | None
    disabled_reason: str | None
    previous_secret_expires_at: Timestamp | None


class WebhookWithSecretOut(WebhookOut):
    """An endpoint just made, or its secret just rotated: the secret is shown this once."""

    secret: Annotated[str, Meta(pattern="^whsec_[A-Za-z0-9_-]{43}$")]


class AttemptOut(Out):
    """One POST of a delivery."""

    attempt: int
    attempted_at: Timestamp
    status: int | None
    latency_ms: float
    error: str | None


class DeliveryOut(Out):
    """One event to one endpoint, with every attempt."""

    id: str
    event_id: str
    event_type: Literal["key.exposed", "risk.changed", "balance.changed", "ping"]
    state: Literal["pending", "delivered", "failed"]
    attempts: list[AttemptOut]
    next_attempt_at: Timestamp | None
    created_at: Timestamp
    finished_at: Timestamp | None


class TestSentOut(Out):
    """A test ping: its event id and first attempt (null when another worker took it)."""

    event_id: str
    delivered: bool
    attempt: AttemptOut | None


class SigningKeyOut(Out):
    """The key every delivery's ``Qday-Signature-MLDSA`` verifies under."""

    algorithm: Literal["ml-dsa-65"]
    public_key: Annotated[str, Meta(description="hex, 1,952 bytes")]
