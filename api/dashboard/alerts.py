"""The alerts pages: the tenant's webhook endpoints in the page's environment, forms to add,
test, re-enable, rotate and delete them, and each endpoint's deliveries with their attempts,
read and changed through the same ``services.webhooks`` calls as ``/v1/webhooks``.

A signing secret (``whsec_…``) is shown once, on the page that answers the form that made or
rotated it: never in an address, never again on a later page (the service keeps it sealed)."""

from __future__ import annotations

from typing import Any

from sanic import HTTPResponse
from sanic.response import redirect

from api.context import QdayRequest
from api.dashboard.charts import Bar, Segment, bar_chart
from api.dashboard.frame import checked_form, dashboard, field, form_as, frame, render, signed_in
from api.models.webhooks import WebhookRequest
from api.validation import text_field
from chains.environment import Environment
from core.clock import iso
from services.accounts import Principal
from services.pagination import PageRequest
from storage.webhook_records import SUBSCRIBABLE, DeliveryAttempt, DeliveryState, Webhook, WebhookDelivery

#: Endpoints, and deliveries of an endpoint, per page.
PAGE_SIZE = 50
#: What each subscribable event reports, as the form explains it.
EVENT_NAMES = {
    "key.exposed": "a watched address's public key became visible on chain",
    "risk.changed": "a watched address's W-level changed",
    "balance.changed": "the balance at stake changed",
}


def _page(request: QdayRequest) -> PageRequest:
    """The page the address asks for (a malformed cursor is the service's 400)."""
    return PageRequest(PAGE_SIZE, request.args.get("cursor") or None)


def _form_body(request: QdayRequest) -> WebhookRequest:
    """The add-endpoint form as the API's request body, held to the same model (URL length,
    event names), so a form is refused exactly where a JSON body would be."""
    form = request.form
    data = {
        "url": field(request, "url").strip(),
        "events": form.getlist("events") if form is not None else [],
        "description": field(request, "description").strip() or None,
    }
    return form_as(data, WebhookRequest)


def _delivery_view(delivery: WebhookDelivery, attempts: list[DeliveryAttempt]) -> dict[str, Any]:
    last = attempts[-1] if attempts else None
    return {
        "delivery": delivery,
        "attempts": attempts,
        "response": None if last is None else last.status,
        "error": None if last is None else last.error,
        "last_at": None if last is None else iso(last.attempted_at),
    }


async def _endpoint_page(
    request: QdayRequest,
    principal: Principal,
    environment: Environment,
    webhook: Webhook,
    status: int = 200,
    **shown_once: Any,
) -> HTTPResponse:
    """An endpoint with a page of its deliveries (oldest first, as the service pages them),
    charted by state; ``shown_once`` carries a new secret or a test ping's first attempt."""
    page = await request.app.ctx.webhooks.deliveries(principal, webhook.id, _page(request))
    rows = [_delivery_view(d, attempts) for d, attempts in page.items]
    by_state = {state.value: 0 for state in DeliveryState}
    for row in rows:
        by_state[row["delivery"].state.value] += 1
    chart = bar_chart(
        "chart-deliveries",
        "Deliveries on this page by state",
        [Bar(state, [Segment(state, n, f"state-{state}")]) for state, n in by_state.items()],
        "count",
    )
    context = {**frame(request, principal, environment), "path": f"/alerts/{webhook.id}"}
    return render(
        "alert_endpoint.html",
        status,
        **context,
        webhook=webhook,
        deliveries=rows,
        next_cursor=page.next_cursor,
        by_state=by_state,
        chart_deliveries=chart,
        iso=iso,
        **shown_once,
    )


@dashboard.get("/alerts")
@signed_in
async def alerts(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """The endpoints of this environment (oldest first, keyset pages) and the form to add one."""
    page = await request.app.ctx.webhooks.endpoints(principal, _page(request))
    return render(
        "alerts.html",
        **frame(request, principal, environment),
        webhooks=page.items,
        next_cursor=page.next_cursor,
        events=[t.value for t in SUBSCRIBABLE],
        event_names=EVENT_NAMES,
        iso=iso,
    )


@dashboard.post("/alerts")
@signed_in
async def add_endpoint(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Register an endpoint from the form; answer its page with the secret, this once."""
    checked_form(request)
    body = _form_body(request)
    description = text_field(body.description, "description")
    made = await request.app.ctx.webhooks.create(principal, body.url, list(body.events), description)
    return await _endpoint_page(request, principal, environment, made.webhook, 201, secret=made.secret)


@dashboard.get("/alerts/<webhook_id:str>")
@signed_in
async def endpoint(
    request: QdayRequest, principal: Principal, environment: Environment, webhook_id: str
) -> HTTPResponse:
    """One endpoint and a page of its deliveries (404 when it is not this tenant's here)."""
    webhook = await request.app.ctx.webhooks.get(principal, webhook_id)
    return await _endpoint_page(request, principal, environment, webhook)


@dashboard.post("/alerts/<webhook_id:str>/test")
@signed_in
async def send_test(
    request: QdayRequest, principal: Principal, environment: Environment, webhook_id: str
) -> HTTPResponse:
    """Send a ping now and answer the endpoint's page with its first attempt."""
    checked_form(request)
    webhooks = request.app.ctx.webhooks
    sent = await webhooks.test(principal, webhook_id)
    webhook = await webhooks.get(principal, webhook_id)  # after the attempt: its failing state is current
    return await _endpoint_page(request, principal, environment, webhook, sent=sent)


@dashboard.post("/alerts/<webhook_id:str>/rotate-secret")
@signed_in
async def rotate_secret(
    request: QdayRequest, principal: Principal, environment: Environment, webhook_id: str
) -> HTTPResponse:
    """A new secret for the endpoint, shown this once (the old one signs for 24 hours more)."""
    checked_form(request)
    rotated = await request.app.ctx.webhooks.rotate_secret(principal, webhook_id)
    return await _endpoint_page(request, principal, environment, rotated.webhook, secret=rotated.secret)


@dashboard.post("/alerts/<webhook_id:str>/enable")
@signed_in
async def enable(request: QdayRequest, principal: Principal, environment: Environment, webhook_id: str) -> HTTPResponse:
    """Turn a disabled endpoint back on, then show it."""
    checked_form(request)
    enabled = await request.app.ctx.webhooks.enable(principal, webhook_id)
    return redirect(f"/alerts/{enabled.id}?env={environment.value}", status=303)


@dashboard.post("/alerts/<webhook_id:str>/delete")
@signed_in
async def delete(request: QdayRequest, principal: Principal, environment: Environment, webhook_id: str) -> HTTPResponse:
    """Delete an endpoint and its delivery history, then list what is left."""
    checked_form(request)
    await request.app.ctx.webhooks.delete(principal, webhook_id)
    return redirect(f"/alerts?env={environment.value}", status=303)
