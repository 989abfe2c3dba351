"""The Sanic application factory: wiring, middleware and error mapping.

Request flow: request id → credential check (per the endpoint's declaration)
→ rate limit → body size → handler. Every response, errors included, gets the
envelope, ``X-Request-Id`` and the ``X-RateLimit-*`` headers.
"""

from __future__ import annotations

import itertools
import logging
import math
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import httpx
import msgspec
from sanic import HTTPResponse, Sanic
from sanic.exceptions import SanicException

from api.clientip import client_ip
from api.context import AppContext, QdayApp, QdayRequest
from api.dashboard import dashboard
from api.endpoints import Credential, Endpoint
from api.envelope import ErrorBody, error_response
from api.errors import ApiError, RateLimited, code_of, status_of
from api.openapi import build_openapi, render_docs
from api.ratelimit import (
    Decision,
    MemoryRateLimiter,
    RateGroup,
    SharedRateLimiter,
    auth_failure_buckets,
    auth_failure_limit,
    buckets_for,
    limit_for,
)
from api.routes import accounts, attestations, keys, managed, scans, service, webhooks
from chains.clients import build_clients
from chains.clients.prices import ChainlinkPrices, PriceOracle, StaticPrices
from chains.environment import Environment
from core.clock import Clock, SystemClock
from core.errors import DomainError
from core.ids import new_id
from services.accounts import AccountService, Principal
from services.address_detail import AddressDetailService
from services.allowances import AllowanceService
from services.attestations import AttestationService
from services.credentials import ApiKeyCodec, Secrets, SessionCodec, load_master_secret
from services.custody.factory import open_managed_custody
from services.custody.purge import PurgeLoop
from services.descriptor_scans import DescriptorScanService
from services.descriptor_watch import DescriptorWatchService
from services.errors import Unauthenticated
from services.evm_account_scans import EvmAccountScanService
from services.exposure_follow import ExposureFollower
from services.exposure_index import ExposureIndex
from services.key_scans import KeyScanService
from services.migration_plans import MigrationPlanService
from services.observer import ChainObserver
from services.operational import open_operational
from services.outbound import new_client
from services.passwords import Passwords
from services.portfolio import PortfolioService
from services.pq_keys import PqKeyService
from services.pricing import ScanPrices
from services.scans import ScanService
from services.settings import Settings
from services.webhook_delivery import WebhookDeliverer
from services.webhook_signing import WebhookSigner
from services.webhooks import WebhookService
from storage.bitcoin_index import BitcoinIndexStore
from storage.models import Plan
from storage.risk_history import RiskHistory
from storage.sql_accounts import SqlStore
from storage.sql_alert_state import SqlAlertStateStore
from storage.sql_attestations import SqlAttestationStore
from storage.sql_managed_keys import SqlManagedKeyStore
from storage.sql_portfolio import SqlPortfolio
from storage.sql_scans import SqlScanStore
from storage.sql_webhooks import SqlWebhookStore
from storage.sql_window_counters import SqlWindowCounters
from storage.sqlite_engine import SqliteDatabase

log = logging.getLogger("qday.api")
_app_numbers = itertools.count()
GROUPS = (
    service.group,
    service.docs_group,
    accounts.group,
    keys.group,
    attestations.group,
    scans.group,
    managed.group,
    webhooks.group,
)
_SANIC_STATUS_CODES = {
    400: "REQ_001",
    404: "REQ_005",
    405: "REQ_006",
    408: "REQ_008",
    413: "REQ_004",
    415: "REQ_003",
    503: "SRV_002",
}


def _package_version() -> str:
    try:
        return version("qday")
    except PackageNotFoundError:
        return "0.0.0+local"


def all_endpoints() -> list[Endpoint]:
    """Every endpoint the app serves, in declaration order."""
    return [e for group in GROUPS for e in group.endpoints]


