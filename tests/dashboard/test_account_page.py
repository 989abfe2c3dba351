"""The account page over HTTP, on both engines: API keys created, rotated and deleted from its
forms act on the JSON API at once (a new secret shown once, never on a reload), refused forms
do nothing, another tenant's or another environment's key is out of reach, and the plan's caps,
rate limits and managed-custody usage on the page are what the API reports."""

from __future__ import annotations

import re
from typing import Any

import httpx

from storage.models import Plan
from tests.custody.support import requires_softhsm, shared_softhsm_conf
from tests.dashboard.support import PASSWORD, browser, csrf_of, logged_in
from tests.support import Tenant, make_tenant

shared_softhsm_conf()  # at collection: before any app of this process opens SoftHSM2

_SECRET = re.compile(r'id="secret-value"[^>]*value="([^"]+)"')
_KEY_ID = re.compile(r"Key id <code class=\"prefix\">(key_[0-9a-z]+)</code>")


async def _create(b: httpx.AsyncClient, name: str, kind: str = "secret", env: str = "live") -> tuple[str, str]:
    """Create a key with the page's form; its id and the secret the answer shows."""
    token = csrf_of((await b.get(f"/account?env={env}")).text)
    r = await b.post(f"/account/keys?env={env}", data={"name": name, "type": kind, "csrf": token})
    assert r.status_code == 201, r.text
    assert "it will not be shown again" in r.text
    secret, key_id = _SECRET.search(r.text), _KEY_ID.search(r.text)
    assert secret and key_id
    assert r.text.count(secret.group(1)) == 1  # in the marked box only
    return key_id.group(1), secret.group(1)


async def _status(client: httpx.AsyncClient, secret: str) -> int:
    """What an authenticated GET of the JSON API answers with this key."""
    r = await client.get("/v1/auth/api-keys", headers={"Authorization": f"Bearer {secret}"})
    return r.status_code


async def test_a_key_made_with_the_form_works_and_its_secret_is_shown_once(
    app: Any, client: httpx.AsyncClient, signed_in: tuple[httpx.AsyncClient, str]
) -> None:
    b, _ = signed_in
    empty = await b.get("/account")
    assert empty.status_code == 200 and "No API keys in the live environment yet" in empty.text
    key_id, secret = await _create(b, "deploy bot")
    r = await client.get("/v1/auth/api-keys", headers={"Authorization": f"Bearer {secret}"})
    assert r.status_code == 200
    listed = r.json()["data"]
    assert [(k["id"], k["name"], k["type"], k["environment"]) for k in listed] == [
        (key_id, "deploy bot", "secret", "live")
    ]
    reloaded = await b.get("/account")
    assert secret not in reloaded.text and "not be shown again" not in reloaded.text
    row = re.search(rf'<tr id="key-{key_id}">(.*?)</tr>', reloaded.text, re.S)
    assert row and f'<code class="prefix">{listed[0]["prefix"]}…</code>' in row.group(1)
    assert "<td>secret</td>" in row.group(1) and "<td>active</td>" in row.group(1)
    token = csrf_of(reloaded.text)
    for bad in ({"name": "", "type": "secret"}, {"name": "x", "type": "admin"}, {"name": "a\u202eb", "type": "secret"}):
        r = await b.post("/account/keys", data={**bad, "csrf": token})
        assert r.status_code == 400 and "That was not done" in r.text, bad
    again = await b.get("/account")
    assert again.text.count('<tr id="key-') == 1  # nothing made by the refused forms


