"""The account page: the API keys of the page's environment (create, rotate, delete, with a
new secret shown once on the page answering the form), and the account's plan with its caps,
rate limits and this month's managed-custody usage.

Keys are managed through the same ``AccountService`` calls as ``/v1/auth/api-keys``, as the
session acting in the page's environment; a form's name and kind are checked by the same
model as that route's body (``CreateApiKeyRequest``). A secret is never put in an address,
the session or a stored page (every dashboard response is ``no-store``): reloading the page
shows only prefixes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from markupsafe import Markup
from sanic import HTTPResponse
from sanic.response import redirect

from api.context import QdayRequest
from api.dashboard.charts import Bar, Segment, bar_chart
from api.dashboard.frame import checked_form, dashboard, field, form_as, frame, render, signed_in
from api.endpoints import Credential, Endpoint
from api.models.accounts import CreateApiKeyRequest
from api.ratelimit import RateGroup, limit_for
from chains.environment import Environment
from services.accounts import Principal, clean_text
from services.allowances import Allowance
from services.custody.lifecycle import MANAGED_PLANS
from services.pagination import PageRequest
from storage.models import ApiKey, KeyType, Plan

#: Keys listed per page (an account holds at most ``API_KEY_CAP`` current ones, plus rotated
#: keys in their grace period).
PAGE_SIZE = 100


@dataclass(frozen=True, slots=True)
class Revealed:
    """A key's full secret, shown once on the page that answers the form which made it."""

    key: ApiKey
    secret: str
    rotated_from: str | None = None
    previous_expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class RateLimit:
    """Requests allowed per window for one group of endpoints on the account's plan."""

    group: str
    limit: int
    endpoints: list[str]


def _when(at: datetime | None) -> str | None:
    """A time as the page shows it (UTC, to the minute)."""
    return at.strftime("%Y-%m-%d %H:%M UTC") if at else None


def _key_view(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "name": key.name,
        "type": key.type.value,
        "prefix": key.prefix,
        "created": _when(key.created_at),
        "last_used": _when(key.last_used_at),
        "replaced_by": key.replaced_by,
        "expires": _when(key.expires_at),
    }


def _revealed_view(revealed: Revealed) -> dict[str, Any]:
    return {
        **_key_view(revealed.key),
        "secret": revealed.secret,
        "rotated_from": revealed.rotated_from,
        "previous_expires": _when(revealed.previous_expires_at),
    }


def key_form(request: QdayRequest, environment: Environment) -> tuple[str, KeyType]:
    """The name and kind of a new key from the form, checked by the model of the API's body
    (``CreateApiKeyRequest``: a name of 1-200 characters, ``secret`` or ``publishable``) and
    stored as the API stores it (NFC; control and bidi-override characters: REQ_001)."""
    raw = {"name": field(request, "name"), "type": field(request, "type"), "environment": environment.value}
    body = form_as(raw, CreateApiKeyRequest)
    return clean_text(body.name, "name"), KeyType(body.type)


def rate_limits(request: QdayRequest, plan: Plan) -> list[RateLimit]:
    """The plan's limit of every rate group an authenticated endpoint of the API counts in,
    with those endpoints (read from the app's routes, so the list is the API's own)."""
    settings = request.app.ctx.settings
    endpoints: dict[RateGroup, set[str]] = {}
    credentialed: set[RateGroup] = set()
    for route in request.app.router.routes:
        endpoint: Endpoint | None = getattr(route.ctx, "endpoint", None)
        if endpoint is None:
            continue
        endpoints.setdefault(endpoint.rate_group, set()).add(f"{endpoint.method} {endpoint.path}")
        if endpoint.credential is not Credential.NONE:
            credentialed.add(endpoint.rate_group)
    return [
        RateLimit(
            group.value,
            limit_for(group, plan, settings.enterprise_limit_factor, settings.rate_limit_multiplier),
            sorted(endpoints[group], key=lambda e: (e.split(" ", 1)[1], e)),
        )
        for group in RateGroup
        if group in credentialed
    ]


def _caps_chart(caps: Sequence[Allowance]) -> Markup:
    return bar_chart(
        "chart-caps",
        "Share of each plan cap in use (percent; each bar is the whole cap, 100)",
        [
            Bar(c.short, [Segment("in use", c.percent, "usage-used"), Segment("left", 100 - c.percent, "usage-left")])
            for c in caps
        ],
        "count",
    )


async def _page(
    request: QdayRequest,
    principal: Principal,
    environment: Environment,
    status: int = 200,
    revealed: Revealed | None = None,
) -> HTTPResponse:
    """The account page; with ``revealed``, the secret of the key just made, once."""
    ctx = request.app.ctx
    cursor = None if revealed is not None else request.args.get("cursor") or None
    keys = await ctx.accounts.list_keys(principal, PageRequest(PAGE_SIZE, cursor))
    plan = principal.account.plan
    caps = await ctx.allowances.allowances(principal.account)
    usage = await ctx.managed.usage(principal)
    return render(
        "account.html",
        status,
        **frame(request, principal, environment),
        keys=[_key_view(k) for k in keys.items],
        next_cursor=keys.next_cursor,
        revealed=_revealed_view(revealed) if revealed else None,
        kinds=[t.value for t in KeyType],
        plan=plan.value,
        plans=[p.value for p in Plan],
        caps=caps,
        chart_caps=_caps_chart(caps),
        rate_limits=rate_limits(request, plan),
        window=ctx.settings.rate_window_seconds,
        usage=usage,
        managed_allowed=plan in MANAGED_PLANS,
    )


@dashboard.get("/account")
@signed_in
async def account(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """The environment's API keys (prefixes only) with their forms, the plan's caps and
    rate limits, and this month's managed-custody usage."""
    return await _page(request, principal, environment)


@dashboard.post("/account/keys", ctx_rate_group=RateGroup.AUTH)
@signed_in
async def create_key(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Create a key of the page's environment (as ``POST /v1/auth/api-keys``) and answer the
    page with its secret, this once (201)."""
    checked_form(request)
    name, kind = key_form(request, environment)
    key, secret = await request.app.ctx.accounts.create_key(principal, name, kind, environment)
    return await _page(request, principal, environment, 201, Revealed(key, secret))


@dashboard.post("/account/keys/<key_id:str>/rotate", ctx_rate_group=RateGroup.AUTH)
@signed_in
async def rotate_key(request: QdayRequest, principal: Principal, environment: Environment, key_id: str) -> HTTPResponse:
    """Replace a key (as ``POST /v1/auth/api-keys/{id}/rotate``: the old one works through
    its grace period) and answer the page with the new secret, this once (201)."""
    checked_form(request)
    new, secret, old_expires = await request.app.ctx.accounts.rotate_key(principal, key_id)
    return await _page(request, principal, environment, 201, Revealed(new, secret, key_id, old_expires))


@dashboard.post("/account/keys/<key_id:str>/delete", ctx_rate_group=RateGroup.ACCOUNT)
@signed_in
async def delete_key(request: QdayRequest, principal: Principal, environment: Environment, key_id: str) -> HTTPResponse:
    """Delete a key at once and for good (as ``DELETE /v1/auth/api-keys/{id}``), then show
    the page again."""
    checked_form(request)
    await request.app.ctx.accounts.delete_key(principal, key_id)
    return redirect(f"/account?env={environment.value}", status=303)
