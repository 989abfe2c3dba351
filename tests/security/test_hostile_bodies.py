"""Hostile request bodies are refused with their documented code, never a 5xx."""

from __future__ import annotations

import json

import pytest

REGISTER = "/v1/auth/register"
JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    "body",
    [
        b'{"email":"a\xb9b@example.com","password":"xxxxxxxxxxxxxxxx"}',  # found by fuzz/fuzz_bodies.py
        b'{"ema\xb9il":"a@example.com"}',
        b'{"email":"\xed\xa0\x80@example.com","password":"xxxxxxxxxxxxxxxx"}',  # UTF-8-encoded surrogate
    ],
)
async def test_invalid_utf8_inside_a_json_string_is_req_002(client, body):
    r = await client.post(REGISTER, content=body, headers=JSON)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "REQ_002"


async def test_oversized_body_is_413_req_004_with_the_limit(client):
    body = json.dumps({"email": "a@example.com", "password": "p" * 70_000}).encode()
    r = await client.post(REGISTER, content=body, headers=JSON)
    assert r.status_code == 413
    error = r.json()["error"]
    assert error["code"] == "REQ_004" and error["details"]["limit"] == 64 * 1024


@pytest.mark.parametrize("depth", [64, 1_000, 20_000, 40_000])
async def test_deeply_nested_bodies_are_refused_with_a_4xx_code(client, depth):
    """Arrays nested deeper than any model allows: a field error or a parse error, within 64 KiB."""
    body = b'{"email":' + b"[" * depth + b"]" * depth + b"}"
    r = await client.post(REGISTER, content=body, headers=JSON)
    expected = ("REQ_001", "REQ_002") if len(body) <= 64 * 1024 else ("REQ_004",)
    assert r.json()["error"]["code"] in expected, r.text
    assert 400 <= r.status_code < 500
