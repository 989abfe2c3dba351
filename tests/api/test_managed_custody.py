"""Managed custody over the API: generation, signing, the key lifecycle with its
7-day window, plan gating, tenant and environment isolation, the audit log and
usage. One app for the module, with its own manual clock."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

import pqc
from core.clock import iso
from services.settings import load_settings
from storage.models import Plan
from tests.api.test_envelope import assert_error, assert_meta
from tests.custody.support import requires_softhsm, shared_softhsm_conf
from tests.signing import eip191_signature, public_key
from tests.support import ManualClock, client_for, engine_env, make_tenant, running_app

shared_softhsm_conf()  # at collection: before any app of this process opens SoftHSM2

GENERATE, SIGN, VERIFY = "/v1/keys/generate", "/v1/sign/managed", "/v1/verify"
DAY = 86400


@pytest.fixture(scope="module")
def mapp_clock() -> ManualClock:
    """The clock of the module's app; tests move it through ``mclock``."""
    return ManualClock(datetime(2026, 11, 21, 12, 0, tzinfo=UTC))


@pytest.fixture
def mclock(mapp_clock) -> Iterator[ManualClock]:
    """The module app's clock for a test to move, back at its start time when the test ends."""
    yield mapp_clock
    mapp_clock.reset()


@pytest.fixture(scope="module")
async def mapp(tmp_path_factory, mapp_clock, module_database_url):
    """An app with managed custody on the process's throw-away SoftHSM2 token, on both engines."""
    settings = load_settings(engine_env(module_database_url), data_dir=tmp_path_factory.mktemp("managed-api"))
    async with running_app(settings, mapp_clock) as application:
        yield application


@pytest.fixture
async def mclient(mapp):
    """A client of the module's app with its own address."""
    async with client_for(mapp) as c:
        yield c


async def _tenant(client, app, plan: Plan = Plan.PRO, keys=("secret_live",)):
    tenant = await make_tenant(client, keys)
    await app.ctx.store.set_plan(tenant.email, plan)
    return tenant


async def _managed(client, tenant, algorithm="ml-dsa-65", key="secret_live", **extra) -> dict:
    r = await client.post(
        GENERATE,
        json={"algorithm": algorithm, "chain": "ethereum", "custody": "managed", **extra},
        headers=tenant.auth(key),
    )
    assert r.status_code == 201, r.text
    return assert_meta(r)["data"]


async def _sign(client, tenant, key_id, message=b"hello", algorithm="ml-dsa-65", key="secret_live", **extra):
    return await client.post(
        SIGN,
        json={"key_id": key_id, "message": message.hex(), "algorithm": algorithm, **extra},
        headers=tenant.auth(key),
    )


MANAGED_FIELDS = {
    "custody",
    "id",
    "algorithm",
    "chain",
    "publicKey",
    "fingerprint",
    "format",
    "state",
    "environment",
    "createdAt",
    "deletionRequestedAt",
    "deletionScheduledAt",
    "destroyedAt",
}


@requires_softhsm
@pytest.mark.parametrize("algorithm", ["ml-dsa-44", "ml-dsa-65", "ml-dsa-87"])
async def test_managed_generation_returns_the_public_key_only(mclient, mapp, algorithm):
    tenant = await _tenant(mclient, mapp)
    for fmt in ("hex", "base64"):
        data = await _managed(mclient, tenant, algorithm, format=fmt)
        assert set(data) == MANAGED_FIELDS
        assert (data["custody"], data["state"], data["environment"], data["format"]) == (
            "managed",
            "active",
            "live",
            fmt,
        )
        public = bytes.fromhex(data["publicKey"]) if fmt == "hex" else base64.b64decode(data["publicKey"])
        assert len(public) == pqc.SPECS[pqc.parse_algorithm(algorithm)].public_key_size
        assert data["fingerprint"] == hashlib.sha256(public).hexdigest() and data["id"].startswith("key_")
        r = await mclient.get(f"/v1/keys/{data['id']}", headers=tenant.auth("secret_live"))
        assert r.status_code == 200 and r.json()["data"]["publicKey"] == public.hex()
    # Registered like any server-generated key, so it can back hybrid attestations.
    listed = (await mclient.get("/v1/keys", headers=tenant.auth("secret_live"))).json()["data"]
    assert {k["origin"] for k in listed} == {"generated"} and len(listed) == 2


