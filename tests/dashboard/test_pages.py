"""The dashboard over HTTP, on both engines: its cookie session (HttpOnly, SameSite=Strict,
Secure), CSRF refusals (another origin, a missing or foreign token), the security headers
on every page, the portfolio's aggregates, filters, pages and CSV export, and clear pages
instead of errors for bad input."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import httpx

from api.dashboard.frame import CONTENT_SECURITY_POLICY
from api.dashboard.portfolio import PAGE_SIZE
from chains.environment import Environment
from core.ids import new_id
from services.pagination import PageRequest
from services.portfolio import portfolio_filter
from storage.models import ScanResult
from storage.sql_scans import SqlScanStore
from tests.dashboard.support import PAGES, PASSWORD, browser, csrf_of, logged_in, watched
from tests.support import make_tenant


async def test_registration_logs_in_with_a_strict_cookie(app: Any) -> None:
    async with browser(app) as b:
        assert (await b.get("/portfolio")).headers["location"] == "/"  # not logged in yet
        page = await b.get("/")
        assert page.status_code == 200 and 'type="password"' in page.text
        r = await b.post("/register", data={"email": f"{new_id('d')}@example.com", "password": PASSWORD})
        cookie = r.headers["set-cookie"]
        assert cookie.startswith("qday_session=")
        for attribute in ("HttpOnly", "SameSite=Strict", "Secure", "Path=/"):
            assert attribute.lower() in cookie.lower()
        portfolio = await b.get("/portfolio")
        assert portfolio.status_code == 200 and "Watched addresses" in portfolio.text


async def test_every_page_forbids_other_origins(app: Any, signed_in: tuple[httpx.AsyncClient, str]) -> None:
    b, _ = signed_in
    for path in (*PAGES.values(), "/static/qday.css", "/portfolio.csv"):
        r = await b.get(path)
        assert r.status_code == 200, path
        assert r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
        assert r.headers["cache-control"] == "no-store" or path == "/static/qday.css"
        if r.headers["content-type"].startswith("text/html"):
            # nothing loaded from elsewhere: another origin is only ever a link's target
            assert not re.search(r"(src|action|srcset|data)=\"(https?:)?//", r.text), path
            assert not re.search(r"<(?!a )[^>]*href=\"(https?:)?//", r.text), path
            assert "style=" not in r.text and "<script" not in r.text, path  # nothing inline for the policy
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY and "http" not in CONTENT_SECURITY_POLICY


async def test_forms_from_another_origin_or_without_the_token_are_refused(
    app: Any, signed_in: tuple[httpx.AsyncClient, str]
) -> None:
    b, email = signed_in
    token = csrf_of((await b.get("/portfolio")).text)
    watch = {"address": "0x" + "11" * 20, "chain": "ethereum", "csrf": token}
    r = await b.post("/portfolio/watch", data=watch, headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and "site&#39;s own pages" in r.text
    r = await b.post("/portfolio/watch", data={**watch, "csrf": "0" * 64})
    assert r.status_code == 403 and "security token" in r.text
    r = await b.post("/logout", data={})
    assert r.status_code == 403
    async with browser(app) as other:  # another session's token does not pass for this one
        await other.post("/register", data={"email": f"{new_id('o')}@example.com", "password": PASSWORD})
        foreign = csrf_of((await other.get("/portfolio")).text)
    assert foreign != token
    assert (await b.post("/portfolio/watch", data={**watch, "csrf": foreign})).status_code == 403
    r = await b.post("/login", data={"email": email, "password": PASSWORD}, headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and "set-cookie" not in r.headers
    stored = await app.ctx.database.fetch_one("SELECT count(*) FROM watchlist WHERE address = ?", (watch["address"],))
    assert stored == (0,)  # nothing refused was done


async def test_login_logout_and_wrong_passwords(app: Any, signed_in: tuple[httpx.AsyncClient, str]) -> None:
    b, email = signed_in
    token = csrf_of((await b.get("/portfolio")).text)
    r = await b.post("/logout", data={"csrf": token})
    assert r.status_code == 303 and r.headers["location"] == "/"
    assert (await b.get("/portfolio")).headers["location"] == "/"
    r = await b.post("/login", data={"email": email, "password": "wrong password, long enough"})
    assert r.status_code == 401 and "invalid email or password" in r.text and "set-cookie" not in r.headers
    r = await b.post("/login", data={"email": email, "password": PASSWORD})
    assert r.status_code == 303
    assert (await b.get("/portfolio")).status_code == 200
    r = await b.post("/register", data={"email": email, "password": "short"})
    assert r.status_code == 400 and "at least 12 characters" in r.text


async def test_the_portfolio_pages_filters_and_exports(app: Any, client: httpx.AsyncClient) -> None:
    tenant = await make_tenant(client)
    await watched(app, tenant.account_id, [("ethereum", f"0x{i + 1:040x}", None) for i in range(PAGE_SIZE + 5)])
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        first = await b.get("/portfolio")
        assert f'<strong id="total-addresses">{PAGE_SIZE + 5}</strong>' in first.text
        assert first.text.count('<code class="address"') == PAGE_SIZE
        cursor = re.search(r"cursor=([^\"&]+)", first.text)
        assert cursor is not None
        second = await b.get(f"/portfolio?cursor={cursor.group(1)}")
        assert second.text.count('<code class="address"') == 5
        assert "<svg" in first.text and 'role="img"' in first.text
        only = await b.get("/portfolio?chain=bitcoin")
        assert "No addresses match the filter" in only.text
        for bad in ("/portfolio?chain=dogecoin", "/portfolio?level=W9", "/portfolio?cursor=nonsense"):
            r = await b.get(bad)
            assert r.status_code == 400 and "That was not done" in r.text, bad
        export = await b.get("/portfolio.csv")
        assert export.headers["content-type"].startswith("text/csv")
        rows = list(csv.reader(io.StringIO(export.text)))
        assert rows[0][:4] == ["chain", "address", "label", "level"] and len(rows) == PAGE_SIZE + 6
        assert {r[3] for r in rows[1:]} == {"unscored"}
        test_env = await b.get("/portfolio?env=test")  # the other environment: nothing watched there
        assert '<strong id="total-addresses">0</strong>' in test_env.text


def _scored(account_id: str, chain: str, address: str, level: str, balance: str, usd: float, at: Any) -> ScanResult:
    body = {"riskScore": level, "publicKeyExposed": True, "balanceAtRisk": balance, "balanceAtRiskUsd": usd}
    return ScanResult(account_id, Environment.LIVE, chain, address, json.dumps(body), 60, level, "v", at, at, "api")


async def test_aggregates_by_chain_and_level_are_summed_in_the_store(app: Any, client: httpx.AsyncClient) -> None:
    tenant = await make_tenant(client)
    store = SqlScanStore(app.ctx.database)
    now = app.ctx.clock.now()
    entries = [
        ("ethereum", "0x" + "a1" * 20, "W3", "1.5 ETH", 4500.0),
        ("ethereum", "0x" + "a2" * 20, "W3", "0.25 ETH", 750.0),
        ("bitcoin", "bc1qthklh702txwafc72d2qtxv7ywt7sk0mfy3mw6y", "W1", "0.003 BTC", 270.5),
    ]
    await watched(app, tenant.account_id, [(chain, address, None) for chain, address, *_ in entries])
    await store.save_results([_scored(tenant.account_id, c, a, lv, b, u, now) for c, a, lv, b, u in entries])
    cells = await app.ctx.portfolio.overview(
        tenant.account_id, Environment.LIVE, portfolio_filter(None, None), PageRequest(10)
    )
    got = {(c.chain, c.level): (c.addresses, round(c.balance_usd, 2), round(c.balance_native, 8)) for c in cells.cells}
    assert got == {("bitcoin", "W1"): (1, 270.5, 0.003), ("ethereum", "W3"): (2, 5250.0, 1.75)}
    only = await app.ctx.portfolio.overview(
        tenant.account_id, Environment.LIVE, portfolio_filter(None, "W3"), PageRequest(10)
    )
    assert only.addresses == 2 and {r.chain for r in only.page.items} == {"ethereum"}
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        page = (await b.get("/portfolio")).text
        assert '<strong id="total-usd">$5,520.50</strong>' in page
        assert page.count('class="badge level-W3">W3</span>') == 3  # the table of cells and two rows
        assert "1.5 ETH" in page and "Balance at risk (USD) by chain and W-level" in page


async def test_exported_labels_cannot_run_as_spreadsheet_formulas(app: Any, client: httpx.AsyncClient) -> None:
    tenant = await make_tenant(client)
    label = '=HYPERLINK("http://evil.example","x")'
    await watched(app, tenant.account_id, [("ethereum", "0x" + "b1" * 20, label)])
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        rows = list(csv.reader(io.StringIO((await b.get("/portfolio.csv")).text)))
    assert rows[1][2] == "'" + label
