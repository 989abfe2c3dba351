"""Routes for registration, login and API-key management."""

from __future__ import annotations

from datetime import datetime

from sanic import HTTPResponse

from api.context import AppContext, QdayRequest
from api.endpoints import Credential, EndpointGroup
from api.envelope import PAGED, no_content, ok, ok_page, requested_page
from api.models.accounts import (
    AccountOut,
    ApiKeyCreatedOut,
    ApiKeyOut,
    CreateApiKeyRequest,
    LoginOut,
    LoginRequest,
    RegisterRequest,
    RotatedKeyOut,
    SessionUser,
)
from api.ratelimit import RateGroup
from api.validation import text_field
from chains.environment import Environment
from core.clock import iso
from services.errors import InvalidLogin
from services.offload import run_blocking
from storage.models import Account, ApiKey, KeyType

group = EndpointGroup("accounts", "/auth")
_KEY_ERRORS = ("AUTH_001", "AUTH_002", "AUTH_003", "RATE_001")


def _account_out(a: Account) -> AccountOut:
    return AccountOut(id=a.id, email=a.email, name=a.name, plan=a.plan.value, created_at=iso(a.created_at))


def _key_out(k: ApiKey) -> ApiKeyOut:
    return ApiKeyOut(
        id=k.id,
        name=k.name,
        type=k.type.value,
        environment=k.environment.value,
        prefix=k.prefix,
        last_used_at=iso(k.last_used_at) if k.last_used_at else None,
        created_at=iso(k.created_at),
        expires_at=iso(k.expires_at) if k.expires_at else None,
    )


@group.route(
    "POST",
    "/register",
    summary="Create an account (plan free)",
    credential=Credential.NONE,
    rate_group=RateGroup.AUTH,
    body=RegisterRequest,
    response=AccountOut,
    status=201,
    errors=("REQ_001", "REQ_002", "REQ_003", "ACC_001", "ACC_003", "RATE_001"),
    tag="accounts",
)
async def register(request: QdayRequest, body: RegisterRequest) -> HTTPResponse:
    """Create an account; the password is stored only as an argon2id hash."""
    account = await register_account(request.app.ctx, body.email, body.name, body.password)
    return ok(request, _account_out(account), status=201)


async def register_account(ctx: AppContext, email: str, name: str | None, password: str) -> Account:
    """Create an account (the password policy checked, hashed with argon2id off the event
    loop): what the API and the dashboard's form both do."""
    ctx.passwords.check_policy(password)
    password_hash = await run_blocking(ctx.executor, ctx.passwords.hash, password)
    return await ctx.accounts.register(email, name, password_hash)


async def log_in(ctx: AppContext, email: str, password: str) -> tuple[Account, str, datetime]:
    """The account and a new session token with its expiry; ACC_002 for a wrong password
    or an unknown email alike (both verify a hash, so both take the same time)."""
    account, stored_hash = await ctx.accounts.stored_password_hash(email)
    valid = await run_blocking(ctx.executor, ctx.passwords.verify, stored_hash, password)
    if not valid or account is None:
        raise InvalidLogin("invalid email or password")
    token, expires = ctx.accounts.issue_session(account)
    return account, token, expires


@group.route(
    "POST",
    "/login",
    summary="Log in and get a session token",
    credential=Credential.NONE,
    rate_group=RateGroup.AUTH,
    body=LoginRequest,
    response=LoginOut,
    errors=("REQ_001", "REQ_002", "REQ_003", "ACC_002", "RATE_001"),
    tag="accounts",
    description="Wrong password and unknown email give the same error and take the same time.",
)
async def login(request: QdayRequest, body: LoginRequest) -> HTTPResponse:
    """A session token for the key-management endpoints."""
    account, token, expires = await log_in(request.app.ctx, body.email, body.password)
    user = SessionUser(id=account.id, email=account.email, plan=account.plan.value)
    return ok(request, LoginOut(token=token, expires_at=iso(expires), user=user))


