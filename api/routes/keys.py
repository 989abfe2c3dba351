"""Routes for post-quantum key generation, registration and listing."""

from __future__ import annotations

import base64
import struct

from sanic import HTTPResponse

import pqc
from api.context import QdayRequest
from api.endpoints import Credential, EndpointGroup
from api.envelope import PAGED, ok, ok_page, requested_page
from api.errors import ApiError
from api.models.crypto import (
    GeneratedKeyOut,
    GenerateKeyRequest,
    PqKeyOut,
    RegisterKeyRequest,
    RegistrationChallengeOut,
    RegistrationChallengeRequest,
)
from api.models.custody import ManagedKeyOut
from api.ratelimit import RateGroup
from api.routes.managed import managed_key_out
from core.clock import iso
from services.errors import KeyGenerationFailed
from services.offload import run_blocking, run_verification
from services.pq_keys import keygen_chain, public_key_from_hex
from services.statements import REGISTRATION_CONTEXT
from storage.models import PqKey

group = EndpointGroup("keys", "/keys")
RAW_MAGIC = b"QDAYKEY1"
RAW_LAYOUT = (
    "QDAYKEY1 (8 bytes) | algorithm name length (u8) | algorithm name (ASCII) | public key length (u16 BE) | "
    "public key | private key length (u16 BE) | private key | seed length (u16 BE) | seed. Headers X-Key-Id, "
    "X-Key-Fingerprint, X-Key-Chain and X-Created-At carry the rest."
)


def _pq_key_out(k: PqKey) -> PqKeyOut:
    return PqKeyOut(
        id=k.id,
        algorithm=k.algorithm,
        chain=k.chain,
        public_key=k.public_key.hex(),
        fingerprint=k.fingerprint,
        origin=k.origin.value,
        created_at=iso(k.created_at),
    )


def _raw_body(keypair: pqc.KeyPair) -> bytes:
    name = keypair.algorithm.value.encode()
    parts = [RAW_MAGIC, struct.pack(">B", len(name)), name]
    for value in (keypair.public_key, keypair.private_key, keypair.seed):
        parts += [struct.pack(">H", len(value)), value]
    return b"".join(parts)


@group.route(
    "POST",
    "/generate",
    summary="Generate a post-quantum key pair",
    credential=Credential.SECRET,
    rate_group=RateGroup.KEYGEN,
    body=GenerateKeyRequest,
    response=GeneratedKeyOut | ManagedKeyOut,
    status=201,
    errors=("PQC_001", "GEN_001", "GEN_002", "CUS_001", "CUS_003", "CUS_004"),
    tag="keys",
    binary_alternative=RAW_LAYOUT,
    description="The public key is registered to the caller; the private key and seed are returned once and "
    "never stored or logged. format=raw answers application/octet-stream. With custody=managed "
    "(Pro plan and above, else CUS_001; ML-DSA only, else CUS_003) the private key stays in custody "
    "and the answer is the managed key (custody: managed, state: active), never private material.",
)
async def generate_key(request: QdayRequest, body: GenerateKeyRequest) -> HTTPResponse:
    """Generate a key pair off the event loop and register its public key."""
    ctx = request.app.ctx
    if body.custody == "managed":
        if body.format == "raw":
            raise ApiError(
                "REQ_001",
                "invalid request: format raw is not available with custody managed (no private "
                "key is returned); use hex or base64 (field 'format')",
                field="format",
            )
        key = await ctx.managed.create(request.ctx.principal, body.algorithm, body.chain, request.ctx.request_id)
        return ok(request, managed_key_out(key, body.format), status=201)
    algorithm = pqc.parse_algorithm(body.algorithm)
    chain = keygen_chain(body.chain)
    expanded = body.private_key_form == "expanded"
    if not expanded and pqc.SPECS[algorithm].family is not pqc.Family.ML_DSA:
        raise ApiError(
            "REQ_001",
            f"invalid request: privateKeyForm seed is for ML-DSA; {algorithm.value} private "
            "keys have one encoding, the FIPS 205 SK (field 'privateKeyForm')",
            field="privateKeyForm",
        )
    try:
        keypair = await run_blocking(ctx.executor, pqc.generate_keypair, algorithm, expanded=expanded)
    except pqc.PqcError:
        raise
    except Exception as exc:
        raise KeyGenerationFailed("key generation failed; nothing was stored") from exc
    record = await ctx.pq_keys.record_generated(request.ctx.principal, keypair, chain)
    if body.format == "raw":
        headers = {
            "X-Key-Id": record.id,
            "X-Key-Fingerprint": record.fingerprint,
            "X-Key-Chain": chain,
            "X-Created-At": iso(record.created_at),
        }
        return HTTPResponse(_raw_body(keypair), status=201, content_type="application/octet-stream", headers=headers)
    encode = bytes.hex if body.format == "hex" else (lambda b: base64.b64encode(b).decode())
    out = GeneratedKeyOut(
        id=record.id,
        algorithm=algorithm.value,
        chain=chain,
        public_key=encode(keypair.public_key),
        private_key=encode(keypair.private_key),
        seed=encode(keypair.seed),
        fingerprint=record.fingerprint,
        format=body.format,
        created_at=iso(record.created_at),
    )
    return ok(request, out, status=201)


