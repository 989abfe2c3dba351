"""Hostile text in query strings, e-mail addresses, names and labels (issue 15): a clear
``400 REQ_001`` naming the field, never a 500; one account per normalised address."""

from __future__ import annotations

import asyncio
import itertools
import time
import unicodedata

import pytest

import cli.main
from core.text import email_form, nfc, unsafe_character
from storage.models import Plan
from tests.api.test_envelope import assert_error, assert_meta
from tests.support import make_tenant

REGISTER, LOGIN, KEYS, USAGE = "/v1/auth/register", "/v1/auth/login", "/v1/auth/api-keys", "/v1/usage"
PASSWORD = "correct horse battery staple"
_numbers = itertools.count(1)
#: Refused in names, labels, addresses and query values (one of each kind).
UNSAFE = ["\x00", "\x07", "\x1b", "\n", "\x7f", "\x85", "\x9b", "\u2028", "\u202a", "\u202e", "\u2066", "\u2069"]


def _local() -> str:
    return f"h{next(_numbers)}-{time.monotonic_ns()}"


# --- GET /v1/usage?month= ------------------------------------------------------------------


@pytest.mark.parametrize(
    "month",
    [
        "0000-01",  # year 0 does not exist: was a 500
        "9999-12",  # the month after it does not: was a 500
        "1999-12",
        "3000-01",
        "2026-13",
        "2026-00",
        "2026-1",
        "26-01",
        "2026-01-01",
        "\u0662\u0660\u0662\u0666-11",  # Arabic-Indic digits: were read as 2026
        "\uff12\uff10\uff12\uff16-11",  # full-width digits
        " 2026-11",
    ],
)
async def test_usage_month_out_of_range_or_malformed_is_400(client, tenant, month):
    error = assert_error(
        await client.get(USAGE, params={"month": month}, headers=tenant.auth("secret_live")), 400, "REQ_001"
    )
    assert error["details"]["field"] == "month"


@pytest.mark.parametrize("month", ["2000-01", "2026-11", "2999-12"])
async def test_usage_month_at_the_ends_of_the_range(client, tenant, month):
    data = assert_meta(await client.get(USAGE, params={"month": month}, headers=tenant.auth("secret_live")))["data"]
    assert data["month"] == month and data["keys"] == []


async def test_usage_month_with_a_trailing_newline_is_400(client, tenant):
    # `$` matched before a final newline: the month came back as "2026-11\n"
    assert_error(await client.get(f"{USAGE}?month=2026-11%0A", headers=tenant.auth("secret_live")), 400, "REQ_001")


# --- control characters in any query value ---------------------------------------------------


@pytest.mark.parametrize("escaped", ["%00", "%07", "%1B%5B31m", "%0D%0A", "%7F", "%C2%85", "%C2%9B", "%E2%80%AE"])
async def test_control_characters_in_a_query_value_are_400(client, tenant, escaped):
    auth = tenant.auth("secret_live")
    error = assert_error(await client.get(f"{USAGE}?month=2026-11&note=x{escaped}y", headers=auth), 400, "REQ_001")
    assert error["details"]["field"] == "note"
    assert error["details"]["reason"].startswith("contains U+")
    error = assert_error(await client.get(f"/v1/health?q={escaped}"), 400, "REQ_001")
    assert error["details"]["field"] == "q"


async def test_control_characters_in_a_query_name_or_blank_value_are_400(client):
    assert_error(await client.get("/v1/health?a%00b=1"), 400, "REQ_001")
    assert_error(await client.get("/v1/health?%1B="), 400, "REQ_001")
    assert_error(await client.get("/v1/health?%1B"), 400, "REQ_001")


async def test_ordinary_query_values_pass(client):
    r = await client.get("/v1/health", params={"q": "zoë 🙂 a+b&c=d ✓", "empty": ""})
    assert r.status_code == 200, r.text


# --- e-mail addresses --------------------------------------------------------------------------


async def _register(client, email: str, name: str | None = None):
    body = {"email": email, "password": PASSWORD} | ({"name": name} if name is not None else {})
    return await client.post(REGISTER, json=body)


async def test_two_unicode_forms_of_one_address_are_one_account(app, client):
    local = _local()
    composed = f"jos\u00e9-{local}@exampl\u00e9.com"  # é as one code point
    decomposed = unicodedata.normalize("NFD", composed)  # e + U+0301
    assert composed != decomposed
    r = await _register(client, decomposed)
    assert r.status_code == 201, r.text
    assert r.json()["data"]["email"] == composed  # stored in NFC
    assert (await app.ctx.store.account_by_email(composed))[0].id == r.json()["data"]["id"]
    assert_error(await _register(client, composed), 409, "ACC_001")
    assert_error(await _register(client, composed.upper()), 409, "ACC_001")
    for form in (composed, decomposed, composed.upper()):
        login = await client.post(LOGIN, json={"email": form, "password": PASSWORD})
        assert login.status_code == 200, login.text
        assert login.json()["data"]["user"]["email"] == composed


async def test_address_is_case_insensitive_as_a_whole(client):
    local = _local()
    r = await _register(client, f"Mixed.{local}@Example.COM")
    assert r.status_code == 201, r.text
    assert r.json()["data"]["email"] == f"mixed.{local}@example.com"
    assert_error(await _register(client, f"MIXED.{local}@example.com"), 409, "ACC_001")
    assert_error(await _register(client, f"mixed.{local}@EXAMPLE.com"), 409, "ACC_001")


