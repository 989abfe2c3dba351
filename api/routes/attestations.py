"""Routes for hybrid attestations: strict-mode statements, attesting, verifying."""

from __future__ import annotations

import json

from sanic import HTTPResponse

import pqc
from api.context import AppContext, QdayRequest
from api.endpoints import Credential, EndpointGroup
from api.envelope import ok
from api.errors import ApiError
from api.models.crypto import (
    AttestationOut,
    HybridRequest,
    StatementOut,
    StatementRequest,
    VerificationOut,
    VerifyRequest,
)
from api.ratelimit import RateGroup
from core.clock import iso
from services.accounts import Principal
from services.attestations import CheckResult, HybridInput, check_hybrid, check_plain, hybrid_algorithm
from services.offload import run_verification
from services.pq_keys import public_key_from_hex
from services.signers import chain_of, parse_claimed_signer, scheme_for
from storage.models import Attestation

group = EndpointGroup("attestations")
_HYBRID_FIELDS = ("message", "ecdsa_signature", "ecdsa_public_key", "pqc_signature", "pqc_public_key", "algorithm")
_MANAGED_FIELDS = ("public_key", "message", "signature", "algorithm")
_WIRE_NAMES = {
    "ecdsa_signature": "ecdsaSignature",
    "ecdsa_public_key": "ecdsaPublicKey",
    "pqc_signature": "pqcSignature",
    "pqc_public_key": "pqcPublicKey",
}


def _attestation_out(a: Attestation) -> AttestationOut:
    return AttestationOut(
        id=a.id,
        status="verified",
        message=a.message.hex(),
        ecdsa_public_key=a.ecdsa_claim,
        pqc_public_key=a.pqc_public_key.hex(),
        algorithm=a.algorithm,
        chain=a.chain,
        metadata=json.loads(a.metadata),
        ecdsa_scheme=a.ecdsa_scheme,
        context=a.context.hex(),
        strict=a.challenge_id is not None,
        created_at=iso(a.created_at),
    )


def _hybrid_input(
    message: str,
    ecdsa_signature: str,
    ecdsa_public_key: str,
    pqc_signature: str,
    pqc_public_key: str,
    algorithm: str,
    chain: str,
    ecdsa_scheme: str | None,
    context: str,
) -> HybridInput:
    chain_id = chain_of(chain)
    return HybridInput(
        message=pqc.decode_hex(message, field="message", allow_empty=True),
        ecdsa_signature=pqc.decode_hex(ecdsa_signature, field="ecdsaSignature"),
        claimed=parse_claimed_signer(ecdsa_public_key),
        scheme=scheme_for(chain_id, ecdsa_scheme),
        pqc_signature=pqc.decode_hex(pqc_signature, field="pqcSignature"),
        pqc_public_key=pqc.decode_hex(pqc_public_key, field="pqcPublicKey"),
        algorithm=hybrid_algorithm(algorithm),
        context=pqc.decode_hex(context, field="context", allow_empty=True),
        chain=chain_id.value,
    )


@group.route(
    "POST",
    "/attestations/challenge",
    summary="Get a single-use statement for a strict-mode attestation",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    body=StatementRequest,
    response=StatementOut,
    status=201,
    errors=("PQC_001", "PQC_002"),
    tag="attestations",
    description="The statement names this service, the chain and both keys, and can be attested once before it "
    "expires. Sign its UTF-8 bytes with both keys and send it as message with strict=true.",
)
async def issue_statement(request: QdayRequest, body: StatementRequest) -> HTTPResponse:
    """A canonical statement that defeats replay and mix-and-match of signatures."""
    chain = chain_of(body.chain)
    algorithm = hybrid_algorithm(body.algorithm)
    claimed = parse_claimed_signer(body.ecdsa_public_key)
    pqc_public_key = public_key_from_hex(algorithm, body.pqc_public_key, "pqcPublicKey")
    challenge = await request.app.ctx.attestations.issue_statement(
        request.ctx.principal, chain.value, claimed, algorithm, pqc_public_key
    )
    out = StatementOut(
        id=challenge.id,
        statement=challenge.statement,
        message=challenge.statement.encode().hex(),
        expires_at=iso(challenge.expires_at),
    )
    return ok(request, out, status=201)


@group.route(
    "POST",
    "/sign/hybrid",
    summary="Create a hybrid (ECDSA + ML-DSA) attestation",
    credential=Credential.SECRET,
    rate_group=RateGroup.SIGN,
    body=HybridRequest,
    response=AttestationOut,
    status=201,
    errors=("PQC_001", "PQC_002", "PQC_003", "PQC_004", "ATT_001", "ATT_002"),
    tag="attestations",
    description="Checks, in order: the ECDSA signer matches ecdsaPublicKey; the ML-DSA signature verifies; the "
    "ML-DSA key is registered to the caller; then stores the attestation. PQC_004 (nothing stored) if "
    "either signature fails, with details.ecdsaValid / details.pqcValid.",
)
async def sign_hybrid(request: QdayRequest, body: HybridRequest) -> HTTPResponse:
    """Verify both signatures off the event loop, then store the attestation."""
    h = _hybrid_input(
        body.message,
        body.ecdsa_signature,
        body.ecdsa_public_key,
        body.pqc_signature,
        body.pqc_public_key,
        body.algorithm,
        body.chain,
        body.ecdsa_scheme,
        body.context,
    )
    ctx = request.app.ctx
    result: CheckResult = await run_verification(ctx.executor, h.algorithm.value, check_hybrid, h)
    attestation = await ctx.attestations.attest(request.ctx.principal, h, result, body.metadata, body.strict)
    return ok(request, _attestation_out(attestation), status=201)


