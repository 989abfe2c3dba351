"""The managed keys pages: keys held in custody (their private halves never leave it), their
lifecycle (active → scheduled for deletion → destroyed, cancellable while scheduled), their
append-only audit log and the month's usage, through the same ``ManagedCustodyService`` calls
as ``api/routes/managed.py`` and ``POST /v1/keys/generate`` with ``custody: managed``."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sanic import HTTPResponse
from sanic.response import redirect

from api.context import QdayRequest
from api.dashboard.frame import checked_form, dashboard, field, frame, render, signed_in
from api.ratelimit import RateGroup
from chains.environment import Environment
from core.clock import iso
from services.accounts import Principal
from services.custody.backend import MANAGED_ALGORITHMS
from services.custody.lifecycle import MANAGED_PLANS
from services.pagination import PageRequest
from services.pq_keys import KEYGEN_CHAINS
from storage.models import ManagedKey, ManagedKeyEvent, ManagedKeyState

#: Keys per page of the list.
PAGE_SIZE = 50
#: Audit-log events per page of a key's page.
EVENT_PAGE_SIZE = 100
#: How each lifecycle state is named on the pages.
STATE_NAMES = {
    ManagedKeyState.ACTIVE: "active",
    ManagedKeyState.PENDING_DELETION: "scheduled for deletion",
    ManagedKeyState.DESTROYED: "destroyed",
}
#: How each audit-log event is named on the pages.
EVENT_NAMES = {
    "created": "created",
    "deletion_scheduled": "deletion scheduled",
    "deletion_cancelled": "deletion cancelled",
    "destroyed": "destroyed",
}


def _when(at: datetime | None) -> str | None:
    return iso(at) if at is not None else None


def _key_view(k: ManagedKey) -> dict[str, Any]:
    return {
        "id": k.id,
        "algorithm": k.algorithm,
        "chain": k.chain,
        "state": k.state.value,
        "state_name": STATE_NAMES[k.state],
        "fingerprint": k.fingerprint,
        "public_key": k.public_key.hex(),
        "created": iso(k.created_at),
        "deletion_requested": _when(k.deletion_requested_at),
        "deletion_scheduled": _when(k.deletion_scheduled_at),
        "destroyed": _when(k.destroyed_at),
    }


def _event_view(e: ManagedKeyEvent) -> dict[str, Any]:
    return {
        "type": e.type,
        "name": EVENT_NAMES.get(e.type, e.type),
        "state_name": STATE_NAMES[e.state],
        "actor": e.actor,
        "request_id": e.request_id,
        "at": iso(e.at),
        "details": sorted(json.loads(e.details).items()),
        "hash": e.hash.hex(),
    }


def _back(environment: Environment, key_id: str) -> HTTPResponse:
    return redirect(f"/managed/{key_id}?env={environment.value}", status=303)


@dashboard.get("/managed")
@signed_in
async def managed_keys(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """The account's managed keys in this environment (every state, ``PAGE_SIZE`` a page),
    the month's usage (``?month=YYYY-MM``, default this month) and the form creating a key."""
    custody = request.app.ctx.managed
    listed = await custody.list_keys(principal, PageRequest(PAGE_SIZE, request.args.get("cursor") or None))
    usage = await custody.usage(principal, request.args.get("month") or None)
    return render(
        "managed.html",
        **frame(request, principal, environment),
        keys=[_key_view(k) for k in listed.items],
        next_cursor=listed.next_cursor,
        usage=usage,
        state_names=STATE_NAMES,
        algorithms=[a.value for a in MANAGED_ALGORITHMS],
        chains=KEYGEN_CHAINS,
        plan_allows=principal.account.plan in MANAGED_PLANS,
        plans=", ".join(p.value for p in MANAGED_PLANS),
        available=custody.custody is not None,
    )


@dashboard.post("/managed/create", ctx_rate_group=RateGroup.KEYGEN)
@signed_in
async def managed_create(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Create a managed key from the form (as ``POST /v1/keys/generate`` with ``custody:
    managed`` does) and show it."""
    checked_form(request)
    key = await request.app.ctx.managed.create(
        principal, field(request, "algorithm"), field(request, "chain"), request.ctx.request_id
    )
    return _back(environment, key.id)


@dashboard.get("/managed/<key_id:str>")
@signed_in
async def managed_key(
    request: QdayRequest, principal: Principal, environment: Environment, key_id: str
) -> HTTPResponse:
    """One managed key: its public key, state and dates, the transitions it allows, its
    audit log (``EVENT_PAGE_SIZE`` a page) and its signatures this month."""
    custody = request.app.ctx.managed
    key = await custody.get(principal, key_id)
    events = await custody.events(principal, key.id, PageRequest(EVENT_PAGE_SIZE, request.args.get("cursor") or None))
    usage = await custody.usage(principal)
    signatures = next((k.signatures for k in usage.keys if k.key_id == key.id), 0)
    return render(
        "managed_key.html",
        **frame(request, principal, environment),
        key=_key_view(key),
        events=[_event_view(e) for e in events.items],
        next_cursor=events.next_cursor,
        month=usage.month,
        signatures=signatures,
    )


@dashboard.post("/managed/<key_id:str>/delete")
@signed_in
async def managed_schedule_deletion(
    request: QdayRequest, principal: Principal, environment: Environment, key_id: str
) -> HTTPResponse:
    """Schedule the key's deletion after the waiting period (``DELETE /v1/keys/{id}``)."""
    checked_form(request)
    key = await request.app.ctx.managed.schedule_deletion(principal, key_id, request.ctx.request_id)
    return _back(environment, key.id)


@dashboard.post("/managed/<key_id:str>/cancel-deletion")
@signed_in
async def managed_cancel_deletion(
    request: QdayRequest, principal: Principal, environment: Environment, key_id: str
) -> HTTPResponse:
    """Cancel the key's scheduled deletion, keeping it (``POST /v1/keys/{id}/cancel-deletion``)."""
    checked_form(request)
    key = await request.app.ctx.managed.cancel_deletion(principal, key_id, request.ctx.request_id)
    return _back(environment, key.id)
