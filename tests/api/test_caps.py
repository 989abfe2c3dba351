"""Plan caps over the API (issue 15): watched addresses by plan, 20 current API keys per
account; beyond them 403 LIM_001 {cap, limit, plan}; idempotent adds and rotations never
count; concurrent requests cannot overshoot."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import pytest

from chains.environment import Environment
from core.ids import new_id
from services.caps import API_KEY_CAP, DEFAULT_ENTERPRISE_WATCH_CAP, watch_cap
from services.settings import SettingsError, load_settings
from storage.models import ApiKey, KeyType, Plan, WatchedAddress
from storage.sql_scans import SqlScanStore
from tests.api.test_envelope import assert_error
from tests.pipelines.support import evm_address
from tests.support import make_tenant

WATCH, KEYS = "/v1/watchlist", "/v1/auth/api-keys"


async def _prefill_watchlist(app, account_id: str, count: int, start: int, environment=Environment.LIVE) -> None:
    """``count`` watched addresses stored directly (no cap), in group commits."""
    store = SqlScanStore(app.ctx.database)
    now = app.ctx.clock.now()
    entries = [
        WatchedAddress(new_id("wat"), account_id, environment, "ethereum", evm_address(start + n), None, now)
        for n in range(count)
    ]
    await asyncio.gather(*(store.watch(e) for e in entries))


async def _watch_count(app, account_id: str) -> int:
    (count,) = await app.ctx.database.fetch_one("SELECT COUNT(*) FROM watchlist WHERE account_id = ?", (account_id,))
    return count


async def _post_watch(client, tenant, n: int, key: str = "secret_live"):
    return await client.post(WATCH, json={"address": evm_address(n)}, headers=tenant.auth(key))


@pytest.mark.parametrize(
    ("plan", "cap"),
    [(Plan.FREE, 100), (Plan.BUILDER, 10_000), (Plan.PRO, 1_000_000), (Plan.ENTERPRISE, DEFAULT_ENTERPRISE_WATCH_CAP)],
)
def test_watch_caps_by_plan(plan, cap):
    assert watch_cap(plan) == cap
    assert watch_cap(Plan.ENTERPRISE, 42) == 42


def test_enterprise_watch_cap_is_a_setting():
    assert load_settings({}).enterprise_watch_cap == DEFAULT_ENTERPRISE_WATCH_CAP
    assert load_settings({"QDAY_ENTERPRISE_WATCH_CAP": "2500000"}).enterprise_watch_cap == 2_500_000
    with pytest.raises(SettingsError):
        load_settings({"QDAY_ENTERPRISE_WATCH_CAP": "0"})


async def test_free_plan_stops_at_100_watched_addresses(app, client):
    tenant = await make_tenant(client, ("secret_live", "secret_test"))
    await _prefill_watchlist(app, tenant.account_id, 99, 1000)
    existing = evm_address(1000)
    assert (await _post_watch(client, tenant, 2000)).status_code == 201  # the 100th
    error = assert_error(await _post_watch(client, tenant, 2001), 403, "LIM_001")
    assert error["details"] == {"cap": "watchlist", "limit": 100, "plan": "free"}
    assert "100" in error["message"]
    # Watching an address already watched answers its entry: it never counts.
    again = await client.post(WATCH, json={"address": existing}, headers=tenant.auth("secret_live"))
    assert again.status_code == 201 and again.json()["data"]["address"] == existing
    # The cap is the account's, both environments together.
    assert_error(await _post_watch(client, tenant, 2002, "secret_test"), 403, "LIM_001")
    assert await _watch_count(app, tenant.account_id) == 100
    # Removing one makes room for one.
    entry_id = again.json()["data"]["id"]
    assert (await client.delete(f"{WATCH}/{entry_id}", headers=tenant.auth("secret_live"))).status_code == 204
    assert (await _post_watch(client, tenant, 2003, "secret_test")).status_code == 201
    assert_error(await _post_watch(client, tenant, 2004), 403, "LIM_001")
    assert await _watch_count(app, tenant.account_id) == 100


async def test_concurrent_adds_cannot_overshoot_the_cap(app, client):
    tenant = await make_tenant(client)
    await _prefill_watchlist(app, tenant.account_id, 90, 3000)
    answers = await asyncio.gather(*(_post_watch(client, tenant, 4000 + n) for n in range(30)))
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [201] * 10 + [403] * 20
    assert await _watch_count(app, tenant.account_id) == 100


async def test_a_plan_change_moves_the_cap(app, client):
    tenant = await make_tenant(client)
    await _prefill_watchlist(app, tenant.account_id, 100, 5000)
    assert_error(await _post_watch(client, tenant, 6000), 403, "LIM_001")
    await app.ctx.store.set_plan(tenant.email, Plan.BUILDER)
    assert (await _post_watch(client, tenant, 6000)).status_code == 201
    await app.ctx.store.set_plan(tenant.email, Plan.ENTERPRISE)
    original = app.ctx.settings
    app.ctx.settings = dataclasses.replace(original, enterprise_watch_cap=101)  # QDAY_ENTERPRISE_WATCH_CAP
    try:
        error = assert_error(await _post_watch(client, tenant, 6001), 403, "LIM_001")
        assert error["details"] == {"cap": "watchlist", "limit": 101, "plan": "enterprise"}
    finally:
        app.ctx.settings = original
    assert (await _post_watch(client, tenant, 6001)).status_code == 201


async def _store_keys(app, account_id: str, count: int) -> list[str]:
    now = app.ctx.clock.now()
    ids = []
    for n in range(count):
        key = ApiKey(new_id("key"), account_id, f"pre{n}", KeyType.SECRET, Environment.TEST, os.urandom(32), "p", now)
        await app.ctx.store.create_api_key(key)
        ids.append(key.id)
    return ids


async def _create_key(client, tenant, environment: str = "test"):
    return await client.post(
        KEYS, json={"name": "more", "type": "secret", "environment": environment}, headers=tenant.auth("session")
    )


async def test_twenty_current_api_keys_per_account(app, client):
    tenant = await make_tenant(client)  # one live key
    stored = await _store_keys(app, tenant.account_id, API_KEY_CAP - 2)
    assert (await _create_key(client, tenant, "live")).status_code == 201  # the 20th
    error = assert_error(await _create_key(client, tenant), 403, "LIM_001")
    assert error["details"] == {"cap": "api_keys", "limit": 20, "plan": "free"}
    # Rotating does not add one (the replacement takes the old key's place) ...
    rotated = await client.post(f"{KEYS}/{stored[0]}/rotate", headers=tenant.auth("session"))
    assert rotated.status_code == 201, rotated.text
    assert_error(await _create_key(client, tenant), 403, "LIM_001")
    # ... and a deleted key no longer counts.
    assert (await client.delete(f"{KEYS}/{stored[1]}", headers=tenant.auth("session"))).status_code == 204
    assert (await _create_key(client, tenant)).status_code == 201
    assert_error(await _create_key(client, tenant), 403, "LIM_001")


async def test_concurrent_key_creations_cannot_overshoot(app, client):
    tenant = await make_tenant(client)
    await _store_keys(app, tenant.account_id, API_KEY_CAP - 3)  # 18 current keys
    answers = await asyncio.gather(*(_create_key(client, tenant) for _ in range(5)))
    assert sorted(r.status_code for r in answers) == [201, 201, 403, 403, 403]
    (count,) = await app.ctx.database.fetch_one(
        "SELECT COUNT(*) FROM api_keys WHERE account_id = ? AND deleted_at IS NULL", (tenant.account_id,)
    )
    assert count == API_KEY_CAP
