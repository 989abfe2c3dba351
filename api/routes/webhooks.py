"""Routes of webhooks: endpoints, their secrets, test pings, delivery history and the
service's ML-DSA signing key (``services.webhooks``; delivery in ``services.webhook_delivery``)."""

from __future__ import annotations

from sanic import HTTPResponse

from api.context import QdayRequest
from api.endpoints import Credential, EndpointGroup
from api.envelope import PAGED, no_content, ok, ok_page, requested_page
from api.models.webhooks import (
    AttemptOut,
    DeliveryOut,
    SigningKeyOut,
    TestSentOut,
    WebhookOut,
    WebhookRequest,
    WebhookWithSecretOut,
)
from api.ratelimit import RateGroup
from api.validation import text_field
from core.clock import iso
from services.webhooks import WebhookWithSecret
from storage.webhook_records import DeliveryAttempt, Webhook, WebhookDelivery

group = EndpointGroup("webhooks")

_SIGNING = (
    "Each delivery is a POST of {id: evt_…, type, createdAt, data} with headers Qday-Event-Id, "
    "Qday-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, '<t>.' + body)> (one v1 per secret in use: two "
    "for 24 hours after a rotation) and Qday-Signature-MLDSA: <hex ML-DSA-65 signature of '<t>.' + body, empty "
    "context> under GET /v1/webhooks/signing-key. qday_client.verify_webhook checks both and the timestamp's age. "
    "Delivered at least once: drop repeats by event id."
)


def _webhook_fields(w: Webhook) -> dict[str, object]:
    return {
        "id": w.id,
        "url": w.url,
        "events": [e.value for e in w.events],
        "description": w.description,
        "status": "disabled" if w.disabled_at is not None else "enabled",
        "created_at": iso(w.created_at),
        "failing_since": None if w.failing_since is None else iso(w.failing_since),
        "disabled_at": None if w.disabled_at is None else iso(w.disabled_at),
        "disabled_reason": w.disabled_reason,
        "previous_secret_expires_at": (
            None if w.previous_secret_expires_at is None else iso(w.previous_secret_expires_at)
        ),
    }


def _webhook_out(w: Webhook) -> WebhookOut:
    return WebhookOut(**_webhook_fields(w))  # type: ignore[arg-type]  # the fields above, typed by the model


def _with_secret_out(made: WebhookWithSecret) -> WebhookWithSecretOut:
    return WebhookWithSecretOut(**_webhook_fields(made.webhook), secret=made.secret)  # type: ignore[arg-type]


def _attempt_out(a: DeliveryAttempt) -> AttemptOut:
    return AttemptOut(
        attempt=a.attempt, attempted_at=iso(a.attempted_at), status=a.status, latency_ms=a.latency_ms, error=a.error
    )


def _delivery_out(d: WebhookDelivery, attempts: list[DeliveryAttempt]) -> DeliveryOut:
    return DeliveryOut(
        id=d.id,
        event_id=d.event_id,
        event_type=d.event_type.value,
        state=d.state.value,
        attempts=[_attempt_out(a) for a in attempts],
        next_attempt_at=None if d.next_attempt_at is None else iso(d.next_attempt_at),
        created_at=iso(d.created_at),
        finished_at=None if d.finished_at is None else iso(d.finished_at),
    )


@group.route(
    "POST",
    "/webhooks",
    summary="Register a webhook endpoint",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    body=WebhookRequest,
    response=WebhookWithSecretOut,
    status=201,
    errors=("REQ_001", "LIM_001"),
    tag="webhooks",
    description="The endpoint receives the events it names for watched addresses and wallets of the key's "
    "environment. Its secret (whsec_…) is in this response only. Endpoints per account (both environments) are "
    "capped by plan: free 2, builder 10, pro 50, enterprise 100 (LIM_001, cap webhooks). " + _SIGNING,
)
async def create_webhook(request: QdayRequest, body: WebhookRequest) -> HTTPResponse:
    """Register an endpoint and show its secret once."""
    description = text_field(body.description, "description")
    made = await request.app.ctx.webhooks.create(request.ctx.principal, body.url, list(body.events), description)
    return ok(request, _with_secret_out(made), status=201)


@group.route(
    "GET",
    "/webhooks",
    summary="List webhook endpoints",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=list[WebhookOut],
    errors=("REQ_001",),
    tag="webhooks",
    description=PAGED,
)
async def list_webhooks(request: QdayRequest) -> HTTPResponse:
    """A page of the caller's endpoints, oldest first (never their secrets)."""
    page = await request.app.ctx.webhooks.endpoints(request.ctx.principal, requested_page(request))
    return ok_page(request, [_webhook_out(w) for w in page.items], page.next_cursor)


