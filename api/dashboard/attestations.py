"""The attestations page: the account's hybrid (ECDSA + ML-DSA) attestations in the page's
environment, keyset-paged (``AttestationService.list_attestations``), and a form that verifies
a pasted attestation with the very call ``POST /v1/verify`` makes
(``api.routes.attestations.verification``), showing the verdict and, when invalid, which
signature failed."""

from __future__ import annotations

from typing import Any

from sanic import HTTPResponse

from api.context import QdayRequest
from api.dashboard.frame import checked_form, dashboard, field, frame, render, signed_in
from api.errors import ApiError, code_of, status_of
from api.models.crypto import VerificationOut, VerifyRequest
from api.ratelimit import RateGroup
from api.routes.attestations import verification
from api.validation import decode_json
from chains.environment import Environment
from core.clock import iso
from core.errors import DomainError
from services.accounts import Principal
from services.pagination import PageRequest
from storage.models import Attestation

#: Attestations per page.
PAGE_SIZE = 50
#: Characters that open a JSON text: anything else pasted as one word is an attestation id.
_JSON_STARTS = ("{", "[", '"')


def _row_view(a: Attestation) -> dict[str, Any]:
    return {
        "id": a.id,
        "signer": a.ecdsa_claim,
        "scheme": a.ecdsa_scheme,
        "pq_key_id": a.pq_key_id,
        "algorithm": a.algorithm,
        "chain": a.chain,
        "strict": a.challenge_id is not None,
        "created": iso(a.created_at),
        "status": "verified",  # the spec's only state: stored only once both signatures verified
    }


def _verify_body(pasted: str) -> VerifyRequest:
    """The ``POST /v1/verify`` body a pasted text stands for: one word is an attestation id,
    anything else must be that body's JSON, decoded with the API's own refusals (``REQ_001``,
    ``REQ_002``)."""
    text = pasted.strip()
    if not text:
        raise ApiError(
            "REQ_001",
            "invalid request: paste an attestation id or the JSON body of POST /v1/verify (field 'attestation')",
            field="attestation",
        )
    if len(text.split()) == 1 and not text.startswith(_JSON_STARTS):
        return VerifyRequest(attestation_id=text)
    return decode_json(text.encode(), VerifyRequest)


def _verdict_view(v: VerificationOut) -> dict[str, Any]:
    reasons = []
    if v.ecdsa_valid is False:
        reasons.append("the ECDSA signature was not made by the named key or address over this message")
    if not v.pqc_valid:
        reasons.append(f"the {v.algorithm} signature does not verify with this public key over this message")
    return {
        "valid": v.valid,
        "ecdsa_valid": v.ecdsa_valid,
        "pqc_valid": v.pqc_valid,
        "attestation_id": v.attestation_id,
        "algorithm": v.algorithm,
        "chain": v.chain,
        "verified_at": v.verified_at,
        "reasons": reasons,
    }


async def _page(
    request: QdayRequest, principal: Principal, environment: Environment, status: int = 200, **verify: Any
) -> HTTPResponse:
    page = PageRequest(PAGE_SIZE, request.args.get("cursor") or None)
    listed = await request.app.ctx.attestations.list_attestations(principal, page)
    return render(
        "attestations.html",
        status,
        **frame(request, principal, environment),
        rows=[_row_view(a) for a in listed.items],
        next_cursor=listed.next_cursor,
        **verify,
    )


@dashboard.get("/attestations")
@signed_in
async def attestations(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """The account's attestations in this environment, ``PAGE_SIZE`` a page, and the verify form."""
    return await _page(request, principal, environment)


@dashboard.post("/attestations/verify", ctx_rate_group=RateGroup.VERIFY)
@signed_in
async def attestations_verify(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Verify a pasted attestation (an id or the JSON of ``POST /v1/verify``) as the API does,
    and show the verdict on the page; input the API refuses shows its code and status."""
    checked_form(request)
    pasted = field(request, "attestation")
    try:
        verdict = await verification(request.app.ctx, principal, _verify_body(pasted))
    except ApiError as exc:
        error = f"{exc} ({exc.code})"
        return await _page(request, principal, environment, exc.status_code, pasted=pasted, error=error)
    except DomainError as exc:
        code = code_of(exc)
        error = f"{exc} ({code})"
        return await _page(request, principal, environment, status_of(code), pasted=pasted, error=error)
    return await _page(request, principal, environment, pasted=pasted, verdict=_verdict_view(verdict))
