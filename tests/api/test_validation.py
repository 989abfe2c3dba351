"""Strict request validation: clear 4xx errors naming the field, never a 500."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.test_envelope import assert_error
from tests.support import client_for

REGISTER = "/v1/auth/register"


async def test_unknown_field_is_named(client):
    error = assert_error(
        await client.post(REGISTER, json={"email": "x@example.com", "password": "p" * 12, "admin": True}),
        400,
        "REQ_001",
    )
    assert error["details"]["field"] == "admin"


async def test_missing_field_is_named(client):
    error = assert_error(await client.post(REGISTER, json={"email": "x@example.com"}), 400, "REQ_001")
    assert error["details"]["field"] == "password"


async def test_mistyped_field_is_named(client):
    error = assert_error(await client.post(REGISTER, json={"email": 5, "password": "p" * 12}), 400, "REQ_001")
    assert error["details"]["field"] == "email"
    assert "str" in error["details"]["reason"]


async def test_wrong_enum_value_is_named(client, tenant):
    error = assert_error(
        await client.post(
            "/v1/auth/api-keys",
            json={"name": "k", "type": "root", "environment": "live"},
            headers=tenant.auth("session"),
        ),
        400,
        "REQ_001",
    )
    assert error["details"]["field"] == "type"


async def test_invalid_json(client):
    error = assert_error(
        await client.post(REGISTER, content=b'{"email": ', headers={"content-type": "application/json"}), 400, "REQ_002"
    )
    assert "JSON" in error["message"]


async def test_empty_body(client):
    assert_error(await client.post(REGISTER, content=b"", headers={"content-type": "application/json"}), 400, "REQ_002")


async def test_json_array_instead_of_object(client):
    assert_error(await client.post(REGISTER, json=[1, 2]), 400, "REQ_001")


async def test_wrong_content_type(client):
    error = assert_error(
        await client.post(REGISTER, content=b"email=a", headers={"content-type": "application/x-www-form-urlencoded"}),
        415,
        "REQ_003",
    )
    assert error["details"]["received"] == "application/x-www-form-urlencoded"
    assert_error(await client.post(REGISTER, content=b"{}"), 415, "REQ_003")


async def test_content_type_with_charset_is_accepted(client):
    r = await client.post(
        REGISTER,
        content=json.dumps({"email": "bad", "password": "p" * 12}),
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert_error(r, 400, "REQ_001")


async def test_deeply_nested_body_is_rejected_cleanly(client):
    body = "[" * 5000 + "]" * 5000
    r = await client.post(REGISTER, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=json_values, path=st.sampled_from([REGISTER, "/v1/auth/login", "/v1/auth/api-keys"]))
async def test_arbitrary_json_never_gives_5xx(app, payload, path):
    async with client_for(app) as client:
        r = await client.post(path, json=payload)
    assert r.status_code < 500, r.text
    assert "error" in r.json()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200))
async def test_arbitrary_bytes_never_give_5xx(app, raw):
    async with client_for(app) as client:
        r = await client.post(REGISTER, content=raw, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, r.text
