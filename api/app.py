"""The Sanic application factory: wiring, middleware and error mapping.

Request flow: request id → credential check (per the endpoint's declaration)
→ rate limit → body size → handler. Every response, errors included, gets the
envelope, ``X-Request-Id`` and the ``X-RateLimit-*`` headers.
"""

from __future__ import annotations

import itertools
import logging
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import httpx
import msgspec
from sanic import HTTPResponse, Sanic
from sanic.exceptions import SanicException

from api.clientip import client_ip
from api.context import AppContext, QdayApp, QdayRequest
from api.endpoints import Credential, Endpoint
from api.envelope import ErrorBody, error_response
from api.errors import ApiError, RateLimited, code_of, status_of
from api.openapi import build_openapi, render_docs
from api.ratelimit import Decision, MemoryRateLimiter, RateGroup, SharedRateLimiter, limit_for
from api.routes import accounts, attestations, keys, managed, scans, service
from chains.clients import build_clients
from chains.clients.prices import ChainlinkPrices, PriceOracle, StaticPrices
from chains.environment import Environment
from core.clock import Clock, SystemClock
from core.errors import DomainError
from core.ids import new_id
from services.accounts import AccountService, Principal
from services.attestations import AttestationService
from services.credentials import ApiKeyCodec, Secrets, SessionCodec, load_master_secret
from services.custody.factory import open_managed_custody
from services.custody.purge import PurgeLoop
from services.key_scans import KeyScanService
from services.observer import ChainObserver
from services.passwords import Passwords
from services.pq_keys import PqKeyService
from services.scans import ScanService
from services.settings import Settings
from storage.attestations_sqlite import SqliteAttestationStore
from storage.group_commit import GroupCommitWriter
from storage.managed_keys_sqlite import SqliteManagedKeyStore
from storage.models import Plan
from storage.scans_sqlite import SqliteScanStore
from storage.sqlite import SqliteStore
from storage.sqlite_db import open_database
from storage.window_counters_sqlite import SqliteWindowCounters

log = logging.getLogger("qday.api")
_app_numbers = itertools.count()
GROUPS = (service.group, service.docs_group, accounts.group, keys.group, attestations.group, scans.group, managed.group)
_SANIC_STATUS_CODES = {400: "REQ_001", 404: "REQ_005", 405: "REQ_006", 413: "REQ_004", 415: "REQ_003", 503: "SRV_002"}


def _package_version() -> str:
    try:
        return version("qday")
    except PackageNotFoundError:
        return "0.0.0+local"


def all_endpoints() -> list[Endpoint]:
    """Every endpoint the app serves, in declaration order."""
    return [e for group in GROUPS for e in group.endpoints]


def _bearer(request: QdayRequest) -> str | None:
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise ApiError("AUTH_001", "malformed Authorization header: expected 'Bearer <API key>'")
        return value.strip()
    return request.headers.get("x-api-key") or None


def _check_kind(principal: Principal, credential: Credential) -> None:
    if principal.kind == "session" and credential is not Credential.SESSION_OR_SECRET:
        raise ApiError("AUTH_003", "session tokens are accepted only on the API-key management endpoints")
    if principal.kind == "publishable" and credential is not Credential.ANY_KEY:
        raise ApiError("AUTH_003", "publishable keys may only call POST /v1/scan/wallet; use a secret key")


def _count(request: QdayRequest, group: RateGroup, principal: Principal | None) -> Decision:
    ctx = request.app.ctx
    settings = ctx.settings
    ip = request.ctx.client_ip
    plan = principal.account.plan if principal else Plan.FREE
    limit = limit_for(group, plan, settings.enterprise_limit_factor, settings.rate_limit_multiplier)
    buckets: tuple[str, ...] = (f"{group}|ip|{ip}",)
    if principal is not None:
        buckets += (f"{group}|cred|{ip}|{principal.rate_key}",)
    return ctx.limiter.hit(buckets, limit, ctx.clock.now().timestamp())