async def test_rotating_keeps_the_old_secret_through_its_grace_then_refuses_it(
    app: Any, client: httpx.AsyncClient, signed_in: tuple[httpx.AsyncClient, str], clock: Any
) -> None:
    b, email = signed_in
    old_id, old = await _create(b, "rotating")
    token = csrf_of((await b.get("/account")).text)
    r = await b.post(f"/account/keys/{old_id}/rotate?env=live", data={"csrf": token})
    assert r.status_code == 201 and "rotated: its new secret" in r.text
    found = _SECRET.search(r.text)
    assert found and found.group(1) != old
    new = found.group(1)
    assert await _status(client, new) == 200 and await _status(client, old) == 200  # grace period
    page = (await b.get("/account")).text
    assert new not in page and "rotated: works until" in page
    r = await b.post(f"/account/keys/{old_id}/rotate", data={"csrf": token})
    assert r.status_code == 409 and "KEY_001" in r.text  # the API's code: already rotated
    clock.advance(app.ctx.settings.rotation_grace_seconds + 1)
    assert await _status(client, old) == 401 and await _status(client, new) == 200
    await logged_in(b, email, PASSWORD)  # the session has expired meanwhile
    page = (await b.get("/account")).text
    assert old_id not in page and page.count('<tr id="key-') == 1
    new_id = re.search(r'<tr id="key-(key_[0-9a-z]+)"', page)
    assert new_id
    r = await b.post(f"/account/keys/{new_id.group(1)}/delete", data={"csrf": csrf_of(page)})
    assert r.status_code == 303 and r.headers["location"] == "/account?env=live"
    assert await _status(client, new) == 401
    assert "No API keys in the live environment yet" in (await b.get("/account")).text


async def test_forms_without_the_token_change_nothing(
    app: Any, client: httpx.AsyncClient, signed_in: tuple[httpx.AsyncClient, str]
) -> None:
    b, _ = signed_in
    key_id, secret = await _create(b, "kept")
    for path, data in (
        ("/account/keys", {"name": "sneaky", "type": "secret"}),
        (f"/account/keys/{key_id}/rotate", {}),
        (f"/account/keys/{key_id}/delete", {}),
        (f"/account/keys/{key_id}/delete", {"csrf": "0" * 64}),
    ):
        r = await b.post(path, data=data)
        assert r.status_code == 403 and "secret-value" not in r.text, path
    assert await _status(client, secret) == 200
    r = await client.get("/v1/auth/api-keys", headers={"Authorization": f"Bearer {secret}"})
    assert [(k["id"], k["name"]) for k in r.json()["data"]] == [(key_id, "kept")]  # not rotated, nothing added


async def test_another_tenants_key_is_not_found_and_keeps_working(
    app: Any, client: httpx.AsyncClient, signed_in: tuple[httpx.AsyncClient, str]
) -> None:
    b, _ = signed_in
    other: Tenant = await make_tenant(client)
    theirs = other.keys["secret_live"]["id"]
    token = csrf_of((await b.get("/account")).text)
    for key_id in (theirs, "key_doesnotexist"):
        for action in ("rotate", "delete"):
            r = await b.post(f"/account/keys/{key_id}/{action}", data={"csrf": token})
            assert r.status_code == 404 and "REQ_005" in r.text and "That was not done" in r.text, (key_id, action)
    assert await _status(client, other.key("secret_live")) == 200
    r = await client.get("/v1/auth/api-keys", headers=other.auth("secret_live"))
    assert [k["id"] for k in r.json()["data"]] == [theirs]  # not rotated either
    assert theirs not in (await b.get("/account")).text


async def test_test_and_live_keys_stay_apart(
    app: Any, client: httpx.AsyncClient, signed_in: tuple[httpx.AsyncClient, str]
) -> None:
    b, _ = signed_in
    live_id, live = await _create(b, "live one")
    test_id, test = await _create(b, "test one", "publishable", env="test")
    live_page, test_page = (await b.get("/account")).text, (await b.get("/account?env=test")).text
    assert live_id in live_page and test_id not in live_page
    assert test_id in test_page and live_id not in test_page and "<td>publishable</td>" in test_page
    r = await client.get("/v1/auth/api-keys", headers={"Authorization": f"Bearer {live}"})
    assert [k["id"] for k in r.json()["data"]] == [live_id]  # a live key sees live keys only
    assert await _status(client, test) == 403  # a publishable key: scanning only (AUTH_003)
    r = await b.post(f"/account/keys/{live_id}/delete?env=test", data={"csrf": csrf_of(test_page)})
    assert r.status_code == 403 and "AUTH_003" in r.text  # the test page cannot reach a live key
    assert await _status(client, live) == 200