#: What each kind of endpoint takes, told with every refused credential.
_EXPECTED = {
    Credential.SESSION_OR_SECRET: "API-key management (/v1/auth/api-keys...) and logout take a session token from "
    "POST /v1/auth/login or a secret API key, sent as 'Authorization: Bearer <token or key>'",
    Credential.SECRET: "this endpoint takes a secret API key, sent as 'Authorization: Bearer <key>' "
    "or 'X-API-Key: <key>'",
    Credential.ANY_KEY: "this endpoint takes a publishable or secret API key, sent as 'Authorization: Bearer <key>' "
    "or 'X-API-Key: <key>'",
}


def _credential(request: QdayRequest, credential: Credential) -> str | None:
    """The one credential the request carries, or None. Repeated credential headers, or an
    Authorization and an X-API-Key header that disagree, are REQ_007: never a guess at which counts."""
    authorization = request.headers.getall("authorization", [])
    api_keys = request.headers.getall("x-api-key", [])
    if len(authorization) > 1 or len(api_keys) > 1:
        repeated = "Authorization" if len(authorization) > 1 else "X-API-Key"
        raise ApiError("REQ_007", f"repeated {repeated} header: send one credential, once", header=repeated)
    api_key = api_keys[0].strip() if api_keys else ""
    if not authorization:
        return api_key or None
    scheme, _, value = authorization[0].partition(" ")
    value = value.strip()
    if api_key and (scheme.lower() != "bearer" or value != api_key):
        raise ApiError(
            "REQ_007",
            "conflicting credentials: the Authorization and X-API-Key headers differ; send one credential",
            header="X-API-Key",
        )
    if scheme.lower() != "bearer" or not value:
        raise ApiError(
            "AUTH_001",
            f"malformed Authorization header; {_EXPECTED[credential]}",
            reason="malformed header",
            expected=credential.value,
        )
    return value


def _check_kind(principal: Principal, credential: Credential) -> None:
    if principal.kind == "session" and credential is not Credential.SESSION_OR_SECRET:
        raise ApiError(
            "AUTH_003", f"session tokens are accepted only on the API-key management endpoints; {_EXPECTED[credential]}"
        )
    if principal.kind == "publishable" and credential is not Credential.ANY_KEY:
        raise ApiError(
            "AUTH_003",
            "publishable keys may only call POST /v1/scan/wallet, /v1/scan/key and /v1/scan/detect; "
            + _EXPECTED[credential],
        )


async def _count(request: QdayRequest, group: RateGroup, principal: Principal | None, auth_failed: bool) -> Decision:
    """Count the request against its buckets (``api.ratelimit.buckets_for``); a failed
    authentication counts only against its IP's auth-failure bucket."""
    ctx = request.app.ctx
    settings = ctx.settings
    ip = request.ctx.client_ip
    now = ctx.clock.now().timestamp()
    if auth_failed:
        return await ctx.limiter.hit(auth_failure_buckets(ip), auth_failure_limit(settings.rate_limit_multiplier), now)
    plan = principal.account.plan if principal else Plan.FREE
    limit = limit_for(group, plan, settings.enterprise_limit_factor, settings.rate_limit_multiplier)
    limiter = ctx.probe_limiter if group is RateGroup.PROBE else ctx.limiter
    return await limiter.hit(buckets_for(group, ip, principal.rate_key if principal else None), limit, now)


def _page_rate_group(request: QdayRequest) -> RateGroup:
    """The rate group of a route outside the API (a dashboard page names its own, e.g. its
    login form counts as ``auth``); PUBLIC otherwise."""
    group = getattr(request.route.ctx, "rate_group", None) if request.route else None
    return group if isinstance(group, RateGroup) else RateGroup.PUBLIC


