"""Helpers shared by the API tests: a controllable clock, an in-process app
started once per session, a real server subprocess, and account set-up."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from argon2 import PasswordHasher
from sanic import Sanic

from api.app import create_app
from services.passwords import Passwords
from services.settings import Settings
from tests.processes import free_port, stop_group

REPO_ROOT = Path(__file__).resolve().parent.parent
#: argon2id with minimal cost, so tests that register many accounts stay fast
#: (tests/api/test_passwords.py covers the production parameters).
CHEAP_PASSWORDS = Passwords(PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))
_client_numbers = itertools.count(1)
#: Client addresses 127.x.y.z with z never 0, each used once per process.
_client_addresses = (f"127.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}" for n in itertools.count(1) if n & 255)


class ManualClock:
    """A clock that only moves when told to (expiry tests without sleeping)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
        self._now = self._start

    def now(self) -> datetime:
        """The current (manual) time."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self._now += timedelta(seconds=seconds)

    def reset(self) -> None:
        """Back to the start time: a test that moved a clock shared with other tests puts
        it back when it ends, so that no test sees the time another one left."""
        self._now = self._start


def create_test_app(settings: Settings, clock: ManualClock) -> Sanic:
    """An app for in-process tests. Sanic's start-up "touch-up" rewrites class
    methods once per process and breaks a second app in the same process, so it
    is off (it only trims dispatch overhead; the real-server tests run with it)."""
    app = create_app(settings, clock=clock, passwords=CHEAP_PASSWORDS)
    app.config.TOUCHUP = False
    return app


def engine_env(database_url: str) -> dict[str, str]:
    """The settings that put an app's operational store on PostgreSQL at ``database_url``
    (the ``app_database_url`` fixture; ``""``: none, SQLite in the app's data directory)."""
    return {"QDAY_DATABASE_URL": database_url, "QDAY_SECRET_KEY": "a1" * 32} if database_url else {}


async def stored_bytes(app: Sanic) -> bytes:
    """Everything an app's operational store holds: its SQLite files (free pages and WAL
    included), or every binary and text value of every table of its PostgreSQL database, so a
    test can show a secret was never stored on either engine."""
    db = app.ctx.database
    if db.dialect == "sqlite":
        return b"".join(p.read_bytes() for p in app.ctx.settings.data_dir.glob("qday.sqlite*"))
    columns = await db.fetch_all(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND data_type IN ('bytea', 'text')"
    )
    assert columns
    values = [v for table, column in columns for (v,) in await db.fetch_all(f'SELECT "{column}" FROM "{table}"')]
    return b"".join(v.encode() if isinstance(v, str) else bytes(v) for v in values if v is not None)


@asynccontextmanager
async def running_app(settings: Settings, clock: ManualClock) -> AsyncIterator[Sanic]:
    """A test app started through its ASGI lifespan, stopped when the block ends."""
    app = create_test_app(settings, clock)
    lifespan = Lifespan(app)
    await lifespan.start()
    try:
        yield app
    finally:
        await lifespan.stop()


class Lifespan:
    """Runs an ASGI app's lifespan start-up and shutdown (httpx does not)."""

    def __init__(self, app: Sanic) -> None:
        self._app = app
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def _call(self, message: str) -> None:
        await self._inbox.put({"type": f"lifespan.{message}"})
        reply = await asyncio.wait_for(self._outbox.get(), timeout=30)
        if reply["type"] != f"lifespan.{message}.complete":
            raise RuntimeError(f"lifespan {message} failed: {reply}")

    async def start(self) -> None:
        """Send lifespan.startup and wait until the app has opened its resources."""
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}}
        self._task = asyncio.create_task(self._app(scope, self._inbox.get, self._outbox.put))
        await self._call("startup")

    async def stop(self) -> None:
        """Send lifespan.shutdown and wait for it."""
        await self._call("shutdown")
        if self._task is not None:
            await asyncio.wait_for(self._task, timeout=30)


def client_for(app: Sanic, ip: str | None = None) -> httpx.AsyncClient:
    """An HTTP client speaking ASGI to the app, from its own loopback address
    (so rate-limit buckets of different tests do not collide)."""
    address = ip or next(_client_addresses)
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://qday.test")


@dataclass
class Tenant:
    """An account with a session token and one key of each type and environment."""

    email: str
    password: str
    account_id: str
    session: str
    keys: dict[str, dict[str, Any]]  # "secret_live" -> creation response data

    def key(self, name: str) -> str:
        """The full key string of e.g. ``secret_live``."""
        return self.keys[name]["key"]

    def auth(self, name: str) -> dict[str, str]:
        """An Authorization header for one of the keys (or ``session``)."""
        token = self.session if name == "session" else self.key(name)
        return {"Authorization": f"Bearer {token}"}


async def make_tenant(client: httpx.AsyncClient, key_names: tuple[str, ...] = ("secret_live",)) -> Tenant:
    """Register, log in and create the named keys (``secret_live``, ``publishable_test``...)."""
    n = next(_client_numbers)
    email = f"user{n}-{time.monotonic_ns()}@example.com"
    password = "correct horse battery staple"
    r = await client.post("/v1/auth/register", json={"email": email, "password": password, "name": f"User {n}"})
    assert r.status_code == 201, r.text
    account_id = r.json()["data"]["id"]
    r = await client.post("/v1/auth/login", json={"email": email, "password": password})
    assert r.status_code == 200, r.text
    session = r.json()["data"]["token"]
    keys = {}
    for name in key_names:
        key_type, environment = name.split("_")
        r = await client.post(
            "/v1/auth/api-keys",
            json={"name": name, "type": key_type, "environment": environment},
            headers={"Authorization": f"Bearer {session}"},
        )
        assert r.status_code == 201, r.text
        keys[name] = r.json()["data"]
    return Tenant(email, password, account_id, session, keys)


class ServerProcess:
    """``qday serve`` in a subprocess on 127.0.0.1, for tests over real HTTP."""

    def __init__(self, data_dir: Path, workers: int = 1, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = data_dir / "server.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        # no family lookups or chain-head following unless a test asks: the chains' public
        # endpoints are never called
        full_env = {
            **os.environ,
            "QDAY_SECRET_KEY": "",
            "QDAY_FAMILY_CHAINS": "none",
            "QDAY_ALERT_POLL_SECONDS": "0",
            **(env or {}),
        }
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.main",
                "serve",
                "--data-dir",
                str(data_dir),
                "--port",
                str(self.port),
                "--workers",
                str(workers),
            ],
            cwd=REPO_ROOT,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 120.0) -> None:
        # generous, as for the bench servers: start-up takes ~3 s alone, 35 s was seen on the
        # loaded 2-core machine, and how fast it starts is not what these tests check
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_path.read_text()}")
            try:
                if httpx.get(f"{self.base_url}/v1/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server not ready after {timeout}s:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        """Stop the server and all its worker processes."""
        stop_group(self.process)
        self._log.close()
