"""Registration, login and session tokens."""

from __future__ import annotations

import base64
import json

from tests.api.test_envelope import assert_error, assert_meta
from tests.support import make_tenant


async def test_register_returns_account(client):
    r = await client.post(
        "/v1/auth/register", json={"email": "Alice@Example.com", "password": "p" * 12, "name": "Alice"}
    )
    assert r.status_code == 201
    data = assert_meta(r)["data"]
    assert data["id"].startswith("usr_")
    assert data["email"] == "alice@example.com"
    assert data["name"] == "Alice"
    assert data["plan"] == "free"
    assert data["createdAt"].endswith("Z")


async def test_duplicate_email_is_409_case_insensitive(client):
    body = {"email": "dup@example.com", "password": "p" * 12}
    assert (await client.post("/v1/auth/register", json=body)).status_code == 201
    body["email"] = "DUP@example.com"
    error = assert_error(await client.post("/v1/auth/register", json=body), 409, "ACC_001")
    assert error["details"]["field"] == "email"


async def test_short_password_is_refused(client):
    error = assert_error(
        await client.post("/v1/auth/register", json={"email": "s@example.com", "password": "p" * 11}), 400, "ACC_003"
    )
    assert error["details"]["field"] == "password"


async def test_invalid_email_is_refused(client):
    for email in ("no-at-sign", "a@b", " a@example.com", "a@@example.com", "a" * 250 + "@example.com"):
        error = assert_error(
            await client.post("/v1/auth/register", json={"email": email, "password": "p" * 12}), 400, "REQ_001"
        )
        assert error["details"]["field"] == "email"


async def test_login_returns_session(client, clock):
    tenant = await make_tenant(client, ())
    r = await client.post("/v1/auth/login", json={"email": tenant.email.upper(), "password": tenant.password})
    data = assert_meta(r)["data"]
    assert data["token"].startswith("svc_sess_")
    assert data["user"] == {"id": tenant.account_id, "email": tenant.email, "plan": "free"}
    assert data["expiresAt"] > clock.now().isoformat()[:19]


async def test_wrong_password_and_unknown_email_look_the_same(client):
    tenant = await make_tenant(client, ())
    wrong = assert_error(
        await client.post("/v1/auth/login", json={"email": tenant.email, "password": "x" * 12}), 401, "ACC_002"
    )
    unknown = assert_error(
        await client.post("/v1/auth/login", json={"email": "nobody@example.com", "password": "x" * 12}), 401, "ACC_002"
    )
    assert wrong == unknown


async def test_session_token_expires(client, clock):
    tenant = await make_tenant(client, ())
    assert (await client.get("/v1/auth/api-keys", headers=tenant.auth("session"))).status_code == 200
    clock.advance(12 * 3600 + 1)
    error = assert_error(await client.get("/v1/auth/api-keys", headers=tenant.auth("session")), 401, "AUTH_001")
    assert error["details"]["reason"] == "expired"


async def test_tampered_session_token_is_refused(client):
    tenant = await make_tenant(client, ())
    prefix, _, rest = tenant.session.partition("_sess_")
    body, sig = rest.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["sub"] = "usr_someoneelse"
    forged_body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    forged = f"{prefix}_sess_{forged_body}.{sig}"
    error = assert_error(
        await client.get("/v1/auth/api-keys", headers={"Authorization": f"Bearer {forged}"}), 401, "AUTH_001"
    )
    assert error["details"]["reason"] == "bad signature"
    garbage = f"{prefix}_sess_notatoken"
    assert_error(await client.get("/v1/auth/api-keys", headers={"Authorization": f"Bearer {garbage}"}), 401, "AUTH_001")
