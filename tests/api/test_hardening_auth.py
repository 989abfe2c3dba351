"""Issue 15, credentials and their limits: a key's plan limit binds whatever IP it comes
from, failed authentications have a bucket of their own, a rotated key in its grace period
cannot manage keys, repeated or conflicting credential headers are REQ_007, and AUTH_001 on
key management says what to send there."""

from __future__ import annotations

import asyncio

from api.ratelimit import AUTH_FAILURE_LIMIT
from tests.api.test_envelope import assert_error
from tests.support import client_for, make_tenant

KEYS = "/v1/auth/api-keys"
GENERATE = "/v1/keys/generate"
KEYGEN_BODY = {"algorithm": "ml-dsa-44", "chain": "ethereum", "privateKeyForm": "seed"}
GARBAGE = {"Authorization": "Bearer svc_sec_live_sk_" + "G" * 43}  # well formed, unknown


# --- 1. plan limits per credential, whatever the IP ------------------------------------


async def test_a_free_keys_keygen_limit_binds_across_20_addresses(app):
    async with client_for(app) as setup:
        tenant = await make_tenant(setup)
    clients = [client_for(app) for _ in range(20)]
    try:
        responses = await asyncio.gather(
            *(c.post(GENERATE, json=KEYGEN_BODY, headers=tenant.auth("secret_live")) for c in clients for _ in range(2))
        )
    finally:
        for c in clients:
            await c.aclose()
    statuses = [r.status_code for r in responses]
    assert statuses.count(201) == 5, statuses  # the free plan's 5 a minute, not 5 per address
    assert statuses.count(429) == 35
    for r in responses:
        if r.status_code == 429:
            assert_error(r, 429, "RATE_001")
            assert int(r.headers["retry-after"]) >= 1
            assert r.headers["x-ratelimit-limit"] == "5" and r.headers["x-ratelimit-remaining"] == "0"


async def test_a_session_tokens_limit_binds_across_addresses(app):
    async with client_for(app) as setup:
        tenant = await make_tenant(setup, ())
    statuses = []
    for _ in range(12):  # the auth group: 10 a minute
        async with client_for(app) as fresh:
            r = await fresh.post(
                KEYS, json={"name": "k", "type": "secret", "environment": "test"}, headers=tenant.auth("session")
            )
            statuses.append(r.status_code)
    assert statuses == [201] * 10 + [429] * 2


# --- 1. failed authentications count apart ----------------------------------------------


async def test_failed_authentications_do_not_lock_a_valid_key_out_of_its_ip(app):
    async with client_for(app) as setup:
        tenant = await make_tenant(setup)
    async with client_for(app) as shared:
        for _ in range(5):  # the free keygen limit, spent by a garbage key before this fix
            assert_error(await shared.post(GENERATE, json=KEYGEN_BODY, headers=GARBAGE), 401, "AUTH_001")
        r = await shared.post(GENERATE, json=KEYGEN_BODY, headers=tenant.auth("secret_live"))
        assert r.status_code == 201, r.text
        assert r.headers["x-ratelimit-remaining"] == "4"


async def test_failed_authentications_have_a_limit_of_their_own(app, clock):
    async with client_for(app) as setup:
        tenant = await make_tenant(setup)
    async with client_for(app) as shared:
        for n in range(AUTH_FAILURE_LIMIT):
            r = await shared.get(KEYS, headers=GARBAGE if n % 2 else {})
            assert_error(r, 401, "AUTH_001")
        assert r.headers["x-ratelimit-limit"] == str(AUTH_FAILURE_LIMIT)
        assert r.headers["x-ratelimit-remaining"] == "0"
        refused = await shared.post(GENERATE, json=KEYGEN_BODY, headers=GARBAGE)
        assert_error(refused, 429, "RATE_001")
        assert int(refused.headers["retry-after"]) >= 1
        # valid credentials behind the same IP keep their whole allowance
        r = await shared.get(KEYS, headers=tenant.auth("secret_live"))
        assert r.status_code == 200 and r.headers["x-ratelimit-remaining"] == "59"
        r = await shared.post(GENERATE, json=KEYGEN_BODY, headers=tenant.auth("secret_live"))
        assert r.status_code == 201 and r.headers["x-ratelimit-remaining"] == "4"
        clock.advance(int(refused.headers["retry-after"]))
        assert_error(await shared.get(KEYS, headers=GARBAGE), 401, "AUTH_001")


async def test_a_deleted_key_counts_as_a_failed_authentication(app):
    async with client_for(app) as setup:
        tenant = await make_tenant(setup, ("secret_live", "secret_test"))
        doomed = tenant.keys["secret_test"]
        assert (await setup.delete(f"{KEYS}/{doomed['id']}", headers=tenant.auth("session"))).status_code == 204
    async with client_for(app) as shared:
        for _ in range(5):
            r = await shared.post(GENERATE, json=KEYGEN_BODY, headers={"X-API-Key": doomed["key"]})
            assert_error(r, 401, "AUTH_002")
        assert (await shared.post(GENERATE, json=KEYGEN_BODY, headers=tenant.auth("secret_live"))).status_code == 201


