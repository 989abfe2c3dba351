"""The dashboard in a real browser (Debian's Chromium, Playwright) against ``qday serve`` on
127.0.0.1 and an anvil node as ethereum: register with the form, watch an address whose key
a transaction revealed, see it scored with its W-level and its evidence, a chart drawn, no
page or console error, and no request leaving the origin; the same at phone width; the
keyboard reaches the skip link first."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser

from core.ids import new_id
from tests.anvil import Anvil, running_anvil
from tests.dashboard.browser import CHROMIUM, DESKTOP, MISSING_CHROMIUM, PHONE, chromium, register, watch, watched_page
from tests.dashboard.screenshots import NAMES, exposed_address, take
from tests.dashboard.support import PAGES
from tests.support import ServerProcess

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def ethereum() -> Iterator[Anvil]:
    """An anvil node with ethereum's chain id (the client checks it)."""
    yield from running_anvil(1)


@pytest.fixture(scope="module")
def server(ethereum: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        tmp_path_factory.mktemp("dashboard"),
        env={"QDAY_ETHEREUM_RPC_URL": ethereum.url, "QDAY_FAMILY_CHAINS": "ethereum"},
    )
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(MISSING_CHROMIUM)
    with chromium() as b:
        yield b


def test_a_watched_address_is_scored_and_charted_without_leaving_the_origin(
    server: ServerProcess, browser: Browser, ethereum: Anvil
) -> None:
    address = exposed_address(ethereum)  # a signed transfer: its key is on chain
    origin = server.base_url
    with watched_page(browser, origin, DESKTOP) as (page, seen):
        register(page, origin, f"{new_id('b')}@example.com", PASSWORD)
        watch(page, address, "ethereum")
        row = page.locator("#addresses tbody tr").first
        assert re.fullmatch(r"W[1-4]", row.locator(".badge").inner_text())
        text = row.inner_text()
        assert address[:8] in text and "exposed" in text and "nonce on ethereum" in text
        bars = page.locator("#chart-levels rect.bar")
        box = bars.first.bounding_box()
        assert bars.count() == 1 and box is not None and box["width"] > 0
        assert page.locator("#chart-balance").is_visible()
        assert seen.errors == [] and seen.foreign == []
        assert any(url.endswith("/static/qday.css") for url in seen.requests)  # the stylesheet loaded
        with page.expect_navigation():  # the address's own page: its level, factors and evidence
            row.locator("a", has_text=address[:8]).click()
        assert page.url.endswith(f"/address/ethereum/{address}?env=live")
        assert re.fullmatch(r"W[1-4]", page.locator(".badge").first.inner_text())
        assert "nonce" in page.locator("main").inner_text()
        assert seen.errors == [] and seen.foreign == []


def test_every_page_fits_a_phone_and_the_keyboard_starts_at_the_skip_link(
    server: ServerProcess, browser: Browser, ethereum: Anvil
) -> None:
    origin = server.base_url
    address = exposed_address(ethereum)
    with watched_page(browser, origin, PHONE) as (page, seen):
        register(page, origin, f"{new_id('p')}@example.com", PASSWORD)
        watch(page, address, "ethereum")
        for path in (*PAGES.values(), f"/address/ethereum/{address}"):
            response = page.goto(origin + path)
            assert response is not None and response.ok, path
            assert page.locator("h1").first.is_visible(), path
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{path} is {width} px wide on a {PHONE['width']} px screen"
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        assert seen.errors == [] and seen.foreign == []


def test_a_key_made_in_the_browser_works_over_http_and_is_shown_once(server: ServerProcess, browser: Browser) -> None:
    origin = server.base_url
    with watched_page(browser, origin, DESKTOP) as (page, seen):
        register(page, origin, f"{new_id('a')}@example.com", PASSWORD)
        page.goto(origin + "/account")
        page.get_by_label("Name", exact=True).fill("ci runner")
        with page.expect_navigation():
            page.get_by_role("button", name="Create key").click()
        secret = page.locator("#secret-value").input_value()
        assert page.get_by_text("Copy it now: it will not be shown again.").is_visible()
        r = httpx.get(origin + "/v1/auth/api-keys", headers={"Authorization": f"Bearer {secret}"}, timeout=10)
        assert r.status_code == 200 and [k["name"] for k in r.json()["data"]] == ["ci runner"]
        page.goto(origin + "/account")
        assert secret not in page.content() and page.locator("#secret-value").count() == 0
        assert seen.errors == [] and seen.foreign == []


def test_make_screenshots_saves_every_page_at_both_widths(
    server: ServerProcess, browser: Browser, ethereum: Anvil, tmp_path: Path
) -> None:
    saved = take(browser, server.base_url, tmp_path, exposed_address(ethereum))
    names = sorted(p.name for p in saved)
    assert names == sorted(f"{page}-{width}.png" for page in NAMES for width in ("1280", "390"))
    assert all(p.stat().st_size > 5_000 for p in saved)  # a rendered page, not a blank one