async def _on_request(request: QdayRequest) -> None:
    ctx = request.app.ctx
    request.ctx.request_id = new_id("req")
    request.ctx.client_ip = client_ip(request.ip, request.headers.get("x-forwarded-for"), ctx.settings.trusted_proxies)
    endpoint: Endpoint | None = getattr(request.route.ctx, "endpoint", None) if request.route else None
    principal: Principal | None = None
    auth_error: ApiError | DomainError | None = None
    if endpoint is not None and endpoint.credential is not Credential.NONE:
        try:
            principal = await ctx.accounts.authenticate(_credential(request, endpoint.credential))
            _check_kind(principal, endpoint.credential)
        except Unauthenticated as exc:  # say what this endpoint takes and how to send it
            expected = endpoint.credential
            auth_error = Unauthenticated(
                f"{exc.message}; {_EXPECTED[expected]}", **exc.details, expected=expected.value
            )
        except (ApiError, DomainError) as exc:
            auth_error = exc
    group = endpoint.rate_group if endpoint else _page_rate_group(request)
    decision = await _count(request, group, principal, auth_failed=principal is None and auth_error is not None)
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
    if isinstance(exc, SanicException) and body.code in ("REQ_005", "REQ_006"):  # routing: name the path
        path = request.path[:200]
        what = "no such endpoint" if body.code == "REQ_005" else "method not allowed on"
        body = ErrorBody(body.code, f"{what}: {request.method} {path} (see /docs)", {"path": path})
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
    elif body.code == "SCAN_004":
        response.headers["Retry-After"] = str(chain_retry_after(body.details))
    return response


def chain_retry_after(details: dict[str, Any]) -> int:
    """Whole seconds a SCAN_004 caller should wait: the endpoint's circuit-breaker
    cool-down when it is open (``retry_after`` in the details), at least 1."""
    wait = details.get("retry_after")
    return max(1, math.ceil(wait)) if isinstance(wait, int | float) else 1


async def _open_limiter(ctx: AppContext, opened: AsyncExitStack) -> MemoryRateLimiter | SharedRateLimiter:
    """One worker on SQLite counts exactly in memory; several workers share counters in a
    SQLite file of their own, and nodes on PostgreSQL in its unlogged table."""
    settings = ctx.settings
    window = settings.rate_window_seconds
    if settings.database_url:
        return SharedRateLimiter(await SqlWindowCounters.open(ctx.database), window)
    if settings.workers > 1:
        counters_db = SqliteDatabase(settings.ratelimit_db, "OFF", migrate=False)
        opened.callback(counters_db.close)
        return SharedRateLimiter(await SqlWindowCounters.open(counters_db), window)
    return MemoryRateLimiter(window)


async def _open_resources(app: QdayApp) -> None:
    ctx = app.ctx
    settings = ctx.settings
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    secrets = Secrets(load_master_secret(settings.secret_key, settings.secrets_dir))
    async with AsyncExitStack() as opened:  # a failed step closes what the earlier ones opened
        # SQLite: writes through the group-commit thread; PostgreSQL: a pool shared by the loop
        ctx.database = await open_operational(settings, group_commit=True)
        opened.push_async_callback(ctx.database.aclose)
        ctx.store = SqlStore(ctx.database)
        ctx.portfolio = PortfolioService(SqlPortfolio(ctx.database))
        ctx.csrf_key = secrets.csrf_key
        ctx.limiter = await _open_limiter(ctx, opened)
        ctx.probe_limiter = MemoryRateLimiter(settings.rate_window_seconds)
        ctx.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="qday-cpu")
        history = RiskHistory(settings.analytics_dir)
        opened.callback(history.close)
        scan_store = SqlScanStore(ctx.database)
        ctx.address_detail = AddressDetailService(scan_store, history, ctx.executor, ctx.clock)
        ctx.accounts = AccountService(
            ctx.store,
            ApiKeyCodec(settings.key_token, secrets.key_hash_key),
            SessionCodec(settings.key_token, secrets.session_key),
            ctx.clock,
            settings.session_ttl_seconds,
            settings.rotation_grace_seconds,
        )
        attestation_store = SqlAttestationStore(ctx.database)
        ctx.pq_keys = PqKeyService(attestation_store, ctx.clock, secrets.challenge_key, settings.challenge_ttl_seconds)
        ctx.attestations = AttestationService(
            attestation_store, ctx.clock, settings.public_domain, settings.challenge_ttl_seconds
        )
        # Managed custody: without a usable backend the API still starts (CUS_004 on use).
        ctx.managed = open_managed_custody(settings, SqlManagedKeyStore(ctx.database), ctx.clock, ctx.executor)
        opened.callback(ctx.managed.close)
        ctx.purge_loop = PurgeLoop(ctx.managed, settings.purge_interval_seconds)
        opened.callback(ctx.purge_loop.close)
        # Closed first: work in flight (hashing, signing) ends before what it uses closes.
        opened.callback(ctx.executor.shutdown, wait=True)
        # The delivery loop stops before the executor and custody it signs with.
        webhook_store = await _open_webhooks(ctx, secrets, opened)
        ctx.allowances = AllowanceService(
            ctx.store, scan_store, webhook_store, ctx.clock, settings.enterprise_watch_cap
        )
        ctx.closing = opened.pop_all()
    ctx.purge_loop.start()
    ctx.deliverer.start()