async def _on_request(request: QdayRequest) -> None:
    ctx = request.app.ctx
    request.ctx.request_id = new_id("req")
    request.ctx.client_ip = client_ip(request.ip, request.headers.get("x-forwarded-for"), ctx.settings.trusted_proxies)
    endpoint: Endpoint | None = getattr(request.route.ctx, "endpoint", None) if request.route else None
    principal: Principal | None = None
    auth_error: ApiError | DomainError | None = None
    if endpoint is not None and endpoint.credential is not Credential.NONE:
        try:
            principal = ctx.accounts.authenticate(_bearer(request))
            _check_kind(principal, endpoint.credential)
        except (ApiError, DomainError) as exc:
            auth_error = exc
    decision = _count(request, endpoint.rate_group if endpoint else RateGroup.PUBLIC, principal)
    request.ctx.rate = decision
    if not decision.allowed:
        raise RateLimited(decision.retry_after(ctx.clock.now().timestamp()))
    if auth_error is not None:
        raise auth_error
    if principal is not None:
        request.ctx.principal = principal
    length = request.headers.get("content-length")
    if (length is not None and length.isdigit() and int(length) > ctx.settings.max_body_bytes) or len(
        request.body or b""
    ) > ctx.settings.max_body_bytes:
        raise ApiError(
            "REQ_004", f"request body exceeds {ctx.settings.max_body_bytes} bytes", limit=ctx.settings.max_body_bytes
        )


async def _on_response(request: QdayRequest, response: HTTPResponse) -> None:
    if not request.ctx.request_id:  # answered before the request middleware ran
        request.ctx.request_id = new_id("req")
    response.headers["X-Request-Id"] = request.ctx.request_id
    decision = request.ctx.rate
    if decision is not None:
        response.headers["X-RateLimit-Limit"] = str(decision.limit)
        response.headers["X-RateLimit-Remaining"] = str(decision.remaining)
        response.headers["X-RateLimit-Reset"] = str(decision.reset)


def _error_body(exc: BaseException) -> tuple[int, ErrorBody]:
    if isinstance(exc, ApiError):
        return exc.status_code, ErrorBody(exc.code, str(exc), exc.details)
    if isinstance(exc, DomainError):
        code = code_of(exc)
        return status_of(code), ErrorBody(code, str(exc), exc.details)
    if isinstance(exc, SanicException) and exc.status_code in _SANIC_STATUS_CODES:
        code = _SANIC_STATUS_CODES[exc.status_code]
        return status_of(code), ErrorBody(code, str(exc) or "request rejected", {})
    return 500, ErrorBody("SRV_001", "internal server error; quote the request id when reporting it", {})


async def _on_error(request: QdayRequest, exc: BaseException) -> HTTPResponse:
    status, body = _error_body(exc)
    if not request.ctx.request_id:  # failed before the request middleware ran
        request.ctx.request_id = new_id("req")
    if status >= 500:
        log.error(
            "request %s failed: %s",
            request.ctx.request_id,
            type(exc).__name__,
            exc_info=exc if body.code == "SRV_001" else None,
        )
    response = error_response(request, status, body)
    if isinstance(exc, RateLimited):
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def _open_resources(app: QdayApp) -> None:
    ctx = app.ctx
    settings = ctx.settings
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    secrets = Secrets(load_master_secret(settings.secret_key, settings.secrets_dir))
    with ExitStack() as opened:  # a failed step closes what the earlier ones opened
        ctx.db = open_database(settings.operational_db, settings.sqlite_synchronous)
        # secure_delete: managed custody erases wrapped key material through this writer
        ctx.writer = GroupCommitWriter(settings.operational_db, settings.sqlite_synchronous, secure_delete=True)
        opened.callback(ctx.writer.close)
        ctx.store = SqliteStore(ctx.db, ctx.writer)  # closing it closes the connection
        opened.callback(ctx.store.close)
        # One worker counts exactly in memory; several share counters through SQLite.
        window = settings.rate_window_seconds
        ctx.limiter = (
            SharedRateLimiter(SqliteWindowCounters(settings.ratelimit_db), window)
            if settings.workers > 1
            else MemoryRateLimiter(window)
        )
        opened.callback(ctx.limiter.close)
        ctx.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="qday-cpu")
        ctx.accounts = AccountService(
            ctx.store,
            ApiKeyCodec(settings.key_token, secrets.key_hash_key),
            SessionCodec(settings.key_token, secrets.session_key),
            ctx.clock,
            settings.session_ttl_seconds,
            settings.rotation_grace_seconds,
        )
        attestation_store = SqliteAttestationStore(ctx.db, ctx.writer)
        ctx.pq_keys = PqKeyService(attestation_store, ctx.clock, secrets.challenge_key, settings.challenge_ttl_seconds)
        ctx.attestations = AttestationService(
            attestation_store, ctx.clock, settings.public_domain, settings.challenge_ttl_seconds
        )
        # Managed custody: without a usable backend the API still starts (CUS_004 on use).
        ctx.managed = open_managed_custody(settings, SqliteManagedKeyStore(ctx.db, ctx.writer), ctx.clock, ctx.executor)
        opened.callback(ctx.managed.close)
        ctx.purge_loop = PurgeLoop(ctx.managed, settings.purge_interval_seconds)
        opened.callback(ctx.purge_loop.close)
        # Closed first: work in flight (hashing, signing) ends before what it uses closes.
        opened.callback(ctx.executor.shutdown, wait=True)
        ctx.closing = opened.pop_all()
    ctx.purge_loop.start()


