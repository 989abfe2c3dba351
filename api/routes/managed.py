"""Routes of managed custody: signing with a held key, the key lifecycle, its
audit log and the monthly usage. Managed keys are created by
``POST /v1/keys/generate`` with ``custody: "managed"`` (``api/routes/keys.py``)."""

from __future__ import annotations

import base64
import json

from sanic import HTTPResponse

import pqc
from api.context import QdayRequest
from api.endpoints import Credential, EndpointGroup
from api.envelope import PAGED, ok, ok_page, requested_page
from api.models.custody import (
    KeyUsageOut,
    ManagedKeyEventOut,
    ManagedKeyOut,
    ManagedSignatureOut,
    ManagedSignRequest,
    UsageOut,
)
from api.ratelimit import RateGroup
from core.clock import iso
from services.custody.billing import Usage
from storage.models import ManagedKey, ManagedKeyEvent

group = EndpointGroup("managed")
_KEY_ERRORS = ("REQ_005",)


def managed_key_out(k: ManagedKey, fmt: str = "hex") -> ManagedKeyOut:
    """The response form of a managed key (never any private material)."""
    public = k.public_key.hex() if fmt == "hex" else base64.b64encode(k.public_key).decode()
    return ManagedKeyOut(
        id=k.id,
        algorithm=k.algorithm,
        chain=k.chain,
        public_key=public,
        fingerprint=k.fingerprint,
        format="hex" if fmt == "hex" else "base64",
        state=k.state.value,
        environment=k.environment.value,
        created_at=iso(k.created_at),
        deletion_requested_at=iso(k.deletion_requested_at) if k.deletion_requested_at else None,
        deletion_scheduled_at=iso(k.deletion_scheduled_at) if k.deletion_scheduled_at else None,
        destroyed_at=iso(k.destroyed_at) if k.destroyed_at else None,
    )


def _event_out(e: ManagedKeyEvent) -> ManagedKeyEventOut:
    return ManagedKeyEventOut(
        id=e.id,
        key_id=e.key_id,
        type=e.type,  # type: ignore[arg-type]  # stored as text; the lifecycle writes only these four
        state=e.state.value,
        actor=e.actor,
        request_id=e.request_id,
        at=iso(e.at),
        details=json.loads(e.details),
        hash=e.hash.hex(),
    )


def _usage_out(u: Usage) -> UsageOut:
    return UsageOut(
        month=u.month,
        environment=u.environment.value,
        active_keys=u.active_keys,
        key_months=u.key_months,
        signatures=u.signatures,
        signature_blocks=u.signature_blocks,
        billable_units=u.billable_units,
        keys=[
            KeyUsageOut(key_id=k.key_id, algorithm=k.algorithm, state=k.state.value, signatures=k.signatures)
            for k in u.keys
        ],
    )


@group.route(
    "POST",
    "/sign/managed",
    summary="Sign a message with a managed (custody-held) ML-DSA key",
    credential=Credential.SECRET,
    rate_group=RateGroup.SIGN,
    body=ManagedSignRequest,
    response=ManagedSignatureOut,
    errors=("PQC_001", "PQC_002", "REQ_005", "CUS_001", "CUS_002", "CUS_003", "CUS_004", "CUS_005", "CUS_007"),
    tag="custody",
    description="Body in snake_case as the spec shows: key_id, message (hex), algorithm (the key's), optional "
    "context (hex, FIPS 204). The credential may be sent as X-API-Key or Authorization: Bearer. "
    "Pro plan and above (CUS_001). A key pending deletion refuses to sign (CUS_002); a destroyed key "
    "CUS_005; another account's or environment's key id REQ_005. Each signature is counted for the "
    "month's usage before it is returned.",
)
async def sign_managed(request: QdayRequest, body: ManagedSignRequest) -> HTTPResponse:
    """Unwrap in custody, sign once, wipe, count."""
    message = pqc.decode_hex(body.message, field="message", allow_empty=True)
    context = pqc.decode_hex(body.context, field="context", allow_empty=True)
    signed = await request.app.ctx.managed.sign(
        request.ctx.principal, body.key_id, body.algorithm, message, context, request.ctx.request_id
    )
    out = ManagedSignatureOut(
        key_id=signed.key.id,
        algorithm=signed.key.algorithm,
        signature=signed.signature.hex(),
        public_key=signed.key.public_key.hex(),
        context=signed.context.hex(),
        message_sha256=signed.message_sha256,
        signed_at=iso(signed.signed_at),
    )
    return ok(request, out)