async def test_plan_algorithm_and_format_rules(mclient, mapp):
    for plan in (Plan.FREE, Plan.BUILDER):
        tenant = await _tenant(mclient, mapp, plan)
        r = await mclient.post(
            GENERATE,
            json={"algorithm": "ml-dsa-65", "chain": "ethereum", "custody": "managed"},
            headers=tenant.auth("secret_live"),
        )
        error = assert_error(r, 403, "CUS_001")
        assert error["details"]["plan"] == plan.value and error["details"]["requiredPlans"] == ["pro", "enterprise"]
        r = await mclient.post(
            SIGN,
            json={"key_id": "key_x", "message": "00", "algorithm": "ml-dsa-65"},
            headers=tenant.auth("secret_live"),
        )
        assert_error(r, 403, "CUS_001")
    pro = await _tenant(mclient, mapp, Plan.PRO, ("secret_live", "publishable_live"))
    cases = [
        ({"algorithm": "slh-dsa-128s"}, 400, "CUS_003"),
        ({"algorithm": "slh-dsa-shake-128s"}, 400, "CUS_003"),
        ({"algorithm": "rsa-2048"}, 400, "PQC_001"),
        ({"chain": "tron"}, 400, "GEN_001"),
        ({"format": "raw"}, 400, "REQ_001"),
        ({"custody": "hsm"}, 400, "REQ_001"),
    ]
    for change, status, code in cases:
        body = {"algorithm": "ml-dsa-65", "chain": "ethereum", "custody": "managed", **change}
        assert_error(await mclient.post(GENERATE, json=body, headers=pro.auth("secret_live")), status, code)
    assert_error(
        await mclient.post(
            GENERATE,
            json={"algorithm": "ml-dsa-65", "chain": "ethereum", "custody": "managed"},
            headers=pro.auth("publishable_live"),
        ),
        403,
        "AUTH_003",
    )
    # Self custody is unchanged, and now says so.
    r = await mclient.post(
        GENERATE, json={"algorithm": "ml-dsa-44", "chain": "ethereum"}, headers=pro.auth("secret_live")
    )
    assert r.status_code == 201 and r.json()["data"]["custody"] == "self" and "seed" in r.json()["data"]


@requires_softhsm
async def test_sign_verify_and_both_credential_headers(mclient, mapp):
    tenant = await _tenant(mclient, mapp, Plan.ENTERPRISE)
    key = await _managed(mclient, tenant)
    public = bytes.fromhex(key["publicKey"])
    message = b"transfer 1 ETH to 0xabc"
    headers = [{"X-API-Key": tenant.key("secret_live")}, tenant.auth("secret_live")]
    for header, context, prefix in zip(headers, ("", "0x716461792d7631"), ("", "0x"), strict=True):
        r = await mclient.post(
            SIGN,
            json={"key_id": key["id"], "message": prefix + message.hex(), "algorithm": "ml-dsa-65", "context": context},
            headers=header,
        )
        assert r.status_code == 200, r.text
        assert int(r.headers["x-ratelimit-limit"]) == 1000  # the sign group, enterprise
        data = assert_meta(r)["data"]
        assert set(data) == {"keyId", "algorithm", "signature", "publicKey", "context", "messageSha256", "signedAt"}
        assert data["messageSha256"] == hashlib.sha256(message).hexdigest() and data["publicKey"] == public.hex()
        ctx = bytes.fromhex(context.removeprefix("0x"))
        assert data["context"] == ctx.hex()
        pqc.verify("ml-dsa-65", public, message, bytes.fromhex(data["signature"]), ctx)
        body = {
            "public_key": key["publicKey"],
            "message": message.hex(),
            "signature": data["signature"],
            "algorithm": "ml-dsa-65",
        } | ({"context": ctx.hex()} if ctx else {})
        verified = await mclient.post(VERIFY, json=body, headers=header)
        assert verified.status_code == 200 and verified.json()["data"]["valid"] is True
    r = await _sign(mclient, tenant, key["id"], b"")  # the empty message is a message
    pqc.verify("ml-dsa-65", public, b"", bytes.fromhex(r.json()["data"]["signature"]))
    assert_error(await _sign(mclient, tenant, key["id"], algorithm="ml-dsa-44"), 400, "REQ_001")
    assert_error(await _sign(mclient, tenant, key["id"], algorithm="slh-dsa-128s"), 400, "CUS_003")
    assert_error(await _sign(mclient, tenant, key["id"], context="zz"), 400, "PQC_002")
    assert_error(await _sign(mclient, tenant, key["id"], context="00" * 256), 400, "REQ_001")
    r = await mclient.post(
        SIGN,
        json={"key_id": key["id"], "message": "hello", "algorithm": "ml-dsa-65"},
        headers=tenant.auth("secret_live"),
    )
    assert assert_error(r, 400, "PQC_002")["details"]["field"] == "message"  # hex only, stated in the docs
    r = await mclient.post(
        SIGN, json={"keyId": key["id"], "message": "00", "algorithm": "ml-dsa-65"}, headers=tenant.auth("secret_live")
    )
    assert_error(r, 400, "REQ_001")  # the spec's snake_case body


