"""Debian's Chromium driven by Playwright, for the dashboard's tests and ``make
screenshots``: launched from ``/usr/bin/chromium`` (Playwright's own browser download is not
reachable here) with the flags that keep it off the network, watched for page errors,
console errors and any request that leaves the page's origin."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
MISSING_CHROMIUM = "Chromium not found at /usr/bin/chromium (`make chromium` installs Debian's package)"
#: No background traffic: this machine's network is closed and each attempt costs time.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@dataclass
class Watched:
    """What a page did that a test must see none of: errors and foreign requests."""

    origin: str
    errors: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Debian Chromium, closed on exit."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def watched_page(browser: Browser, origin: str, viewport: dict[str, int]) -> Iterator[tuple[Page, Watched]]:
    """A page in a fresh context (its own cookies) at ``viewport``, with everything it
    requests recorded; a request for another origin is recorded and aborted."""
    context: BrowserContext = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
    seen = Watched(origin)

    def route(route_: object) -> None:
        request = route_.request  # type: ignore[attr-defined]
        seen.requests.append(request.url)
        parts = urlsplit(request.url)
        if f"{parts.scheme}://{parts.netloc}" != origin:
            seen.foreign.append(request.url)
            route_.abort()  # type: ignore[attr-defined]
        else:
            route_.continue_()  # type: ignore[attr-defined]

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda error: seen.errors.append(f"page error: {error}"))
    page.on("console", lambda message: seen.errors.append(message.text) if message.type == "error" else None)
    try:
        yield page, seen
    finally:
        context.close()


def register(page: Page, origin: str, email: str, password: str) -> None:
    """Create an account with the login page's form (which logs it in)."""
    page.goto(origin + "/")
    page.get_by_label("Email", exact=True).nth(1).fill(email)
    page.get_by_label("Password (12 characters or more)").fill(password)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/portfolio")


def log_in(page: Page, origin: str, email: str, password: str) -> None:
    """Log in with the login page's form."""
    page.goto(origin + "/")
    page.get_by_label("Email", exact=True).first.fill(email)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/portfolio")


def watch(page: Page, address: str, chain: str) -> None:
    """Watch an address with the portfolio's form."""
    page.get_by_label("Address", exact=True).fill(address)
    page.locator("#watch-chain").select_option(chain)
    with page.expect_navigation():
        page.get_by_role("button", name="Watch", exact=True).click()
    if not page.url.endswith("/portfolio?env=live"):  # the page says what was not done
        raise AssertionError(f"{page.url}: {page.locator('[role=alert]').all_inner_texts()}")
