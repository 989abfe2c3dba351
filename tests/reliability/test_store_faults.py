"""The operational store full or read-only under a running app: clear errors, nothing
acknowledged lost, no corruption, and recovery without a restart.

How the faults are made, honestly and the same way as root or not:

- **full**: ``PRAGMA max_page_count`` set to the file's current size on the app's
  connections (the request path's and the group-commit writer's). SQLite then fails
  writes with its real ``SQLITE_FULL`` "database or disk is full", the error a full disk
  gives. Raising the limit again is "space returns".
- **read-only**: ``PRAGMA query_only`` on the same connections: SQLite refuses writes
  with ``SQLITE_READONLY``, as on a volume remounted read-only. ``chmod`` would prove
  nothing here: root ignores it, and an open file descriptor keeps its write access.

Writes go through both write paths: API keys and the watch list commit on the request
connection, attestations through the group-commit writer.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from eth_account import Account
from sanic import Sanic

import pqc
from services.settings import load_settings
from storage.database import Tx
from storage.models import Plan
from storage.sqlite_engine import SqliteDatabase
from tests.signing import eip191_signature, public_key
from tests.support import ManualClock, Tenant, client_for, make_tenant, running_app

MAX_PAGES = 1073741823  # SQLite's default max_page_count
WRITES_PER_KIND = 120  # upper bound of each kind of write while waiting for the store to fill


@dataclass
class Writer:
    """Sends writes of three kinds and remembers which were acknowledged."""

    client: httpx.AsyncClient
    tenant: Tenant
    generated: dict
    ecdsa_key: bytes = field(default_factory=lambda: os.urandom(32))
    acked: dict[str, list[str]] = field(default_factory=lambda: {"attestations": [], "api_keys": [], "watchlist": []})
    refused: list[httpx.Response] = field(default_factory=list)
    sent: int = 0
    recycle_keys: bool = False

    async def attestation(self) -> httpx.Response:
        """A hybrid attestation (group-commit writer)."""
        self.sent += 1
        message = f"store fault {self.sent} ".encode() + os.urandom(400)
        body = {
            "message": message.hex(),
            "ecdsaSignature": eip191_signature(self.ecdsa_key, message).hex(),
            "ecdsaPublicKey": public_key(self.ecdsa_key).hex(),
            "algorithm": "ml-dsa-44",
            "pqcSignature": pqc.sign("ml-dsa-44", bytes.fromhex(self.generated["seed"]), message).hex(),
            "pqcPublicKey": self.generated["publicKey"],
        }
        return self._note(
            "attestations",
            await self.client.post("/v1/sign/hybrid", json=body, headers=self.tenant.auth("secret_live")),
        )

    async def api_key(self) -> httpx.Response:
        """A new API key (request connection); with ``recycle_keys`` deleted again at once
        (its row stays), so that the account stays below its 20-key cap (LIM_001)."""
        self.sent += 1
        response = self._note(
            "api_keys",
            await self.client.post(
                "/v1/auth/api-keys",
                json={"name": f"k{self.sent}", "type": "secret", "environment": "live"},
                headers=self.tenant.auth("session"),
            ),
        )
        if self.recycle_keys and response.status_code == 201:
            # (a deletion the full store refuses leaves one more current key: harmless)
            await self.client.delete(
                f"/v1/auth/api-keys/{response.json()['data']['id']}", headers=self.tenant.auth("session")
            )
        return response

    async def watch(self) -> httpx.Response:
        """A watch-list entry with a long label (request connection)."""
        self.sent += 1
        body = {"address": Account.create().address, "chain": "ethereum", "label": "w" * 200}
        return self._note(
            "watchlist", await self.client.post("/v1/watchlist", json=body, headers=self.tenant.auth("secret_live"))
        )

    def _note(self, kind: str, response: httpx.Response) -> httpx.Response:
        if response.status_code == 201:
            self.acked[kind].append(response.json()["data"]["id"])
        else:
            self.refused.append(response)
        return response

    def kinds(self) -> list[Callable[[], Awaitable[httpx.Response]]]:
        """The three write methods."""
        return [self.attestation, self.api_key, self.watch]


@pytest.fixture
async def store_app(tmp_path) -> AsyncIterator[tuple[Sanic, ManualClock, Writer, Path]]:
    """A running app on its own data directory, and a writer with a tenant and an ML-DSA key."""
    settings = load_settings(
        {}, data_dir=tmp_path, custody_backend="disabled", rate_limit_multiplier=1000, alert_poll_seconds=0
    )
    clock = ManualClock()
    async with running_app(settings, clock) as app, client_for(app) as client:
        tenant = await make_tenant(client, ("secret_live",))
        await app.ctx.store.set_plan(tenant.email, Plan.PRO)  # the watch-list cap of the free plan is 100
        r = await client.post(
            "/v1/keys/generate",
            json={"algorithm": "ml-dsa-44", "chain": "ethereum"},
            headers=tenant.auth("secret_live"),
        )
        assert r.status_code == 201, r.text
        yield app, clock, Writer(client, tenant, r.json()["data"]), settings.operational_db


def _pragma(app: Sanic, statement: str) -> None:
    """Run a PRAGMA on the app's read connection and on the group-commit writer's (idle
    between these sequential requests; with query_only on it could not even begin a
    transaction of its own to run it)."""
    db = app.ctx.database
    assert isinstance(db, SqliteDatabase)
    db._conn.execute(statement)
    db._writer._conn.execute(statement)  # the GroupCommitWriter's connection


async def _nothing(tx: Tx) -> None:
    """A write that changes nothing."""


def _assert_store_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["error"]["code"] == "SRV_002" and "operational store unavailable" in body["error"]["message"], body
    assert body["meta"]["requestId"]


def _check_store(path: Path, writer: Writer, baseline: dict[str, int]) -> None:
    """integrity_check passes, and each table holds exactly what was acknowledged."""
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for table, ids in writer.acked.items():
            stored = {row[0] for row in db.execute(f"SELECT id FROM {table}")}
            assert set(ids) <= stored, f"{table}: acknowledged rows lost"
            assert len(stored) == baseline[table] + len(ids), f"{table}: rows nobody was told about"
    finally:
        db.close()


def _counts(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    try:
        return {
            t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("attestations", "api_keys", "watchlist")
        }
    finally:
        db.close()


async def _reads_still_answer(writer: Writer, clock: ManualClock) -> None:
    """Reads work during the fault, also when the key's last-used time is due an update."""
    clock.advance(120)
    r = await writer.client.get("/v1/watchlist", headers=writer.tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    r = await writer.client.post(
        "/v1/verify", json={"attestationId": writer.acked["attestations"][0]}, headers=writer.tenant.auth("secret_live")
    )
    assert r.status_code == 200 and r.json()["data"]["valid"] is True, r.text


async def _recovers(writer: Writer, path: Path, baseline: dict[str, int]) -> None:
    for write in writer.kinds():
        response = await write()
        assert response.status_code == 201, response.text
    _check_store(path, writer, baseline)


async def test_full_store_refuses_writes_with_503_keeps_what_it_acknowledged_and_recovers(store_app):
    app, clock, writer, path = store_app
    writer.recycle_keys = True  # up to WRITES_PER_KIND keys, 20 current at most
    for write in writer.kinds():
        assert (await write()).status_code == 201
    baseline = {k: v - len(writer.acked[k]) for k, v in _counts(path).items()}
    (pages,) = await app.ctx.database.fetch_one("PRAGMA page_count")
    _pragma(app, f"PRAGMA max_page_count = {pages}")

    refused_kinds: set[str] = set()
    for _ in range(WRITES_PER_KIND):
        for write in writer.kinds():
            if write.__name__ in refused_kinds:
                continue
            response = await write()
            if response.status_code != 201:
                _assert_store_unavailable(response)
                refused_kinds.add(write.__name__)
        if len(refused_kinds) == 3:
            break
    assert refused_kinds == {"attestation", "api_key", "watch"}, f"never full for {refused_kinds}"
    await _reads_still_answer(writer, clock)
    _check_store(path, writer, baseline)

    _pragma(app, f"PRAGMA max_page_count = {MAX_PAGES}")  # space returns
    await _recovers(writer, path, baseline)


async def test_read_only_store_refuses_writes_with_503_and_recovers(store_app):
    app, clock, writer, path = store_app
    for write in writer.kinds():
        assert (await write()).status_code == 201
    baseline = {k: v - len(writer.acked[k]) for k, v in _counts(path).items()}
    _pragma(app, "PRAGMA query_only = ON")
    for write in writer.kinds():
        _assert_store_unavailable(await write())
    await _reads_still_answer(writer, clock)
    _check_store(path, writer, baseline)

    _pragma(app, "PRAGMA query_only = OFF")  # the volume is writable again
    await _recovers(writer, path, baseline)


async def test_a_write_lock_held_elsewhere_does_not_stall_authenticated_reads(store_app):
    """A pipeline publishing or an analyst's open transaction holds SQLite's write lock:
    a read whose key is due a last-used update must not wait for it on the event loop
    (the busy timeout is 5 s, during which every other request would wait too)."""
    app, clock, writer, path = store_app
    key_id = writer.tenant.keys["secret_live"]["id"]
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        clock.advance(120)  # the key is due a last-used update
        started = time.monotonic()  # the app runs on this thread's loop: a wait in it would be inside here
        r = await writer.client.get("/v1/watchlist", headers=writer.tenant.auth("secret_live"))
        waited = time.monotonic() - started
        assert r.status_code == 200, r.text
        assert waited < 2.5, f"the request waited {waited:.1f} s behind the write lock"
        (last_used,) = holder.execute("SELECT last_used_at FROM api_keys WHERE id = ?", (key_id,)).fetchone()
    finally:
        holder.rollback()
        holder.close()
    await app.ctx.database.write(_nothing)  # queued before this write: committed with it or earlier
    db = sqlite3.connect(path)
    try:
        (recorded,) = db.execute("SELECT last_used_at FROM api_keys WHERE id = ?", (key_id,)).fetchone()
    finally:
        db.close()
    assert recorded is not None and recorded != last_used, "the queued last-used update was lost"


@pytest.mark.parametrize("kind", ["watch", "api_key"])
async def test_a_write_waits_for_a_lock_held_elsewhere_without_stalling_others(store_app, kind):
    """The write a caller asked for waits for the lock (and is durable when answered),
    but on the writer thread: other requests are answered meanwhile."""
    _, _, writer, path = store_app
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        pending = asyncio.create_task(getattr(writer, kind)())
        await asyncio.sleep(0.05)  # the write starts and meets the lock
        r = await writer.client.get("/v1/watchlist", headers=writer.tenant.auth("secret_live"))
        assert r.status_code == 200, r.text
        assert not pending.done(), "the write did not wait for the lock, or held the event loop until it gave up"
    finally:
        holder.rollback()
        holder.close()
    response = await pending
    assert response.status_code == 201, response.text
    path_, auth = ("/v1/watchlist", "secret_live") if kind == "watch" else ("/v1/auth/api-keys", "session")
    listed = (await writer.client.get(path_, headers=writer.tenant.auth(auth))).json()["data"]
    assert response.json()["data"]["id"] in {w["id"] for w in listed}