@requires_softhsm
async def test_lifecycle_with_the_seven_day_window(mclient, mapp, mclock):
    tenant = await _tenant(mclient, mapp)
    auth = tenant.auth("secret_live")
    key = (await _managed(mclient, tenant))["id"]
    requested = mclock.now()
    r = await mclient.delete(f"/v1/keys/{key}", headers=auth)
    assert r.status_code == 200
    data = r.json()["data"]
    assert data["state"] == "pending_deletion"
    assert datetime.fromisoformat(data["deletionScheduledAt"]) == requested + timedelta(days=7)
    assert datetime.fromisoformat(data["deletionRequestedAt"]) == requested
    first_schedule = data["deletionScheduledAt"]
    error = assert_error(await _sign(mclient, tenant, key), 409, "CUS_002")
    assert error["details"]["deletionScheduledAt"] == data["deletionScheduledAt"]
    assert_error(await mclient.delete(f"/v1/keys/{key}", headers=auth), 409, "CUS_006")

    mclock.advance(6 * DAY)  # day 6: still pending, still cancellable
    await mapp.ctx.managed.purge_due()
    assert (await mclient.get(f"/v1/keys/{key}", headers=auth)).json()["data"]["state"] == "pending_deletion"
    r = await mclient.post(f"/v1/keys/{key}/cancel-deletion", headers=auth)
    assert r.status_code == 200 and r.json()["data"]["state"] == "active"
    assert r.json()["data"]["deletionScheduledAt"] is None
    assert (await _sign(mclient, tenant, key)).status_code == 200
    assert_error(await mclient.post(f"/v1/keys/{key}/cancel-deletion", headers=auth), 409, "CUS_006")

    assert (await mclient.delete(f"/v1/keys/{key}", headers=auth)).status_code == 200
    mclock.advance(7 * DAY - 1)
    await mapp.ctx.managed.purge_due()
    assert (await mclient.get(f"/v1/keys/{key}", headers=auth)).json()["data"]["state"] == "pending_deletion"
    mclock.advance(1)  # day 7 of the second request: destroyed
    assert key in await mapp.ctx.managed.purge_due()
    data = (await mclient.get(f"/v1/keys/{key}", headers=auth)).json()["data"]
    assert data["state"] == "destroyed" and data["destroyedAt"] == iso(mclock.now())
    assert data["publicKey"]  # the public half stays, for checking old signatures
    assert_error(await _sign(mclient, tenant, key), 410, "CUS_005")
    assert_error(await mclient.post(f"/v1/keys/{key}/cancel-deletion", headers=auth), 410, "CUS_005")
    assert_error(await mclient.delete(f"/v1/keys/{key}", headers=auth), 410, "CUS_005")

    r = await mclient.get(f"/v1/keys/{key}/events", headers=auth)
    events = assert_meta(r)["data"]
    assert [(e["type"], e["state"]) for e in events] == [
        ("created", "active"),
        ("deletion_scheduled", "pending_deletion"),
        ("deletion_cancelled", "active"),
        ("deletion_scheduled", "pending_deletion"),
        ("destroyed", "destroyed"),
    ]
    assert events[0]["actor"] == f"api_key:{tenant.keys['secret_live']['id']}" and events[-1]["actor"] == "system:purge"
    assert all(e["requestId"].startswith("req_") for e in events[:-1]) and events[-1]["requestId"] is None
    assert events[1]["details"] == {"deletionScheduledAt": first_schedule}
    assert len({e["hash"] for e in events}) == 5
    assert await mapp.ctx.managed._store.verify_event_chain(tenant.account_id)


