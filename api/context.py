"""The typed contexts of the app and of a request.

``AppContext`` is what one app holds: what it is built with (settings, clock,
password hasher, the OpenAPI document) and what it opens when the server starts (the
operational database, the services over it, the chain clients). ``RequestContext`` is
what the middleware learns of one request. ``QdayRequest`` types both for handlers:
``request.app.ctx.accounts`` and ``request.ctx.principal`` are checked.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from types import SimpleNamespace
from typing import TYPE_CHECKING

import httpx
from sanic import Request, Sanic
from sanic.config import Config

from api.ratelimit import Decision, MemoryRateLimiter, SharedRateLimiter
from chains.clients.base import ChainClient
from chains.environment import Environment
from chains.registry import Chain
from core.clock import Clock
from services.accounts import AccountService, Principal
from services.address_detail import AddressDetailService
from services.allowances import AllowanceService
from services.attestations import AttestationService
from services.custody.lifecycle import ManagedCustodyService
from services.custody.purge import PurgeLoop
from services.descriptor_scans import DescriptorScanService
from services.descriptor_watch import DescriptorWatchService
from services.evm_account_scans import EvmAccountScanService
from services.exposure_follow import ExposureFollower
from services.key_scans import KeyScanService
from services.migration_plans import MigrationPlanService
from services.passwords import Passwords
from services.portfolio import PortfolioService
from services.pq_keys import PqKeyService
from services.scans import ScanService
from services.settings import Settings
from services.webhook_delivery import WebhookDeliverer
from services.webhooks import WebhookService
from storage.database import Database
from storage.sql_accounts import SqlStore


class AppContext:
    """Everything one app holds, typed (``Sanic[Config, AppContext]``).

    Built with the settings, clock, password hasher and OpenAPI document; the store,
    the services and the chain clients are assigned when the server starts (reading one
    before then is an ``AttributeError``). Each is registered, as it is opened, on
    ``closing`` or ``aclosing``, which close them in reverse order when the server stops.
    Plain attributes, not properties: the request path reads several per request.
    """

    # opened at start (``api.app._open_resources``), closed through ``closing``
    database: Database
    store: SqlStore
    limiter: MemoryRateLimiter | SharedRateLimiter
    #: Counts health and readiness probes in this node's memory, so a load balancer still
    #: hears from a node whose shared store is down.
    probe_limiter: MemoryRateLimiter
    executor: ThreadPoolExecutor
    accounts: AccountService
    pq_keys: PqKeyService
    attestations: AttestationService
    managed: ManagedCustodyService
    purge_loop: PurgeLoop
    webhooks: WebhookService
    deliverer: WebhookDeliverer
    # opened on the server's loop (``api.app._open_chain_access``), closed through ``aclosing``
    http: httpx.AsyncClient
    chain_clients: dict[Environment, dict[Chain, ChainClient]]
    scans: ScanService
    key_scans: KeyScanService
    descriptor_scans: DescriptorScanService
    evm_account_scans: EvmAccountScanService
    migration_plans: MigrationPlanService
    descriptor_watch: DescriptorWatchService
    follower: ExposureFollower
    portfolio: PortfolioService
    address_detail: AddressDetailService
    allowances: AllowanceService
    #: Keys the dashboard's CSRF tokens to the session they are issued for.
    csrf_key: bytes

    def __init__(
        self, settings: Settings, clock: Clock, passwords: Passwords, version: str, openapi_json: bytes, docs_html: str
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.passwords = passwords
        self.version = version
        self.openapi_json = openapi_json
        self.docs_html = docs_html
        self.closing = AsyncExitStack()
        self.aclosing = AsyncExitStack()


class RequestContext(SimpleNamespace):
    """What the middleware learns of one request. Class-level defaults, so making one
    per request costs what a bare ``SimpleNamespace`` does."""

    request_id: str = ""  # set first by the request middleware (or by the error handler)
    client_ip: str = ""
    rate: Decision | None = None
    #: The authenticated caller: set before the handler of every endpoint that takes a
    #: credential (absent on public endpoints).
    principal: Principal


QdayApp = Sanic[Config, AppContext]

if TYPE_CHECKING:
    _RequestBase = Request[QdayApp, RequestContext]
else:
    _RequestBase = Request


class QdayRequest(_RequestBase):
    """A request of the qday app: ``request.app.ctx`` is an ``AppContext`` and
    ``request.ctx`` a ``RequestContext``."""

    @staticmethod
    def make_context() -> RequestContext:
        """A fresh, typed request context."""
        return RequestContext()