@group.route(
    "POST",
    "/logout",
    summary="End a session",
    credential=Credential.SESSION_OR_SECRET,
    rate_group=RateGroup.AUTH,
    status=204,
    errors=("AUTH_001", "AUTH_003", "RATE_001"),
    tag="accounts",
    description=(
        "Takes the session token to end (an API key is AUTH_003: keys are deleted instead). From this response on, "
        "every API node refuses the token (AUTH_001 with reason 'logged out'), before its own expiry."
    ),
)
async def logout(request: QdayRequest) -> HTTPResponse:
    """Revoke the caller's session token."""
    await request.app.ctx.accounts.logout(request.ctx.principal)
    return no_content()


@group.route(
    "POST",
    "/api-keys",
    summary="Create an API key",
    credential=Credential.SESSION_OR_SECRET,
    rate_group=RateGroup.AUTH,
    body=CreateApiKeyRequest,
    response=ApiKeyCreatedOut,
    status=201,
    errors=("REQ_001", "REQ_002", "REQ_003", "LIM_001", *_KEY_ERRORS),
    tag="api-keys",
    description=(
        "The full key is returned only in this response. A secret key may create keys of its own environment only. "
        "An account holds at most 20 current keys (not deleted and not rotated out; both environments): one more "
        "is LIM_001 with details {cap: api_keys, limit, plan}. Rotating a key does not add one."
    ),
)
async def create_api_key(request: QdayRequest, body: CreateApiKeyRequest) -> HTTPResponse:
    """Create a publishable or secret key for the test or live environment."""
    key, secret = await request.app.ctx.accounts.create_key(
        request.ctx.principal, text_field(body.name, "name"), KeyType(body.type), Environment(body.environment)
    )
    out = ApiKeyCreatedOut(
        id=key.id,
        name=key.name,
        type=key.type.value,
        environment=key.environment.value,
        key=secret,
        prefix=key.prefix,
        created_at=iso(key.created_at),
    )
    return ok(request, out, status=201)


@group.route(
    "GET",
    "/api-keys",
    summary="List API keys",
    credential=Credential.SESSION_OR_SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=list[ApiKeyOut],
    errors=("REQ_001", *_KEY_ERRORS),
    tag="api-keys",
    description=PAGED,
)
async def list_api_keys(request: QdayRequest) -> HTTPResponse:
    """A page of the caller's keys, oldest first, with prefixes instead of full keys."""
    page = await request.app.ctx.accounts.list_keys(request.ctx.principal, requested_page(request))
    return ok_page(request, [_key_out(k) for k in page.items], page.next_cursor)


@group.route(
    "DELETE",
    "/api-keys/{key_id}",
    summary="Delete an API key (immediate, irreversible)",
    credential=Credential.SESSION_OR_SECRET,
    rate_group=RateGroup.ACCOUNT,
    status=204,
    errors=("REQ_005", *_KEY_ERRORS),
    tag="api-keys",
)
async def delete_api_key(request: QdayRequest, key_id: str) -> HTTPResponse:
    """Delete a key; requests with it get AUTH_002 from now on."""
    await request.app.ctx.accounts.delete_key(request.ctx.principal, key_id)
    return no_content()


@group.route(
    "POST",
    "/api-keys/{key_id}/rotate",
    summary="Rotate an API key (old key valid 24 h more)",
    credential=Credential.SESSION_OR_SECRET,
    rate_group=RateGroup.AUTH,
    response=RotatedKeyOut,
    status=201,
    errors=("REQ_005", "KEY_001", *_KEY_ERRORS),
    tag="api-keys",
)
async def rotate_api_key(request: QdayRequest, key_id: str) -> HTTPResponse:
    """Issue a replacement key; the old key stays active for exactly 24 hours."""
    new, secret, old_expires = await request.app.ctx.accounts.rotate_key(request.ctx.principal, key_id)
    out = RotatedKeyOut(
        id=new.id,
        name=new.name,
        type=new.type.value,
        environment=new.environment.value,
        key=secret,
        prefix=new.prefix,
        created_at=iso(new.created_at),
        rotated_from=key_id,
        previous_key_expires_at=iso(old_expires),
    )
    return ok(request, out, status=201)