async def test_admin_set_plan_finds_the_account_by_another_form_of_its_address(app, client, capsys, monkeypatch):
    composed = f"ad\u00e8le-{_local()}@example.com"
    assert (await _register(client, composed)).status_code == 201
    typed = unicodedata.normalize("NFD", composed).upper()
    settings = app.ctx.settings
    # the app's store, whichever engine: its data directory, or its database (URL and secret from the environment)
    monkeypatch.setenv("QDAY_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("QDAY_SECRET_KEY", settings.secret_key)
    argv = ["admin", "set-plan", typed, "builder", "--data-dir", str(settings.data_dir)]
    assert await asyncio.to_thread(cli.main.main, argv) == 0, capsys.readouterr()  # the command runs its own loop
    assert (await app.ctx.store.account_by_email(composed))[0].plan is Plan.BUILDER


@pytest.mark.parametrize("char", UNSAFE)
async def test_register_refuses_control_and_bidi_characters_in_the_address(client, char):
    error = assert_error(await _register(client, f"a{char}b-{_local()}@example.com"), 400, "REQ_001")
    assert error["details"]["field"] == "email"


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\x00", "\x1b"])
async def test_login_refuses_control_and_bidi_characters_in_the_address(client, char):
    tenant = await make_tenant(client, ())
    local, domain = tenant.email.split("@")
    error = assert_error(
        await client.post(LOGIN, json={"email": f"{local}{char}@{domain}", "password": PASSWORD}), 400, "REQ_001"
    )
    assert error["details"]["field"] == "email"


async def test_bidi_override_cannot_make_a_lookalike_account(client):
    # "user@example.com" and the same text with an override wrapped round a part of it
    # render alike in many places; the second is refused, not a second account
    local = _local()
    assert (await _register(client, f"{local}@example.com")).status_code == 201
    assert_error(await _register(client, f"\u202d{local}\u202c@example.com"), 400, "REQ_001")


# --- account names, API-key names and watch-list labels ----------------------------------------


@pytest.mark.parametrize("char", UNSAFE)
async def test_register_refuses_control_and_bidi_characters_in_the_name(client, char):
    error = assert_error(await _register(client, f"{_local()}@example.com", f"Mallory{char}txt.exe"), 400, "REQ_001")
    assert error["details"]["field"] == "name"


async def test_register_stores_the_name_in_nfc(client):
    r = await _register(client, f"{_local()}@example.com", "Zoe\u0308 \U0001f642 \u0645\u0631\u062d\u0628\u0627")
    assert r.status_code == 201, r.text
    assert r.json()["data"]["name"] == "Zo\u00eb \U0001f642 \u0645\u0631\u062d\u0628\u0627"


@pytest.mark.parametrize("char", UNSAFE)
async def test_api_key_name_refuses_control_and_bidi_characters(client, tenant, char):
    body = {"name": f"ci{char}deploy", "type": "secret", "environment": "live"}
    error = assert_error(await client.post(KEYS, json=body, headers=tenant.auth("session")), 400, "REQ_001")
    assert error["details"]["field"] == "name"


async def test_api_key_name_is_stored_in_nfc(app, client, tenant):
    body = {"name": "cafe\u0301 \U0001f468\u200d\U0001f4bb", "type": "secret", "environment": "live"}  # ZWJ allowed
    r = await client.post(KEYS, json=body, headers=tenant.auth("session"))
    assert r.status_code == 201, r.text
    created = r.json()["data"]
    assert created["name"] == "caf\u00e9 \U0001f468\u200d\U0001f4bb"
    assert (await app.ctx.store.get_api_key(tenant.account_id, created["id"])).name == created["name"]


@pytest.mark.parametrize("char", ["\u202e", "\u2067", "\x00", "\x1b", "\x85", "\n"])
async def test_watch_label_refuses_control_and_bidi_characters(client, tenant, char):
    body = {"address": "0x" + "ce" * 20, "label": f"cold{char}wallet"}
    error = assert_error(
        await client.post("/v1/watchlist", json=body, headers=tenant.auth("secret_live")), 400, "REQ_001"
    )
    assert error["details"]["field"] == "label"


# --- the character rule itself -----------------------------------------------------------------


def test_the_rule_refuses_exactly_the_listed_ranges():
    refused = [c for c in map(chr, range(0x10000)) if unsafe_character(c)]
    expected = [
        *map(chr, range(0x00, 0x20)),
        *map(chr, range(0x7F, 0xA0)),
        "\u2028",
        "\u2029",
        *map(chr, range(0x202A, 0x202F)),
        *map(chr, range(0x2066, 0x206A)),
        *map(chr, range(0xD800, 0xE000)),
    ]
    assert refused == expected
    assert unsafe_character("tab\there") == "U+0009"
    assert nfc("e\u0301") == "\u00e9"


def test_the_address_form_is_idempotent():
    for code in [*range(0x80, 0x3000), 0x1E9E, 0x2126, 0x212A, 0x212B, 0xFB00, 0x10400]:
        once = email_form(chr(code))
        assert email_form(once) == once and nfc(once) == once, hex(code)
    assert email_form("JOSE\u0301@EXAMPLE.COM") == "jos\u00e9@example.com"
