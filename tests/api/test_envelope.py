"""Every response carries the spec's envelope, a request id and rate-limit headers."""

from __future__ import annotations

import re
from datetime import datetime

REQUEST_ID = re.compile(r"^req_[0-9a-z]+$")


def assert_meta(response) -> dict:
    body = response.json()
    meta = body["meta"]
    assert REQUEST_ID.match(meta["requestId"])
    assert response.headers["x-request-id"] == meta["requestId"]
    assert meta["timestamp"].endswith("Z")
    datetime.fromisoformat(meta["timestamp"])
    for header in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
        assert response.headers[header].isdigit(), header
    return body


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = assert_meta(response)
    assert set(body) == {"error", "meta"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    return body["error"]


async def test_health_success_envelope(client):
    r = await client.get("/v1/health")
    assert r.status_code == 200
    body = assert_meta(r)
    assert set(body) == {"data", "meta"}
    assert body["data"]["status"] == "ok"


async def test_unknown_path_is_enveloped_404_naming_the_path(client):
    error = assert_error(await client.get("/v1/nope"), 404, "REQ_005")
    assert "GET /v1/nope" in error["message"] and error["details"]["path"] == "/v1/nope"
    assert "/nowhere" in assert_error(await client.get("/nowhere"), 404, "REQ_005")["message"]


async def test_the_home_page_links_the_docs_and_the_dagster_ui(client):
    for path in ("/", "/v1"):
        r = await client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert 'href="/docs"' in r.text and 'href="/v1/openapi.json"' in r.text
        assert 'href="http://127.0.0.1:3000"' in r.text  # the Dagster UI of qday up (QDAY_DAGSTER_URL)
        assert "<script" not in r.text and "https://" not in r.text  # nothing loaded from elsewhere


async def test_wrong_method_is_enveloped_405(client):
    assert "GET /v1/auth/register" in assert_error(await client.get("/v1/auth/register"), 405, "REQ_006")["message"]
    assert_error(await client.put("/v1/health"), 405, "REQ_006")


async def test_oversized_body_is_enveloped_413(client):
    body = b'{"email": "' + b"a" * 70_000 + b'"}'
    error = assert_error(
        await client.post("/v1/auth/register", content=body, headers={"content-type": "application/json"}),
        413,
        "REQ_004",
    )
    assert error["details"]["limit"] == 65536


async def test_request_ids_are_unique(client):
    ids = {(await client.get("/v1/health")).headers["x-request-id"] for _ in range(20)}
    assert len(ids) == 20


async def test_internal_errors_are_enveloped_500(app, client, monkeypatch):
    async def broken(*_args, **_kwargs):
        raise RuntimeError("boom: secret detail that must not leak")

    monkeypatch.setattr(app.ctx.accounts, "stored_password_hash", broken)
    error = assert_error(
        await client.post("/v1/auth/login", json={"email": "a@example.com", "password": "x" * 12}), 500, "SRV_001"
    )
    assert "boom" not in error["message"]