@group.route(
    "GET",
    "/webhooks/signing-key",
    summary="The ML-DSA-65 public key webhook deliveries are signed with",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=SigningKeyOut,
    errors=("CUS_004",),
    tag="webhooks",
    description="One key for the service, held in managed custody (its private key never leaves it). "
    "Fetch it once and keep it: every Qday-Signature-MLDSA header verifies under it. " + _SIGNING,
)
async def signing_key(request: QdayRequest) -> HTTPResponse:
    """The signing key's algorithm and public key."""
    algorithm, public_key = await request.app.ctx.webhooks.signing_key()
    return ok(request, SigningKeyOut(algorithm=algorithm, public_key=public_key.hex()))  # type: ignore[arg-type]


@group.route(
    "DELETE",
    "/webhooks/{webhook_id}",
    summary="Delete a webhook endpoint",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    status=204,
    errors=("REQ_005",),
    tag="webhooks",
)
async def delete_webhook(request: QdayRequest, webhook_id: str) -> HTTPResponse:
    """Delete an endpoint and its delivery history; nothing more is sent to it."""
    await request.app.ctx.webhooks.delete(request.ctx.principal, webhook_id)
    return no_content()


@group.route(
    "POST",
    "/webhooks/{webhook_id}/rotate-secret",
    summary="Rotate a webhook endpoint's secret",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=WebhookWithSecretOut,
    errors=("REQ_005",),
    tag="webhooks",
    description="The new secret is in this response only. For 24 hours deliveries carry an HMAC under each "
    "secret (two v1= values), so a receiver can switch over without missing one.",
)
async def rotate_webhook_secret(request: QdayRequest, webhook_id: str) -> HTTPResponse:
    """A new secret for the endpoint."""
    rotated = await request.app.ctx.webhooks.rotate_secret(request.ctx.principal, webhook_id)
    return ok(request, _with_secret_out(rotated))


@group.route(
    "POST",
    "/webhooks/{webhook_id}/enable",
    summary="Enable a disabled webhook endpoint",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=WebhookOut,
    errors=("REQ_005",),
    tag="webhooks",
    description="An endpoint whose deliveries all failed for 24 hours is disabled; this turns it back on for new "
    "events (the deliveries that failed are not sent again).",
)
async def enable_webhook(request: QdayRequest, webhook_id: str) -> HTTPResponse:
    """Turn an endpoint back on."""
    return ok(request, _webhook_out(await request.app.ctx.webhooks.enable(request.ctx.principal, webhook_id)))


@group.route(
    "POST",
    "/webhooks/{webhook_id}/test",
    summary="Send a ping event to a webhook endpoint",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=TestSentOut,
    errors=("REQ_001", "REQ_005"),
    tag="webhooks",
    description="A ping {webhookId} is written to the outbox and sent at once, signed like every event; this "
    "answers with that first attempt. A failed ping is retried like any delivery. " + _SIGNING,
)
async def test_webhook(request: QdayRequest, webhook_id: str) -> HTTPResponse:
    """Ping the endpoint and report the first attempt."""
    sent = await request.app.ctx.webhooks.test(request.ctx.principal, webhook_id)
    attempt = sent.attempt
    out = TestSentOut(
        event_id=sent.event_id,
        delivered=attempt is not None and attempt.error is None,
        attempt=None if attempt is None else _attempt_out(attempt),
    )
    return ok(request, out)


@group.route(
    "GET",
    "/webhooks/{webhook_id}/deliveries",
    summary="A webhook endpoint's deliveries and their attempts",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=list[DeliveryOut],
    errors=("REQ_001", "REQ_005"),
    tag="webhooks",
    description="Each delivery with every attempt (time, HTTP status, latency, error). Retries wait 5 s, doubling "
    "to an hour, for 24 hours after the event. " + PAGED,
)
async def webhook_deliveries(request: QdayRequest, webhook_id: str) -> HTTPResponse:
    """A page of the endpoint's deliveries, oldest first."""
    page = await request.app.ctx.webhooks.deliveries(request.ctx.principal, webhook_id, requested_page(request))
    return ok_page(request, [_delivery_out(d, attempts) for d, attempts in page.items], page.next_cursor)
