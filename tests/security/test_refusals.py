"""Every refused credential and cross-boundary access gets its exact documented code, on every
endpoint that the declarations (api/endpoints.py) say needs a credential.

The sweep is built from ``all_endpoints()``, so an endpoint added later is covered without
editing this file. In-process app (tests/api/conftest.py), real storage and crypto.
"""

from __future__ import annotations

import re

import pytest

from api.app import all_endpoints
from api.endpoints import Credential
from tests.api.test_envelope import assert_error
from tests.support import client_for, make_tenant

KEYS = "/v1/auth/api-keys"
EVM_ADDRESS = "0x52908400098527886E0F7030069857D2E4169EE7"
PROTECTED = [e for e in all_endpoints() if e.credential is not Credential.NONE]
NOT_FOR_PUBLISHABLE = [e for e in PROTECTED if e.credential is not Credential.ANY_KEY]
NOT_FOR_SESSIONS = [e for e in PROTECTED if e.credential is not Credential.SESSION_OR_SECRET]


def _label(endpoint) -> str:
    return f"{endpoint.method} {endpoint.path}"


async def _call(app, endpoint, headers: dict[str, str]):
    """One request from a fresh client address, so the sweep never meets a rate limit."""
    path = re.sub(r"{\w+}", "key_0123456789", endpoint.path)
    async with client_for(app) as fresh:
        return await fresh.request(endpoint.method, path, json={} if endpoint.body else None, headers=headers)


@pytest.fixture
async def full_tenant(client):
    """An account with live and test secret keys and a live publishable key."""
    return await make_tenant(client, ("secret_live", "secret_test", "publishable_live"))


async def test_publishable_key_is_auth_003_everywhere_but_the_scan_endpoints(app, client, full_tenant):
    assert len(NOT_FOR_PUBLISHABLE) >= 15
    for endpoint in NOT_FOR_PUBLISHABLE:
        r = await _call(app, endpoint, full_tenant.auth("publishable_live"))
        assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_003", (_label(endpoint), r.text)


async def test_session_token_is_auth_003_outside_key_management(app, client, full_tenant):
    for endpoint in NOT_FOR_SESSIONS:
        r = await _call(app, endpoint, full_tenant.auth("session"))
        assert r.status_code == 403 and r.json()["error"]["code"] == "AUTH_003", (_label(endpoint), r.text)


async def test_deleted_key_is_auth_002_on_every_protected_endpoint(app, client, full_tenant):
    doomed = (
        await client.post(
            KEYS, json={"name": "doomed", "type": "secret", "environment": "live"}, headers=full_tenant.auth("session")
        )
    ).json()["data"]
    r = await client.delete(f"{KEYS}/{doomed['id']}", headers=full_tenant.auth("session"))
    assert r.status_code == 204
    for endpoint in PROTECTED:
        r = await _call(app, endpoint, {"Authorization": f"Bearer {doomed['key']}"})
        assert r.status_code == 401, (_label(endpoint), r.text)
        error = r.json()["error"]
        assert (error["code"], error["details"]["reason"]) == ("AUTH_002", "deleted"), _label(endpoint)


def _tampered(session: str) -> list[tuple[str, str]]:
    prefix, _, rest = session.partition("_sess_")
    body, signature = rest.split(".")
    flipped = body[:-1] + ("A" if body[-1] != "A" else "B")
    return [
        (f"{prefix}_sess_{flipped}.{signature}", "bad signature"),
        (f"{prefix}_sess_{body}.{signature[:-2]}", "bad signature"),
        (f"{prefix}_sess_{body}{signature}", "malformed"),
        (f"{prefix}_sess_{body}.{signature}.x", "malformed"),
    ]


async def test_tampered_and_malformed_session_tokens_are_auth_001_with_the_reason(app, client, full_tenant):
    for token, reason in _tampered(full_tenant.session):
        for endpoint in PROTECTED:
            r = await _call(app, endpoint, {"Authorization": f"Bearer {token}"})
            assert r.status_code == 401, (_label(endpoint), token, r.text)
            error = r.json()["error"]
            assert (error["code"], error["details"]["reason"]) == ("AUTH_001", reason), (_label(endpoint), token)


