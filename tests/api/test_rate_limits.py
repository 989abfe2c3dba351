"""Rate limits per credential (whatever the IP) and per IP, with headers on every response."""

from __future__ import annotations

import math

from storage.models import Plan
from tests.api.test_envelope import assert_error
from tests.support import client_for, make_tenant

KEYS = "/v1/auth/api-keys"


def _align_to_window_start(clock) -> None:
    seconds = clock.now().timestamp()
    clock.advance(math.ceil(seconds / 60) * 60 - seconds + 1)


async def test_auth_endpoints_allow_10_per_minute_per_ip(app, clock):
    _align_to_window_start(clock)
    async with client_for(app) as client:
        statuses = []
        for _ in range(12):
            r = await client.post("/v1/auth/login", json={"email": "nobody@example.com", "password": "x" * 12})
            statuses.append(r.status_code)
        assert statuses == [401] * 10 + [429] * 2
        assert r.headers["x-ratelimit-limit"] == "10"
        assert r.headers["x-ratelimit-remaining"] == "0"
        reset = int(r.headers["x-ratelimit-reset"])
        assert reset == math.ceil(clock.now().timestamp() / 60) * 60
        error = assert_error(r, 429, "RATE_001")
        assert int(r.headers["retry-after"]) == reset - int(clock.now().timestamp())
        assert error["message"]
        clock.advance(int(r.headers["retry-after"]))
        r = await client.post("/v1/auth/login", json={"email": "nobody@example.com", "password": "x" * 12})
        assert r.status_code == 401
        assert r.headers["x-ratelimit-remaining"] == "9"


async def test_remaining_counts_down(app, clock):
    _align_to_window_start(clock)
    async with client_for(app) as client:
        tenant = await make_tenant(client)
        seen = []
        for _ in range(3):
            r = await client.get(KEYS, headers=tenant.auth("secret_live"))
            seen.append(int(r.headers["x-ratelimit-remaining"]))
        assert r.headers["x-ratelimit-limit"] == "60"
        assert seen == [seen[0], seen[0] - 1, seen[0] - 2]


async def test_plan_limits_apply_and_change_at_once(app, clock):
    _align_to_window_start(clock)
    async with client_for(app) as client:
        tenant = await make_tenant(client)
        r = await client.get(KEYS, headers=tenant.auth("secret_live"))
        assert r.headers["x-ratelimit-limit"] == "60"
        await app.ctx.store.set_plan(tenant.email, Plan.PRO)
        r = await client.get(KEYS, headers=tenant.auth("secret_live"))
        assert r.headers["x-ratelimit-limit"] == "1200"
        await app.ctx.store.set_plan(tenant.email, Plan.ENTERPRISE)
        r = await client.get(KEYS, headers=tenant.auth("secret_live"))
        assert r.headers["x-ratelimit-limit"] == "12000"


async def test_ip_limit_is_shared_by_keys_behind_one_ip(app, clock):
    _align_to_window_start(clock)
    async with client_for(app) as setup:
        alice = await make_tenant(setup)
        bob = await make_tenant(setup)
    _align_to_window_start(clock)
    async with client_for(app) as shared:
        for _ in range(40):
            assert (await shared.get(KEYS, headers=alice.auth("secret_live"))).status_code == 200
        for _ in range(20):
            assert (await shared.get(KEYS, headers=bob.auth("secret_live"))).status_code == 200
        assert_error(await shared.get(KEYS, headers=bob.auth("secret_live")), 429, "RATE_001")
    async with client_for(app) as elsewhere:
        assert (await elsewhere.get(KEYS, headers=bob.auth("secret_live"))).status_code == 200


async def test_a_keys_limit_binds_from_every_ip(app, clock):
    _align_to_window_start(clock)
    async with client_for(app) as setup:
        tenant = await make_tenant(setup, ("secret_live", "secret_test"))
    async with client_for(app) as one, client_for(app) as two:
        for _ in range(30):
            assert (await one.get(KEYS, headers=tenant.auth("secret_live"))).status_code == 200
            assert (await two.get(KEYS, headers=tenant.auth("secret_live"))).status_code == 200
        for client in (one, two):
            r = assert_error(await client.get(KEYS, headers=tenant.auth("secret_live")), 429, "RATE_001")
            assert r["message"]
        # each address has used only 30 of its 60: another key behind it still gets through
        r = await two.get(KEYS, headers=tenant.auth("secret_test"))
        assert r.status_code == 200 and r.headers["x-ratelimit-remaining"] == "29"


async def test_a_refused_request_uses_up_no_allowance(app, clock):
    _align_to_window_start(clock)
    async with client_for(app) as setup:
        free = await make_tenant(setup)
        pro = await make_tenant(setup)
    await app.ctx.store.set_plan(pro.email, Plan.PRO)
    async with client_for(app) as shared:
        for _ in range(60):
            assert (await shared.get(KEYS, headers=free.auth("secret_live"))).status_code == 200
        for _ in range(20):  # refused: counted against neither the free key nor the shared IP
            assert_error(await shared.get(KEYS, headers=free.auth("secret_live")), 429, "RATE_001")
        r = await shared.get(KEYS, headers=pro.auth("secret_live"))
        assert r.status_code == 200 and r.headers["x-ratelimit-remaining"] == str(1200 - 61)


async def test_error_responses_carry_rate_headers(client):
    for r in (await client.get("/v1/nope"), await client.get(KEYS)):
        assert r.headers["x-ratelimit-limit"].isdigit()


def test_forwarded_for_is_honoured_only_from_trusted_proxies():
    from api.clientip import client_ip

    assert client_ip("10.0.0.1", "1.2.3.4", ()) == "10.0.0.1"
    assert client_ip("10.0.0.1", "1.2.3.4", ("10.0.0.1",)) == "1.2.3.4"
    assert client_ip("10.0.0.1", "6.6.6.6, 1.2.3.4, 10.0.0.2", ("10.0.0.1", "10.0.0.2")) == "1.2.3.4"
    assert client_ip("10.0.0.1", None, ("10.0.0.1",)) == "10.0.0.1"