def _cells(page: str, table: str) -> dict[str, list[str]]:
    """A page table's rows by their header cell: the text of their other cells."""
    body = re.search(rf'<table id="{table}">(.*?)</table>', page, re.S)
    assert body, table
    rows = re.findall(r'<th scope="row">(.*?)</th>(.*?)</tr>', body.group(1), re.S)
    return {
        head.strip(): [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", cells, re.S)]
        for head, cells in rows
    }


async def test_the_plan_caps_and_rate_limits_are_what_the_api_reports(app: Any, client: httpx.AsyncClient) -> None:
    tenant = await make_tenant(client, ("secret_live", "secret_test"))
    await app.ctx.store.set_plan(tenant.email, Plan.BUILDER)
    live, test = tenant.auth("secret_live"), tenant.auth("secret_test")
    limits: dict[str, str] = {}  # rate group -> X-RateLimit-Limit the API answered
    for i in range(3):
        r = await client.post("/v1/watchlist", json={"address": f"0x{i + 1:040x}", "chain": "ethereum"}, headers=live)
        assert r.status_code == 201, r.text
        limits["account"] = r.headers["x-ratelimit-limit"]
    r = await client.post("/v1/watchlist", json={"address": f"0x{9:040x}", "chain": "ethereum"}, headers=test)
    assert r.status_code == 201, r.text
    hook = {"url": "https://93.184.216.34/hook", "events": ["key.exposed"]}
    assert (await client.post("/v1/webhooks", json=hook, headers=live)).status_code == 201
    rotated = await client.post(f"/v1/auth/api-keys/{tenant.keys['secret_test']['id']}/rotate", headers=test)
    assert rotated.status_code == 201, rotated.text  # the rotated-out key is not a current one
    limits["auth"] = rotated.headers["x-ratelimit-limit"]
    limits["scan"] = (await client.post("/v1/scan/wallet", json={}, headers=live)).headers["x-ratelimit-limit"]
    limits["keygen"] = (await client.post("/v1/keys/generate", json={}, headers=live)).headers["x-ratelimit-limit"]
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        page = (await b.get("/account")).text
    assert '<span id="plan">builder</span>' in page and "Rate limits of the builder plan" in page
    caps = _cells(page, "caps")
    assert caps == {
        "Watched addresses": ["4", "10,000", "0%"],
        "API keys": ["2", "20", "10%"],
        "Webhook endpoints": ["1", "10", "10%"],
    }
    rates = _cells(page, "rate-limits")
    assert {group: rates[group][0].replace(",", "") for group in limits} == limits
    assert limits == {"account": "300", "auth": "10", "scan": "60", "keygen": "30"}  # the builder column
    assert "POST /v1/scan/wallet" in page and "GET /v1/health" not in page  # authenticated groups only
    assert 'id="chart-caps"' in page and "API keys: 100 (in use 10, left 90)" in page


@requires_softhsm
async def test_managed_usage_this_month_is_what_the_api_reports(app: Any, client: httpx.AsyncClient) -> None:
    tenant = await make_tenant(client)
    await app.ctx.store.set_plan(tenant.email, Plan.PRO)
    live = tenant.auth("secret_live")
    managed = {"algorithm": "ml-dsa-44", "chain": "ethereum", "custody": "managed"}
    r = await client.post("/v1/keys/generate", json=managed, headers=live)
    assert r.status_code == 201, r.text
    sign = {"key_id": r.json()["data"]["id"], "message": b"hello".hex(), "algorithm": "ml-dsa-44"}
    for _ in range(2):
        assert (await client.post("/v1/sign/managed", json=sign, headers=live)).status_code == 200
    usage = await client.get("/v1/usage", headers=live)
    reported = usage.json()["data"]
    assert (reported["activeKeys"], reported["signatures"], reported["billableUnits"]) == (1, 2, 2)
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        page, test_page = (await b.get("/account")).text, (await b.get("/account?env=test")).text
    shown = {name: int(cells[0]) for name, cells in _cells(page, "managed-usage").items()}
    assert shown == {
        "Active managed keys": reported["activeKeys"],
        "Key-months": reported["keyMonths"],
        "Signatures": reported["signatures"],
        "Blocks of 10,000 signatures": reported["signatureBlocks"],
        "Billable units": reported["billableUnits"],
    }
    assert f"Managed custody in {reported['month']} (live)" in page and "needs the Pro plan" not in page
    assert {int(cells[0]) for cells in _cells(test_page, "managed-usage").values()} == {0}  # live only
