"""/v1/webhooks on both engines, with a real local receiver: endpoints and their secrets,
test pings signed twice (HMAC-SHA256 checked by hand here, ML-DSA-65 checked with
dilithium-py, an implementation independent of the signer's), retries with backoff on the
app's clock, rotation with both secrets signing, disabling after 24 hours of failures,
caps, tenant isolation, and URLs refused before anything is sent (SSRF)."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from dilithium_py.ml_dsa import ML_DSA_65  # type: ignore[import-untyped]  # ships no types

from services.settings import load_settings
from storage.models import Plan
from tests.api.test_envelope import assert_error
from tests.support import ManualClock, Tenant, client_for, engine_env, make_tenant, running_app
from tests.webhook_receiver import Received, WebhookReceiver

EVENTS = ["key.exposed", "risk.changed"]


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


@pytest.fixture(scope="module")
def hook_clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory, hook_clock: ManualClock, module_database_url: str) -> Any:
    env = {"QDAY_WEBHOOK_ALLOW_PRIVATE": "true", "QDAY_FAMILY_CHAINS": "none", **engine_env(module_database_url)}
    async with running_app(load_settings(env, data_dir=tmp_path_factory.mktemp("webhooks")), hook_clock) as app:
        yield app


@pytest.fixture
async def client(app: Any) -> AsyncIterator[Any]:
    async with client_for(app) as c:
        yield c


@pytest.fixture
async def tenant(client: Any) -> Tenant:
    return await make_tenant(client, ("secret_live", "secret_test", "publishable_live"))


async def _create(client: Any, tenant: Tenant, url: str, **extra: Any) -> dict[str, Any]:
    r = await client.post(
        "/v1/webhooks", json={"url": url, "events": EVENTS, **extra}, headers=tenant.auth("secret_live")
    )
    assert r.status_code == 201, r.text
    return dict(r.json()["data"])


def _check_signed(got: Received, secrets: list[str], public_key: bytes, now: float) -> dict[str, Any]:
    """Both signatures of a delivery, checked without qday's code; the event."""
    fields = [part.split("=", 1) for part in got.headers["Qday-Signature"].split(",")]
    assert fields[0][0] == "t" and abs(int(fields[0][1]) - now) <= 1
    signed = f"{fields[0][1]}.".encode() + got.body
    macs = [value for name, value in fields[1:] if name == "v1"]
    assert macs == [hmac.new(s.encode(), signed, hashlib.sha256).hexdigest() for s in secrets]
    signature = bytes.fromhex(got.headers["Qday-Signature-MLDSA"])
    assert len(signature) == 3309
    assert ML_DSA_65.verify(public_key, signed, signature, ctx=b"")
    assert not ML_DSA_65.verify(public_key, signed + b" ", signature, ctx=b"")
    event = dict(json.loads(got.body))
    assert got.headers["Qday-Event-Id"] == event["id"] and event["id"].startswith("evt_")
    assert got.headers["Content-Type"] == "application/json"
    return event