async def test_expired_session_token_is_auth_001_expired(app, client, clock):
    tenant = await make_tenant(client, ())
    clock.advance(12 * 3600)  # exactly the lifetime: expired (the token is valid strictly before exp)
    for endpoint in PROTECTED:
        r = await _call(app, endpoint, tenant.auth("session"))
        assert r.status_code == 401, (_label(endpoint), r.text)
        error = r.json()["error"]
        assert (error["code"], error["details"]["reason"]) == ("AUTH_001", "expired"), _label(endpoint)


async def test_missing_credential_is_auth_001_everywhere(app, client):
    for endpoint in PROTECTED:
        assert_error(await _call(app, endpoint, {}), 401, "AUTH_001")


async def _owned_resources(client, tenant) -> dict[str, str]:
    """A live API key, watched address and generated PQ key of the tenant: the resources with an
    id in a path (attestations by id: tests/api/test_hybrid.py, managed keys: tests/api/test_managed_*)."""
    live = tenant.auth("secret_live")
    watched = await client.post("/v1/watchlist", json={"address": EVM_ADDRESS, "chain": "ethereum"}, headers=live)
    assert watched.status_code == 201, watched.text
    generated = await client.post(
        "/v1/keys/generate", json={"algorithm": "ml-dsa-44", "chain": "ethereum"}, headers=live
    )
    assert generated.status_code == 201, generated.text
    return {
        "api_key": tenant.keys["secret_live"]["id"],
        "watch": watched.json()["data"]["id"],
        "pq_key": generated.json()["data"]["id"],
    }


def _foreign_calls(ids: dict[str, str]) -> list[tuple[str, str, dict | None]]:
    return [
        ("DELETE", f"{KEYS}/{ids['api_key']}", None),
        ("POST", f"{KEYS}/{ids['api_key']}/rotate", None),
        ("DELETE", f"/v1/watchlist/{ids['watch']}", None),
        ("GET", f"/v1/keys/{ids['pq_key']}", None),
        ("DELETE", f"/v1/keys/{ids['pq_key']}", None),
        ("GET", f"/v1/keys/{ids['pq_key']}/events", None),
    ]


async def test_another_accounts_resources_are_not_found(client, full_tenant):
    ids = await _owned_resources(client, full_tenant)
    intruder = await make_tenant(client)
    for method, path, body in _foreign_calls(ids):
        r = await client.request(method, path, json=body, headers=intruder.auth("secret_live"))
        assert r.status_code == 404 and r.json()["error"]["code"] == "REQ_005", (method, path, r.text)
    watched = (await client.get("/v1/watchlist", headers=intruder.auth("secret_live"))).json()["data"]
    assert ids["watch"] not in {w["id"] for w in watched}
    keys = (await client.get("/v1/keys", headers=intruder.auth("secret_live"))).json()["data"]
    assert ids["pq_key"] not in {k["id"] for k in keys}


async def test_test_environment_key_cannot_reach_live_data(client, full_tenant):
    ids = await _owned_resources(client, full_tenant)
    test_key = full_tenant.auth("secret_test")
    for method, path, body in _foreign_calls(ids):
        r = await client.request(method, path, json=body, headers=test_key)
        code = r.json()["error"]["code"]
        # Key management names the other environment (AUTH_003); other resources do not exist there.
        expected = ("AUTH_003", 403) if path.startswith(KEYS) else ("REQ_005", 404)
        assert (code, r.status_code) == expected, (method, path, r.text)
    for listing in ("/v1/watchlist", "/v1/keys", KEYS):
        listed = (await client.get(listing, headers=test_key)).json()["data"]
        assert not {item["id"] for item in listed} & set(ids.values()), listing
        assert all(item.get("environment", "test") == "test" for item in listed), listing
