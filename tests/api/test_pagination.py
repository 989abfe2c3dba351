"""Cursor pagination of every list endpoint (issue 15): ``?limit=`` and ``&cursor=`` in,
``meta.nextCursor`` out, keyset on (created_at, id) so pages are stable while rows are
added; bad values are REQ_001; the SDK follows the cursors."""

from __future__ import annotations

import base64
from types import GenericAlias

import httpx
import pytest

from api.app import all_endpoints
from chains.environment import Environment
from qday_client import QdayClient, RequestError, models
from storage.models import Plan, WatchedDescriptor
from storage.sql_scans import SqlScanStore
from tests.api.test_envelope import assert_error, assert_meta
from tests.custody.support import requires_softhsm, shared_softhsm_conf
from tests.pipelines.support import evm_address
from tests.support import client_for

shared_softhsm_conf()  # at collection: before any app of this process opens SoftHSM2

WATCH, KEYS, PQ_KEYS = "/v1/watchlist", "/v1/auth/api-keys", "/v1/keys"
#: Every endpoint answering a list; a new one must be added here (and be paged).
WALLETS = "/v1/watchlist/descriptors"
LIST_ENDPOINTS = {
    WATCH,
    KEYS,
    PQ_KEYS,
    "/v1/keys/{id}/events",
    WALLETS,
    "/v1/webhooks",
    "/v1/webhooks/{webhook_id}/deliveries",
}


async def _page(client, path: str, headers: dict[str, str], **params) -> tuple[list[dict], str | None]:
    r = await client.get(path, params=params, headers=headers)
    assert r.status_code == 200, r.text
    body = assert_meta(r)
    assert set(body["meta"]) == {"requestId", "timestamp", "nextCursor"}
    return body["data"], body["meta"]["nextCursor"]


async def _all(client, path: str, headers: dict[str, str], limit: int) -> tuple[list[dict], int]:
    items: list[dict] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": limit} if cursor is None else {"limit": limit, "cursor": cursor}
        page, cursor = await _page(client, path, headers, **params)
        pages += 1
        assert len(page) <= limit
        items += page
        if cursor is None:
            return items, pages


async def _watch(client, tenant, n: int, key: str = "secret_live") -> dict:
    r = await client.post(WATCH, json={"address": evm_address(n)}, headers=tenant.auth(key))
    assert r.status_code == 201, r.text
    return r.json()["data"]


def test_every_list_endpoint_is_declared_paged():
    lists = {e.path for e in all_endpoints() if isinstance(e.response, GenericAlias) and e.response.__origin__ is list}
    assert lists == LIST_ENDPOINTS
    for endpoint in all_endpoints():
        if endpoint.path in lists and endpoint.method == "GET":
            assert "REQ_001" in endpoint.errors and "cursor" in endpoint.description