async def _open_webhooks(ctx: AppContext, secrets: Secrets, opened: AsyncExitStack) -> SqlWebhookStore:
    """The webhook service and this node's delivery loop (started with the server; stopped
    before the store closes); the webhook store they share, returned for the services that
    count endpoints. Outbound requests get a client of their own: no redirects, no proxies
    from the environment (``services.outbound``)."""
    settings = ctx.settings
    http = new_client()
    opened.push_async_callback(http.aclose)
    store = SqlWebhookStore(ctx.database)
    signer = WebhookSigner(store, ctx.managed.custody, ctx.executor, ctx.clock)
    ctx.deliverer = WebhookDeliverer(
        store,
        signer,
        secrets.webhook_seal_key,
        ctx.clock,
        http,
        allow_private=settings.webhook_allow_private,
        retry_base=settings.webhook_retry_base_seconds,
        timeout=settings.webhook_timeout_seconds,
    )
    opened.push_async_callback(ctx.deliverer.aclose)
    ctx.webhooks = WebhookService(
        store, signer, ctx.deliverer, secrets.webhook_seal_key, ctx.clock, allow_private=settings.webhook_allow_private
    )
    return store


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
    store = SqlScanStore(ctx.database)
    index = ExposureIndex(BitcoinIndexStore(settings.analytics_dir))
    observer = ChainObserver(ctx.chain_clients, settings.family_chains, settings.family_wait_seconds, index)
    scan_prices = ScanPrices(prices, settings.chains)
    ctx.scans = ScanService(
        store, observer, scan_prices, ctx.clock, settings.scan_cache_ttl_seconds, settings.pipeline_result_ttl_seconds
    )
    ctx.key_scans = KeyScanService(store, observer, scan_prices, ctx.clock, settings.scan_cache_ttl_seconds)
    ctx.descriptor_scans = DescriptorScanService(store, observer, scan_prices, ctx.clock)
    ctx.evm_account_scans = EvmAccountScanService(store, observer, scan_prices, ctx.clock)
    ctx.migration_plans = MigrationPlanService(ctx.descriptor_scans, observer)
    ctx.descriptor_watch = DescriptorWatchService(
        ctx.descriptor_scans, store.descriptor_watch(), ctx.clock, settings.enterprise_watch_cap
    )
    ctx.follower = ExposureFollower(
        SqlAlertStateStore(ctx.database),
        store,
        ctx.chain_clients,
        settings.family_chains,
        ctx.clock,
        ctx.deliverer.wake,
        settings.alert_poll_seconds,
        ctx.scans.rescore,
    )
    ctx.aclosing.push_async_callback(ctx.follower.aclose)  # stops before the clients it uses close
    ctx.follower.start()


async def _close_chain_access(app: QdayApp) -> None:
    await app.ctx.aclosing.aclose()


async def _close_resources(app: QdayApp) -> None:
    await app.ctx.closing.aclose()


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
    app.config.REQUEST_TIMEOUT = settings.request_timeout_seconds  # from the first byte (api.protocol)
    for group in GROUPS:
        app.blueprint(group.blueprint)
    app.blueprint(dashboard)
    app.on_request(_on_request)
    app.on_response(_on_response)
    app.error_handler.add(Exception, _on_error)

    @app.before_server_start
    async def _start(app: QdayApp, *_: Any) -> None:
        await _open_resources(app)
        await _open_chain_access(app)

    @app.after_server_stop
    async def _stop(app: QdayApp, *_: Any) -> None:
        await _close_chain_access(app)
        await _close_resources(app)

    return app