async def _signing_key(client: Any, tenant: Tenant) -> bytes:
    r = await client.get("/v1/webhooks/signing-key", headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["algorithm"] == "ml-dsa-65"
    return bytes.fromhex(data["publicKey"])


async def test_a_ping_arrives_signed_twice(client: Any, tenant: Tenant, receiver: WebhookReceiver, app: Any) -> None:
    made = await _create(client, tenant, receiver.url, description="desk alerts")
    assert made["secret"].startswith("whsec_") and made["status"] == "enabled" and made["events"] == EVENTS
    listed = (await client.get("/v1/webhooks", headers=tenant.auth("secret_live"))).json()["data"]
    assert [w["id"] for w in listed] == [made["id"]] and "secret" not in listed[0]
    public_key = await _signing_key(client, tenant)
    assert len(public_key) == 1952
    before = len(receiver.received)
    r = await client.post(f"/v1/webhooks/{made['id']}/test", headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    sent = r.json()["data"]
    assert sent["delivered"] is True and sent["attempt"]["status"] == 200 and sent["attempt"]["error"] is None
    got = (await receiver.arrived(before + 1))[before]
    event = _check_signed(got, [made["secret"]], public_key, app.ctx.clock.now().timestamp())
    assert event["type"] == "ping" and event["id"] == sent["eventId"] and event["data"] == {"webhookId": made["id"]}
    assert got.path == "/hook"
    deliveries = (await client.get(f"/v1/webhooks/{made['id']}/deliveries", headers=tenant.auth("secret_live"))).json()[
        "data"
    ]
    assert [(d["eventType"], d["state"], [a["status"] for a in d["attempts"]]) for d in deliveries] == [
        ("ping", "delivered", [200])
    ]
    assert deliveries[0]["attempts"][0]["latencyMs"] > 0


async def test_a_failing_receiver_is_retried_with_backoff(
    client: Any, tenant: Tenant, receiver: WebhookReceiver, app: Any, hook_clock: ManualClock
) -> None:
    made = await _create(client, tenant, receiver.url)
    receiver.fail_next(500, 503)
    before = len(receiver.received)
    sent = (await client.post(f"/v1/webhooks/{made['id']}/test", headers=tenant.auth("secret_live"))).json()["data"]
    assert sent["delivered"] is False and sent["attempt"]["status"] == 500 and "500" in sent["attempt"]["error"]
    path = f"/v1/webhooks/{made['id']}/deliveries"
    (pending,) = (await client.get(path, headers=tenant.auth("secret_live"))).json()["data"]
    assert pending["state"] == "pending" and pending["nextAttemptAt"] is not None
    listed = (await client.get("/v1/webhooks", headers=tenant.auth("secret_live"))).json()["data"]
    assert next(w for w in listed if w["id"] == made["id"])["failingSince"] is not None
    for wait, count in ((5, 2), (10, 3)):  # 5 s, then doubled
        hook_clock.advance(wait - 0.5)
        app.ctx.deliverer.wake()
        await _settle(app)
        assert len(receiver.received) == before + count - 1  # not due yet
        hook_clock.advance(0.5)
        app.ctx.deliverer.wake()
        await receiver.arrived(before + count)
    await _settle(app)
    (done,) = (await client.get(path, headers=tenant.auth("secret_live"))).json()["data"]
    assert done["state"] == "delivered" and [a["status"] for a in done["attempts"]] == [500, 503, 200]
    ids = {json.loads(got.body)["id"] for got in receiver.received[before:]}
    assert ids == {sent["eventId"]}  # one event, three attempts: the receiver dedupes by id
    listed = (await client.get("/v1/webhooks", headers=tenant.auth("secret_live"))).json()["data"]
    assert next(w for w in listed if w["id"] == made["id"])["failingSince"] is None


async def _settle(app: Any) -> None:
    """Until this node's delivery loop has nothing due left (bounded)."""
    for _ in range(100):
        if await app.ctx.deliverer.run_once() == 0:
            return
    raise AssertionError("deliveries kept coming due")


async def test_after_a_rotation_both_secrets_sign_for_a_day(
    client: Any, tenant: Tenant, receiver: WebhookReceiver, app: Any, hook_clock: ManualClock
) -> None:
    made = await _create(client, tenant, receiver.url)
    public_key = await _signing_key(client, tenant)
    r = await client.post(f"/v1/webhooks/{made['id']}/rotate-secret", headers=tenant.auth("secret_live"))
    assert r.status_code == 200, r.text
    rotated = r.json()["data"]
    assert rotated["secret"] != made["secret"] and rotated["previousSecretExpiresAt"] is not None
    before = len(receiver.received)
    await client.post(f"/v1/webhooks/{made['id']}/test", headers=tenant.auth("secret_live"))
    got = (await receiver.arrived(before + 1))[before]
    _check_signed(got, [rotated["secret"], made["secret"]], public_key, hook_clock.now().timestamp())
    hook_clock.advance(24 * 3600 + 1)
    await client.post(f"/v1/webhooks/{made['id']}/test", headers=tenant.auth("secret_live"))
    got = (await receiver.arrived(before + 2))[before + 1]
    _check_signed(got, [rotated["secret"]], public_key, hook_clock.now().timestamp())


async def test_an_endpoint_failing_for_a_day_is_disabled(
    client: Any, tenant: Tenant, receiver: WebhookReceiver, app: Any, hook_clock: ManualClock
) -> None:
    made = await _create(client, tenant, receiver.url)
    receiver.fail_next(500, 500)
    sent = (await client.post(f"/v1/webhooks/{made['id']}/test", headers=tenant.auth("secret_live"))).json()["data"]
    assert sent["delivered"] is False
    hook_clock.advance(24 * 3600)
    await _settle(app)
    listed = (await client.get("/v1/webhooks", headers=tenant.auth("secret_live"))).json()["data"]
    shown = next(w for w in listed if w["id"] == made["id"])
    assert shown["status"] == "disabled" and "24 hours" in shown["disabledReason"] and shown["disabledAt"]
    (failed,) = (await client.get(f"/v1/webhooks/{made['id']}/deliveries", headers=tenant.auth("secret_live"))).json()[
        "data"
    ]
    assert failed["state"] == "failed" and len(failed["attempts"]) == 2 and failed["nextAttemptAt"] is None
    error = assert_error(
        await client.post(f"/v1/webhooks/{made['id']}/test", headers=tenant.auth("secret_live")), 400, "REQ_001"
    )
    assert error["details"]["reason"] == "disabled"
    r = await client.post(f"/v1/webhooks/{made['id']}/enable", headers=tenant.auth("secret_live"))
    assert r.status_code == 200 and r.json()["data"]["status"] == "enabled", r.text
    sent = (await client.post(f"/v1/webhooks/{made['id']}/test", headers=tenant.auth("secret_live"))).json()["data"]
    assert sent["delivered"] is True


async def test_endpoints_are_the_tenants_own_per_environment(
    client: Any, tenant: Tenant, receiver: WebhookReceiver
) -> None:
    made = await _create(client, tenant, receiver.url)
    other = await make_tenant(client)
    for method, path in (
        ("DELETE", f"/v1/webhooks/{made['id']}"),
        ("POST", f"/v1/webhooks/{made['id']}/test"),
        ("POST", f"/v1/webhooks/{made['id']}/rotate-secret"),
        ("GET", f"/v1/webhooks/{made['id']}/deliveries"),
    ):
        assert_error(await client.request(method, path, headers=other.auth("secret_live")), 404, "REQ_005")
        assert_error(await client.request(method, path, headers=tenant.auth("secret_test")), 404, "REQ_005")
    assert (await client.get("/v1/webhooks", headers=tenant.auth("secret_test"))).json()["data"] == []
    assert_error(await client.get("/v1/webhooks", headers=tenant.auth("publishable_live")), 403, "AUTH_003")
    r = await client.delete(f"/v1/webhooks/{made['id']}", headers=tenant.auth("secret_live"))
    assert r.status_code == 204
    assert_error(
        await client.get(f"/v1/webhooks/{made['id']}/deliveries", headers=tenant.auth("secret_live")), 404, "REQ_005"
    )


async def test_plan_caps_and_validation(client: Any, tenant: Tenant, receiver: WebhookReceiver, app: Any) -> None:
    for _ in range(2):
        await _create(client, tenant, receiver.url)
    error = assert_error(
        await client.post(
            "/v1/webhooks", json={"url": receiver.url, "events": EVENTS}, headers=tenant.auth("secret_test")
        ),
        403,
        "LIM_001",
    )
    assert error["details"] == {"cap": "webhooks", "limit": 2, "plan": "free"}
    await app.ctx.store.set_plan(tenant.email, Plan.BUILDER)
    await _create(client, tenant, receiver.url)
    cases = [
        ({"url": receiver.url, "events": []}, "events"),
        ({"url": receiver.url, "events": ["key.exposed", "key.exposed"]}, "events"),
        ({"url": receiver.url, "events": ["ping"]}, "events"),
        ({"url": "ftp://127.0.0.1/hook", "events": EVENTS}, "url"),
        ({"url": receiver.url, "events": EVENTS, "description": "a\u202eb"}, "description"),
    ]
    for body, field in cases:
        error = assert_error(
            await client.post("/v1/webhooks", json=body, headers=tenant.auth("secret_live")), 400, "REQ_001"
        )
        assert field in json.dumps(error), (body, error)


async def test_private_and_metadata_destinations_are_refused_by_default(tmp_path: Path) -> None:
    async with running_app(load_settings({}, data_dir=tmp_path), ManualClock()) as app, client_for(app) as client:
        tenant = await make_tenant(client)
        for url in (
            "http://example.com/hook",  # plain http
            "https://127.0.0.1/hook",
            "https://localhost/hook",  # resolved, then refused
            "https://10.1.2.3/hook",
            "https://169.254.169.254/latest/meta-data",
            "https://[::ffff:127.0.0.1]/hook",
            "https://user:pass@example.com/hook",
        ):
            r = await client.post(
                "/v1/webhooks", json={"url": url, "events": EVENTS}, headers=tenant.auth("secret_live")
            )
            error = assert_error(r, 400, "REQ_001")
            assert error["details"].get("field", "url") == "url", (url, error)
        assert (await client.get("/v1/webhooks", headers=tenant.auth("secret_live"))).json()["data"] == []