def _form_of(body: VerifyRequest) -> str:
    given = {name for name in VerifyRequest.__struct_fields__ if getattr(body, name) is not None}
    if given == {"attestation_id"}:
        return "stored"
    if given >= set(_HYBRID_FIELDS) and not given & {"attestation_id", "public_key", "signature"}:
        return "hybrid"
    if given >= set(_MANAGED_FIELDS) and given <= {*_MANAGED_FIELDS, "context"}:
        return "plain"
    raise ApiError(
        "REQ_001",
        "invalid request: send exactly one form: {attestationId}; {message, ecdsaSignature, ecdsaPublicKey, "
        "pqcSignature, pqcPublicKey, algorithm[, chain, ecdsaScheme, context]}; or {public_key, message, "
        "signature, algorithm[, context]}",
        fields=sorted(_WIRE_NAMES.get(n, n) if n != "attestation_id" else "attestationId" for n in given),
    )


@group.route(
    "POST",
    "/verify",
    summary="Verify an attestation, raw hybrid components, or one ML-DSA signature",
    credential=Credential.SECRET,
    rate_group=RateGroup.VERIFY,
    body=VerifyRequest,
    response=VerificationOut,
    errors=("PQC_001", "PQC_002", "REQ_005"),
    tag="attestations",
    description="Three forms (see the body schema). The answer is 200 with valid/ecdsaValid/pqcValid whether or "
    "not the signatures hold; malformed keys or signatures are PQC_002. A stored attestation is "
    "re-verified from its stored signatures. The single-signature form is free of metering.",
)
async def verify(request: QdayRequest, body: VerifyRequest) -> HTTPResponse:
    """Re-run the checks and report each half separately."""
    return ok(request, await verification(request.app.ctx, request.ctx.principal, body))


async def verification(ctx: AppContext, principal: Principal, body: VerifyRequest) -> VerificationOut:
    """The verdict on one of the three forms of ``POST /v1/verify`` (a stored attestation of
    the caller's, raw hybrid components, one ML-DSA signature), each half checked off the
    loop; shared by the route and the dashboard's verify form. ``REQ_001`` for a body in
    none of the forms; malformed keys or signatures raise their ``PQC_002`` errors."""
    form = _form_of(body)
    attestation_id = None
    if form == "stored":
        assert body.attestation_id is not None  # _form_of checked it is present
        stored = await ctx.attestations.stored(principal, body.attestation_id)
        attestation_id = stored.id
        h = HybridInput(
            stored.message,
            stored.ecdsa_signature,
            parse_claimed_signer(stored.ecdsa_claim),
            pqc.parse_scheme(stored.ecdsa_scheme),
            stored.pqc_signature,
            stored.pqc_public_key,
            pqc.parse_algorithm(stored.algorithm),
            stored.context,
            stored.chain,
        )
    elif form == "hybrid":
        # _form_of checked these are present
        assert body.message is not None and body.ecdsa_signature is not None and body.ecdsa_public_key is not None
        assert body.pqc_signature is not None and body.pqc_public_key is not None and body.algorithm is not None
        h = _hybrid_input(
            body.message,
            body.ecdsa_signature,
            body.ecdsa_public_key,
            body.pqc_signature,
            body.pqc_public_key,
            body.algorithm,
            body.chain or "ethereum",
            body.ecdsa_scheme,
            body.context or "",
        )
    else:
        # _form_of checked these are present
        assert body.algorithm is not None and body.public_key is not None
        assert body.message is not None and body.signature is not None
        algorithm = pqc.parse_algorithm(body.algorithm)
        args = (
            algorithm,
            pqc.decode_hex(body.public_key, field="public_key"),
            pqc.decode_hex(body.message, field="message", allow_empty=True),
            pqc.decode_hex(body.signature, field="signature"),
            pqc.decode_hex(body.context or "", field="context", allow_empty=True),
        )
        valid = await run_verification(ctx.executor, algorithm.value, check_plain, *args)
        return VerificationOut(
            valid=valid,
            ecdsa_valid=None,
            pqc_valid=valid,
            attestation_id=None,
            algorithm=algorithm.value,
            chain=None,
            verified_at=iso(ctx.clock.now()),
        )
    result = await run_verification(ctx.executor, h.algorithm.value, check_hybrid, h)
    return VerificationOut(
        valid=result.valid,
        ecdsa_valid=result.ecdsa_valid,
        pqc_valid=result.pqc_valid,
        attestation_id=attestation_id,
        algorithm=h.algorithm.value,
        chain=h.chain,
        verified_at=iso(ctx.clock.now()),
    )