@group.route(
    "POST",
    "/register/challenge",
    summary="Get a challenge to prove possession of a key",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    body=RegistrationChallengeRequest,
    response=RegistrationChallengeOut,
    errors=("PQC_001", "PQC_002"),
    tag="keys",
    description="Sign the challenge's UTF-8 bytes with the private key, using the returned context, "
    "then call POST /v1/keys/register.",
)
async def registration_challenge(request: QdayRequest, body: RegistrationChallengeRequest) -> HTTPResponse:
    """A signed, expiring challenge bound to the caller and the public key."""
    algorithm = pqc.parse_algorithm(body.algorithm)
    public_key = public_key_from_hex(algorithm, body.public_key, "publicKey")
    challenge, expires = request.app.ctx.pq_keys.registration_challenge(request.ctx.principal, algorithm, public_key)
    out = RegistrationChallengeOut(challenge=challenge, context=REGISTRATION_CONTEXT.hex(), expires_at=iso(expires))
    return ok(request, out)


@group.route(
    "POST",
    "/register",
    summary="Register a locally generated public key (proof of possession)",
    credential=Credential.SECRET,
    rate_group=RateGroup.KEYGEN,
    body=RegisterKeyRequest,
    response=PqKeyOut,
    status=201,
    errors=("PQC_001", "PQC_002", "PQC_004", "PQC_005", "GEN_001"),
    tag="keys",
)
async def register_key(request: QdayRequest, body: RegisterKeyRequest) -> HTTPResponse:
    """Register a public key after checking the signature over our challenge."""
    algorithm = pqc.parse_algorithm(body.algorithm)
    chain = keygen_chain(body.chain)
    public_key = pqc.decode_hex(body.public_key, field="publicKey")
    signature = pqc.decode_hex(body.signature, field="signature")
    ctx = request.app.ctx
    ctx.pq_keys.check_registration(request.ctx.principal, algorithm, public_key, body.challenge)
    await run_verification(
        ctx.executor,
        algorithm.value,
        pqc.verify,
        algorithm,
        public_key,
        body.challenge.encode(),
        signature,
        REGISTRATION_CONTEXT,
    )
    record = await ctx.pq_keys.register(request.ctx.principal, algorithm, chain, public_key)
    return ok(request, _pq_key_out(record), status=201)


@group.route(
    "GET",
    "",
    summary="List registered post-quantum public keys",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=list[PqKeyOut],
    errors=("REQ_001",),
    tag="keys",
    description=PAGED,
)
async def list_keys(request: QdayRequest) -> HTTPResponse:
    """A page of the caller's registered public keys in its environment, oldest first."""
    page = await request.app.ctx.pq_keys.list_keys(request.ctx.principal, requested_page(request))
    return ok_page(request, [_pq_key_out(k) for k in page.items], page.next_cursor)