# --- 7. a rotated key in its grace period cannot manage keys ----------------------------


async def test_a_rotated_key_in_its_grace_period_cannot_manage_keys(client, clock, tenant):
    old = tenant.keys["secret_live"]
    r = await client.post(f"{KEYS}/{old['id']}/rotate", headers=tenant.auth("session"))
    assert r.status_code == 201, r.text
    new = r.json()["data"]
    old_headers = {"Authorization": f"Bearer {old['key']}"}
    refusals = [
        await client.delete(f"{KEYS}/{new['id']}", headers=old_headers),
        await client.post(f"{KEYS}/{new['id']}/rotate", headers=old_headers),
        await client.post(KEYS, json={"name": "x", "type": "secret", "environment": "live"}, headers=old_headers),
        await client.delete(f"{KEYS}/key_unknown", headers=old_headers),
    ]
    for refused in refusals:
        error = assert_error(refused, 403, "AUTH_003")
        assert error["details"]["reason"] == "rotated"
        assert error["details"]["replacedBy"] == new["id"]
        assert error["details"]["graceEndsAt"] == new["previousKeyExpiresAt"]
        assert "rotated" in error["message"] and "replacement" in error["message"]
    # the replacement survived, and nothing was created
    listed = (await client.get(KEYS, headers=tenant.auth("session"))).json()["data"]
    assert {k["id"] for k in listed} == {old["id"], new["id"]}
    # everything else still works with the old key until the grace ends
    assert (await client.get(KEYS, headers=old_headers)).status_code == 200
    assert (await client.get("/v1/keys", headers=old_headers)).status_code == 200
    # the replacement manages keys, the old one included
    new_headers = {"Authorization": f"Bearer {new['key']}"}
    r = await client.post(KEYS, json={"name": "y", "type": "secret", "environment": "live"}, headers=new_headers)
    assert r.status_code == 201, r.text
    clock.advance(24 * 3600)
    assert_error(await client.get(KEYS, headers=old_headers), 401, "AUTH_002")


async def test_the_replacement_can_delete_the_rotated_key(client, tenant):
    old = tenant.keys["secret_live"]
    new = (await client.post(f"{KEYS}/{old['id']}/rotate", headers=tenant.auth("session"))).json()["data"]
    r = await client.delete(f"{KEYS}/{old['id']}", headers={"Authorization": f"Bearer {new['key']}"})
    assert r.status_code == 204
    error = assert_error(await client.get(KEYS, headers={"Authorization": f"Bearer {old['key']}"}), 401, "AUTH_002")
    assert error["details"]["reason"] == "deleted"


# --- 9. repeated or conflicting credentials ---------------------------------------------


async def test_repeated_or_conflicting_credential_headers_are_req_007(client, tenant):
    key = tenant.key("secret_live")
    cases = [
        [("Authorization", f"Bearer {key}"), ("Authorization", f"Bearer {key}")],
        [("Authorization", f"Bearer {key}"), ("Authorization", "Bearer svc_sec_live_sk_" + "B" * 43)],
        [("X-API-Key", key), ("X-API-Key", key)],
        [("Authorization", f"Bearer {key}"), ("X-API-Key", "svc_sec_live_sk_" + "B" * 43)],
        [("Authorization", "Basic dXNlcjpwYXNz"), ("X-API-Key", key)],
        [("Authorization", f"Bearer {tenant.session}"), ("X-API-Key", key)],
    ]
    for headers in cases:
        error = assert_error(await client.get(KEYS, headers=headers), 400, "REQ_007")
        assert error["details"]["header"] in {"Authorization", "X-API-Key"}, headers
        assert key not in error["message"]
    # the same credential in both headers is one credential
    r = await client.get(KEYS, headers=[("Authorization", f"Bearer {key}"), ("X-API-Key", key)])
    assert r.status_code == 200, r.text


# --- 14. AUTH_001 on key management says what to send -----------------------------------


async def test_auth_001_on_key_management_names_session_tokens_and_secret_keys(client):
    attempts = [
        await client.get(KEYS),
        await client.post(KEYS, json={"name": "x", "type": "secret", "environment": "live"}),
        await client.delete(f"{KEYS}/key_x", headers={"Authorization": "Basic dXNlcjpwYXNz"}),
        await client.post(f"{KEYS}/key_x/rotate", headers={"Authorization": "Bearer correct horse battery staple"}),
        await client.get(KEYS, headers=GARBAGE),
    ]
    for r in attempts:
        error = assert_error(r, 401, "AUTH_001")
        assert "session token" in error["message"] and "POST /v1/auth/login" in error["message"], error
        assert "secret API key" in error["message"] and "Authorization: Bearer" in error["message"]
        assert error["details"]["expected"] == "session token or secret key"
    assert assert_error(attempts[0], 401, "AUTH_001")["details"]["reason"] == "missing"


async def test_auth_001_elsewhere_names_the_key_the_endpoint_takes(client):
    error = assert_error(await client.post(GENERATE, json=KEYGEN_BODY), 401, "AUTH_001")
    assert "secret API key" in error["message"] and "session token" not in error["message"]
    assert error["details"]["expected"] == "secret key"