@group.route(
    "GET",
    "/keys/{id}",
    summary="Get a managed key",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=ManagedKeyOut,
    errors=_KEY_ERRORS,
    tag="custody",
    description="Any state, destroyed included (the public key stays available). Ids of keys in self custody, "
    "of other accounts or of the other environment: REQ_005.",
)
async def get_managed_key(request: QdayRequest, id: str) -> HTTPResponse:  # noqa: A002 - the path parameter's name
    """One managed key of the caller."""
    return ok(request, managed_key_out(await request.app.ctx.managed.get(request.ctx.principal, id)))


@group.route(
    "DELETE",
    "/keys/{id}",
    summary="Schedule a managed key's deletion",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=ManagedKeyOut,
    errors=("REQ_005", "CUS_005", "CUS_006"),
    tag="custody",
    description="The key becomes pending_deletion with deletionScheduledAt at least 7 days ahead "
    "(QDAY_DELETION_WAIT_DAYS); it cannot sign meanwhile, and POST .../cancel-deletion restores it. "
    "After that date its key material is destroyed irreversibly. Scheduling again: CUS_006.",
)
async def delete_managed_key(request: QdayRequest, id: str) -> HTTPResponse:  # noqa: A002 - the path parameter's name
    """Start the waiting period."""
    key = await request.app.ctx.managed.schedule_deletion(request.ctx.principal, id, request.ctx.request_id)
    return ok(request, managed_key_out(key))


@group.route(
    "POST",
    "/keys/{id}/cancel-deletion",
    summary="Cancel a managed key's scheduled deletion",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=ManagedKeyOut,
    errors=("REQ_005", "CUS_005", "CUS_006"),
    tag="custody",
    description="pending_deletion → active. A key that is not pending deletion: CUS_006; destroyed: CUS_005.",
)
async def cancel_deletion(request: QdayRequest, id: str) -> HTTPResponse:  # noqa: A002 - the path parameter's name
    """End the waiting period early, keeping the key."""
    key = await request.app.ctx.managed.cancel_deletion(request.ctx.principal, id, request.ctx.request_id)
    return ok(request, managed_key_out(key))


@group.route(
    "GET",
    "/keys/{id}/events",
    summary="A managed key's audit log",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=list[ManagedKeyEventOut],
    errors=("REQ_001", *_KEY_ERRORS),
    tag="custody",
    description="Every state change, oldest first (in the order written); append-only. Each hash chains the "
    "account's previous event. " + PAGED,
)
async def key_events(request: QdayRequest, id: str) -> HTTPResponse:  # noqa: A002 - the path parameter's name
    """A page of the append-only log of one key."""
    page = await request.app.ctx.managed.events(request.ctx.principal, id, requested_page(request))
    return ok_page(request, [_event_out(e) for e in page.items], page.next_cursor)


@group.route(
    "GET",
    "/usage",
    summary="Managed-custody usage for a month",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=UsageOut,
    errors=("REQ_001",),
    tag="custody",
    description="Query parameter month=YYYY-MM (UTC; default the current month; REQ_001 unless ASCII digits "
    "from 2000-01 to 2999-12). Signing "
    "operations per key, key-months and billable units (key-months + ceil(signatures / 10,000)) of the "
    "caller's account in the caller's environment. Verification is never counted. No prices or billing.",
)
async def usage(request: QdayRequest) -> HTTPResponse:
    """Counts for the month."""
    month = request.args.get("month") or None
    return ok(request, _usage_out(await request.app.ctx.managed.usage(request.ctx.principal, month)))