@requires_softhsm
async def test_other_tenants_and_environments_see_nothing(mclient, mapp):
    owner = await _tenant(mclient, mapp, keys=("secret_live", "secret_test"))
    stranger = await _tenant(mclient, mapp)
    key = (await _managed(mclient, owner))["id"]
    test_key = await _managed(mclient, owner, key="secret_test")
    assert test_key["environment"] == "test"
    for who, name in ((stranger, "secret_live"), (owner, "secret_test")):
        auth = who.auth(name)
        for method, path in (
            ("GET", f"/v1/keys/{key}"),
            ("DELETE", f"/v1/keys/{key}"),
            ("POST", f"/v1/keys/{key}/cancel-deletion"),
            ("GET", f"/v1/keys/{key}/events"),
        ):
            assert_error(await mclient.request(method, path, headers=auth), 404, "REQ_005")
        assert_error(await _sign(mclient, who, key, key=name), 404, "REQ_005")
    unknown = await mclient.get("/v1/keys/key_doesnotexist", headers=owner.auth("secret_live"))
    assert (
        assert_error(unknown, 404, "REQ_005")["message"].replace("key_doesnotexist", key)
        == (await mclient.get(f"/v1/keys/{key}", headers=stranger.auth("secret_live"))).json()["error"]["message"]
    )
    live_usage = (await mclient.get("/v1/usage", headers=owner.auth("secret_live"))).json()["data"]
    assert [k["keyId"] for k in live_usage["keys"]] == [key]
    assert (await mclient.get("/v1/usage", headers=stranger.auth("secret_live"))).json()["data"]["keys"] == []
    assert (await mclient.get(f"/v1/keys/{key}", headers=owner.auth("secret_live"))).json()["data"]["state"] == "active"


@requires_softhsm
async def test_usage_counts_signatures_not_verifications(mclient, mapp, mclock):
    tenant = await _tenant(mclient, mapp)
    auth = tenant.auth("secret_live")
    now = mclock.now()
    next_month = datetime(now.year + (now.month == 12), now.month % 12 + 1, 1, tzinfo=UTC)
    mclock.advance((next_month - now).total_seconds() - 60)  # one minute before the month ends
    a, b = (await _managed(mclient, tenant))["id"], (await _managed(mclient, tenant, "ml-dsa-44"))["id"]
    signatures = []
    for _ in range(3):
        signatures.append((await _sign(mclient, tenant, a)).json()["data"])
    await _sign(mclient, tenant, b, algorithm="ml-dsa-44")
    mclock.advance(120)
    await _sign(mclient, tenant, a)
    for s in signatures:  # verification is free
        r = await mclient.post(
            VERIFY,
            json={
                "public_key": s["publicKey"],
                "message": b"hello".hex(),
                "signature": s["signature"],
                "algorithm": "ml-dsa-65",
            },
            headers=auth,
        )
        assert r.json()["data"]["valid"]
    first = (next_month - timedelta(days=1)).strftime("%Y-%m")
    second = next_month.strftime("%Y-%m")
    old = assert_meta(await mclient.get(f"/v1/usage?month={first}", headers=auth))["data"]
    new = assert_meta(await mclient.get("/v1/usage", headers=auth))["data"]
    assert new["month"] == second and old["month"] == first
    assert {k["keyId"]: k["signatures"] for k in old["keys"]} == {a: 3, b: 1}
    assert {k["keyId"]: k["signatures"] for k in new["keys"]} == {a: 1, b: 0}
    assert (old["signatures"], old["keyMonths"], old["signatureBlocks"], old["billableUnits"], old["activeKeys"]) == (
        4,
        2,
        1,
        3,
        2,
    )
    assert_error(await mclient.get("/v1/usage?month=2026-13", headers=auth), 400, "REQ_001")


@requires_softhsm
async def test_a_managed_key_backs_a_hybrid_attestation(mclient, mapp):
    tenant = await _tenant(mclient, mapp)
    key = await _managed(mclient, tenant)
    wallet = os.urandom(32)
    message = b"qday: link my wallet to my managed ML-DSA key"
    pq = (await _sign(mclient, tenant, key["id"], message)).json()["data"]
    r = await mclient.post(
        "/v1/sign/hybrid",
        json={
            "message": message.hex(),
            "ecdsaSignature": eip191_signature(wallet, message).hex(),
            "ecdsaPublicKey": public_key(wallet).hex(),
            "pqcSignature": pq["signature"],
            "pqcPublicKey": key["publicKey"],
            "algorithm": "ml-dsa-65",
        },
        headers=tenant.auth("secret_live"),
    )
    assert r.status_code == 201, r.text


async def test_without_a_custody_backend_managed_calls_are_503(tmp_path, mclient):
    settings = load_settings({}, data_dir=tmp_path, custody_backend="disabled")
    async with running_app(settings, ManualClock()) as application, client_for(application) as c:
        tenant = await _tenant(c, application)
        r = await c.post(
            GENERATE,
            json={"algorithm": "ml-dsa-65", "chain": "ethereum", "custody": "managed"},
            headers=tenant.auth("secret_live"),
        )
        assert_error(r, 503, "CUS_004")
        r = await c.post(
            GENERATE, json={"algorithm": "ml-dsa-65", "chain": "ethereum"}, headers=tenant.auth("secret_live")
        )
        assert r.status_code == 201  # everything else still works