async def test_openapi_documents_limit_cursor_and_next_cursor(client):
    doc = (await client.get("/v1/openapi.json")).json()
    for path in LIST_ENDPOINTS:
        op = doc["paths"][path]["get"]
        params = {p["name"]: p for p in op["parameters"] if p["in"] == "query"}
        assert params["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}
        assert params["cursor"]["schema"]["type"] == "string"
        meta = op["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["meta"]
        assert meta == {"$ref": "#/components/schemas/PageMeta"}
    page_meta = doc["components"]["schemas"]["PageMeta"]
    assert set(page_meta["properties"]) == {"requestId", "timestamp", "nextCursor"}
    assert "nextCursor" in page_meta["required"]  # present, null on the last page
    assert "nextCursor" not in doc["components"]["schemas"]["Meta"]["properties"]


async def test_watchlist_pages_follow_the_cursor_to_the_end(client, tenant, clock):
    added = []
    for n in range(5):
        added.append(await _watch(client, tenant, 100 + n))
        clock.advance(1)
    headers = tenant.auth("secret_live")
    first, cursor = await _page(client, WATCH, headers, limit=2)
    assert [w["id"] for w in first] == [a["id"] for a in added[:2]] and cursor
    second, cursor = await _page(client, WATCH, headers, limit=2, cursor=cursor)
    assert [w["id"] for w in second] == [a["id"] for a in added[2:4]] and cursor
    last, cursor = await _page(client, WATCH, headers, limit=2, cursor=cursor)
    assert [w["id"] for w in last] == [added[4]["id"]] and cursor is None
    everything, end = await _page(client, WATCH, headers)  # default limit 100: one page
    assert [w["id"] for w in everything] == [a["id"] for a in added] and end is None
    exact, end = await _page(client, WATCH, headers, limit=5)  # a page ending at the end: no next page
    assert len(exact) == 5 and end is None


async def test_pages_are_stable_while_rows_are_added_and_removed(client, tenant, clock):
    added = []
    for n in range(6):
        added.append(await _watch(client, tenant, 200 + n))
        clock.advance(1)
    headers = tenant.auth("secret_live")
    first, cursor = await _page(client, WATCH, headers, limit=3)
    assert [w["id"] for w in first] == [a["id"] for a in added[:3]]
    # Meanwhile: an entry of the page already read goes, and a new one arrives. With
    # OFFSET the next page would skip added[3]; by keyset it starts right after added[2].
    assert (await client.delete(f"{WATCH}/{added[0]['id']}", headers=headers)).status_code == 204
    newer = await _watch(client, tenant, 299)
    second, cursor = await _page(client, WATCH, headers, limit=3, cursor=cursor)
    assert [w["id"] for w in second] == [a["id"] for a in added[3:6]] and cursor is not None
    third, cursor = await _page(client, WATCH, headers, limit=3, cursor=cursor)
    assert [w["id"] for w in third] == [newer["id"]] and cursor is None


async def test_ties_on_created_at_are_ordered_by_id(client, tenant):
    # The clock does not move: every entry has the same created_at, and the id decides.
    ids = sorted([(await _watch(client, tenant, 300 + n))["id"] for n in range(5)])
    items, pages = await _all(client, WATCH, tenant.auth("secret_live"), 2)
    assert [w["id"] for w in items] == ids and pages == 3


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "abc", "1.5", "1e2", "٣", "9" * 5000, "0" * 5000 + "1"])
async def test_bad_limit_is_req_001(client, tenant, limit):
    error = assert_error(
        await client.get(WATCH, params={"limit": limit}, headers=tenant.auth("secret_live")), 400, "REQ_001"
    )
    assert error["details"]["field"] == "limit"


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "!!!not base64!!!",
        _b64("garbage"),
        _b64("w|not a time|wat_1"),
        _b64("w|2026-01-01T00:00:00|wat_1"),  # no time zone
        _b64("w|2026-01-01T00:00:00.000000+00:00|"),
        _b64("k|2026-01-01T00:00:00.000000+00:00|key_1"),  # another list's cursor
        _b64("w|2026-01-01T00:00:00.000000+00:00|wat_1|extra"),
        "x" * 201,
        "AA",  # one zero byte
        "/w==",  # not UTF-8
    ],
)
async def test_bad_cursor_is_req_001(client, tenant, cursor):
    error = assert_error(
        await client.get(WATCH, params={"cursor": cursor}, headers=tenant.auth("secret_live")), 400, "REQ_001"
    )
    assert error["details"]["field"] == "cursor"


async def test_api_keys_are_paged_for_the_session_and_a_key(client, tenant, clock):
    created = [tenant.keys["secret_live"]["id"]]
    for n, environment in enumerate(("test", "live", "test")):
        clock.advance(1)
        r = await client.post(
            KEYS, json={"name": f"k{n}", "type": "secret", "environment": environment}, headers=tenant.auth("session")
        )
        assert r.status_code == 201, r.text
        created.append(r.json()["data"]["id"])
    items, pages = await _all(client, KEYS, tenant.auth("session"), 2)
    assert [k["id"] for k in items] == created and pages == 2
    live, _ = await _all(client, KEYS, tenant.auth("secret_live"), 1)  # a key sees its environment only
    assert [k["id"] for k in live] == [created[0], created[2]]
    error = assert_error(await client.get(KEYS, params={"limit": "0"}, headers=tenant.auth("session")), 400, "REQ_001")
    assert error["details"]["field"] == "limit"


