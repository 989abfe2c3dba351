"""The typed contexts of the app and of a request.

``AppContext`` is what one app holds: what it is built with (settings, clock,
password hasher, the OpenAPI document) and, once the server has started, what it
opened (``Opened``: the store, its writer and the services over them; ``Online``:
the chain clients and the scan service). Handlers reach the services through its
properties, which say clearly when the server has not started. ``RequestContext``
is what the middleware learns of one request. ``QdayRequest`` types both for
handlers: ``request.app.ctx.accounts`` and ``request.ctx.principal`` are checked.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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
from services.attestations import AttestationService
from services.custody.lifecycle import ManagedCustodyService
from services.custody.purge import PurgeLoop
from services.passwords import Passwords
from services.pq_keys import PqKeyService
from services.scans import ScanService
from services.settings import Settings
from storage.group_commit import GroupCommitWriter
from storage.sqlite import SqliteStore
from storage.sqlite_db import Connection


@dataclass(frozen=True, slots=True)
class Opened:
    """What the server opens before it serves: the operational store and the services on it."""

    db: Connection
    writer: GroupCommitWriter
    store: SqliteStore
    limiter: MemoryRateLimiter | SharedRateLimiter
    executor: ThreadPoolExecutor
    accounts: AccountService
    pq_keys: PqKeyService
    attestations: AttestationService
    managed: ManagedCustodyService
    purge_loop: PurgeLoop

    def close(self) -> None:
        """Stop the background work, then release the store (the reverse of opening)."""
        self.executor.shutdown(wait=True)
        for part in (self.purge_loop, self.managed, self.writer, self.store, self.limiter):
            part.close()


@dataclass(frozen=True, slots=True)
class Online:
    """The chain side, opened on the server's event loop: one HTTP pool, the chain
    clients of each environment and the scan service over them."""

    http: httpx.AsyncClient
    chain_clients: dict[Environment, dict[Chain, ChainClient]]
    scans: ScanService

    async def aclose(self) -> None:
        """Close every chain client, then the HTTP pool."""
        for clients in self.chain_clients.values():
            for client in clients.values():
                await client.aclose()
        await self.http.aclose()


class NotStarted(RuntimeError):
    """A service was asked for before the server opened it (or after it closed)."""


class AppContext:
    """Everything one app holds, typed (``Sanic[Config, AppContext]``)."""

    def __init__(
        self, settings: Settings, clock: Clock, passwords: Passwords, version: str, openapi_json: bytes, docs_html: str
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.passwords = passwords
        self.version = version
        self.openapi_json = openapi_json
        self.docs_html = docs_html
        self.opened: Opened | None = None
        self.online: Online | None = None

    def _opened(self) -> Opened:
        if self.opened is None:
            raise NotStarted("the server has not opened its store yet")
        return self.opened

    def _online(self) -> Online:
        if self.online is None:
            raise NotStarted("the server has not opened its chain clients yet")
        return self.online

    @property
    def db(self) -> Connection:
        """The request path's connection to the operational store."""
        return self._opened().db

    @property
    def writer(self) -> GroupCommitWriter:
        """The group-commit writer every API write goes through."""
        return self._opened().writer

    @property
    def store(self) -> SqliteStore:
        """Accounts and API keys."""
        return self._opened().store

    @property
    def limiter(self) -> MemoryRateLimiter | SharedRateLimiter:
        """The rate limiter (in memory for one worker, shared for several)."""
        return self._opened().limiter

    @property
    def executor(self) -> ThreadPoolExecutor:
        """Threads for CPU-heavy work (hashing, key generation, signing)."""
        return self._opened().executor

    @property
    def accounts(self) -> AccountService:
        """Accounts, API keys, sessions and authentication."""
        return self._opened().accounts

    @property
    def pq_keys(self) -> PqKeyService:
        """Registered post-quantum keys."""
        return self._opened().pq_keys

    @property
    def attestations(self) -> AttestationService:
        """Hybrid attestations and strict-mode statements."""
        return self._opened().attestations

    @property
    def managed(self) -> ManagedCustodyService:
        """Managed custody."""
        return self._opened().managed

    @property
    def scans(self) -> ScanService:
        """Scans and the watch list."""
        return self._online().scans

    @property
    def chain_clients(self) -> dict[Environment, dict[Chain, ChainClient]]:
        """The chain clients of each environment."""
        return self._online().chain_clients


class RequestContext(SimpleNamespace):
    """What the middleware learns of one request."""

    def __init__(self) -> None:
        super().__init__()
        self.request_id = ""
        self.client_ip = ""
        self.rate: Decision | None = None
        self._principal: Principal | None = None

    @property
    def principal(self) -> Principal:
        """The authenticated caller; set before any handler of an endpoint that needs a credential."""
        if self._principal is None:
            raise NotStarted("no authenticated caller on this request")
        return self._principal

    @principal.setter
    def principal(self, value: Principal | None) -> None:
        self._principal = value


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