async def _open_chain_access(app: QdayApp) -> None:
    ctx = app.ctx
    settings = ctx.settings
    ctx.http = httpx.AsyncClient(limits=httpx.Limits(max_connections=100, max_keepalive_connections=20))
    ctx.aclosing.push_async_callback(ctx.http.aclose)  # closed after the clients that use it
    ctx.chain_clients = {}
    prices: dict[Environment, PriceOracle] = {}
    static = StaticPrices.from_file()
    for env in Environment:
        ctx.chain_clients[env] = build_clients(settings.chains, env, ctx.http)
        for client in ctx.chain_clients[env].values():
            ctx.aclosing.push_async_callback(client.aclose)
        prices[env] = PriceOracle([ChainlinkPrices.from_endpoints(settings.chains[env], ctx.http), static])
    store = SqliteScanStore(ctx.db, ctx.writer)
    observer = ChainObserver(ctx.chain_clients, settings.family_chains, settings.family_wait_seconds)
    ctx.scans = ScanService(
        store, observer, prices, ctx.clock, settings.scan_cache_ttl_seconds, settings.pipeline_result_ttl_seconds
    )
    ctx.key_scans = KeyScanService(store, observer, prices, ctx.clock, settings.scan_cache_ttl_seconds)


async def _close_chain_access(app: QdayApp) -> None:
    await app.ctx.aclosing.aclose()


def _close_resources(app: QdayApp) -> None:
    app.ctx.closing.close()


def create_app(settings: Settings, clock: Clock | None = None, passwords: Passwords | None = None) -> QdayApp:
    """A configured app; storage is opened when the server (or ASGI lifespan) starts.

    ``clock`` and ``passwords`` are injectable for tests (expiry without sleeping,
    cheaper hashing).
    """
    version = _package_version()
    document = build_openapi(all_endpoints(), version)
    context = AppContext(
        settings,
        clock or SystemClock(),
        passwords or Passwords(),
        version,
        msgspec.json.encode(document),
        render_docs(document),
    )
    app: QdayApp = Sanic(
        f"qday_{next(_app_numbers)}",
        ctx=context,
        request_class=QdayRequest,  # type: ignore[arg-type]  # Sanic types it as the default Request class
        configure_logging=True,
    )
    app.config.REQUEST_MAX_SIZE = settings.max_body_bytes
    app.config.FALLBACK_ERROR_FORMAT = "json"
    app.config.ACCESS_LOG = settings.access_log
    app.config.KEEP_ALIVE_TIMEOUT = 30
    for group in GROUPS:
        app.blueprint(group.blueprint)
    app.on_request(_on_request)
    app.on_response(_on_response)
    app.error_handler.add(Exception, _on_error)

    @app.before_server_start
    async def _start(app: QdayApp, *_: Any) -> None:
        _open_resources(app)
        await _open_chain_access(app)

    @app.after_server_stop
    async def _stop(app: QdayApp, *_: Any) -> None:
        await _close_chain_access(app)
        _close_resources(app)

    return app