async def test_pq_keys_are_paged(client, tenant, clock):
    generated = []
    for _ in range(3):
        clock.advance(1)
        r = await client.post(
            "/v1/keys/generate",
            json={"algorithm": "ml-dsa-44", "chain": "ethereum"},
            headers=tenant.auth("secret_live"),
        )
        assert r.status_code == 201, r.text
        generated.append(r.json()["data"]["id"])
    items, pages = await _all(client, PQ_KEYS, tenant.auth("secret_live"), 2)
    assert [k["id"] for k in items] == generated and pages == 2


@requires_softhsm
async def test_managed_key_events_are_paged_in_log_order(app, client, tenant):
    await app.ctx.store.set_plan(tenant.email, Plan.PRO)
    headers = tenant.auth("secret_live")
    r = await client.post(
        "/v1/keys/generate", json={"algorithm": "ml-dsa-44", "chain": "ethereum", "custody": "managed"}, headers=headers
    )
    assert r.status_code == 201, r.text
    key_id = r.json()["data"]["id"]
    for _ in range(2):
        assert (await client.delete(f"/v1/keys/{key_id}", headers=headers)).status_code == 200
        assert (await client.post(f"/v1/keys/{key_id}/cancel-deletion", headers=headers)).status_code == 200
    path = f"/v1/keys/{key_id}/events"
    items, pages = await _all(client, path, headers, 2)
    assert [e["type"] for e in items] == [
        "created",
        "deletion_scheduled",
        "deletion_cancelled",
        "deletion_scheduled",
        "deletion_cancelled",
    ]
    assert pages == 3
    whole, end = await _page(client, path, headers)
    assert whole == items and end is None
    bad = _b64(f"e|{items[0]['id']}|x")
    assert_error(await client.get(path, params={"cursor": bad}, headers=headers), 400, "REQ_001")


async def test_watched_wallets_are_paged(app, client, tenant, clock):
    """Wallets stored directly (watching one scans it, which needs a chain source)."""
    store = SqlScanStore(app.ctx.database).descriptor_watch()
    for n in range(5):
        entry = WatchedDescriptor(
            f"wdw_{n}", tenant.account_id, Environment.LIVE, f"wpkh(key{n})", None, 20, 1, None, None, clock.now()
        )
        assert await store.add(entry, cap=1_000) is not None
        clock.advance(1)
    headers = tenant.auth("secret_live")
    items, pages = await _all(client, WALLETS, headers, 2)
    assert [w["id"] for w in items] == [f"wdw_{n}" for n in range(5)] and pages == 3
    bad = _b64("w|2026-01-01T00:00:00Z|x")  # a watch-list cursor is not a wallets cursor
    assert_error(await client.get(WALLETS, params={"cursor": bad}, headers=headers), 400, "REQ_001")


async def test_sdk_follows_cursors(app, tenant):
    client = client_for(app)
    async with client:
        added = [(await _watch(client, tenant, 400 + n))["id"] for n in range(5)]
    transport = httpx.ASGITransport(app=app, client=("127.0.9.9", 40000))
    async with QdayClient(tenant.key("secret_live"), "http://qday.test", transport=transport) as sdk:
        assert sorted(w.id for w in await sdk.watchlist(page_size=2)) == sorted(added)
        page = await sdk.watchlist_page(limit=3)
        assert isinstance(page, models.Page) and len(page.items) == 3 and page.next_cursor
        following = await sdk.watchlist_page(limit=3, cursor=page.next_cursor)
        assert len(following.items) == 2 and following.next_cursor is None
        assert {w.id for w in page.items + following.items} == set(added)
        keys = await sdk.list_api_keys(page_size=1)
        assert [k.id for k in keys] == [tenant.keys["secret_live"]["id"]]
        assert await sdk.list_keys(page_size=5) == []
        with pytest.raises(RequestError) as bad:
            await sdk.watchlist_page(limit=0)
        assert bad.value.code == "REQ_001" and bad.value.details["field"] == "limit"


async def test_other_responses_have_no_next_cursor(client, tenant):
    entry = await _watch(client, tenant, 500)
    body = assert_meta(await client.post(WATCH, json={"address": evm_address(500)}, headers=tenant.auth("secret_live")))
    assert body["data"]["id"] == entry["id"] and set(body["meta"]) == {"requestId", "timestamp"}
