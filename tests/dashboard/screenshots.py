"""``make screenshots``: every dashboard page at desktop (1280 px) and phone (390 px) width,
saved as ``<page>-<width>.png`` under ``var/screenshots/`` (or ``--out``), from a ``qday
serve`` of its own on 127.0.0.1 (an empty data directory; an account made for the run) and an
anvil node as ethereum, on which an account signs a transfer so that the portfolio and the
detail page show a scored address whose key is on chain."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from playwright.sync_api import Browser, Page

from core.ids import new_id
from tests.anvil import MISSING_ANVIL, Anvil, anvil_binary
from tests.dashboard.browser import DESKTOP, PHONE, chromium, register, watch, watched_page
from tests.dashboard.support import PAGES
from tests.support import ServerProcess

#: Every screenshot's page name.
NAMES = ("login", *PAGES, "detail")
_TRANSFER = {"value": 10**15, "gas": 21000, "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 10**9}


def exposed_address(ethereum: Anvil) -> str:
    """An account whose key a signed transfer put on chain (a W-level above W1 to show)."""
    holder = ethereum.new_account()
    ethereum.send(holder, {"to": ethereum.new_account(0).address, **_TRANSFER})
    return holder.address


def take(browser: Browser, origin: str, out: Path, address: str) -> list[Path]:
    """Screenshots of every page at both widths, full length, for an account watching
    ``address`` on ethereum; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    for viewport in (DESKTOP, PHONE):
        with watched_page(browser, origin, viewport) as (page, seen):

            def shot(name: str, page: Page = page, width: int = viewport["width"]) -> None:
                saved.append(out / f"{name}-{width}.png")
                page.screenshot(path=str(saved[-1]), full_page=True)

            page.goto(origin + "/")
            shot("login")
            register(page, origin, f"{new_id('shot')}@example.com", "correct horse battery staple")
            watch(page, address, "ethereum")
            for name, path in PAGES.items():
                response = page.goto(origin + path)
                if response is None or not response.ok:
                    raise RuntimeError(f"{path} answered {response.status if response else 'nothing'}")
                shot(name)
            page.goto(origin + "/portfolio")
            with page.expect_navigation():
                page.locator("#addresses a", has_text=address[:8]).first.click()
            shot("detail")
            if seen.errors or seen.foreign:
                raise RuntimeError(f"page errors {seen.errors} or foreign requests {seen.foreign}")
    return saved


def main() -> None:
    """Start anvil and a server, take the screenshots, stop them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("var/screenshots"))
    args = parser.parse_args()
    binary = anvil_binary()
    if binary is None:
        raise SystemExit(MISSING_ANVIL)
    ethereum = Anvil(binary, chain_id=1)
    with tempfile.TemporaryDirectory(prefix="qday-screenshots-") as data:
        server = ServerProcess(
            Path(data), env={"QDAY_ETHEREUM_RPC_URL": ethereum.url, "QDAY_FAMILY_CHAINS": "ethereum"}
        )
        try:
            with chromium() as browser:
                for path in take(browser, server.base_url, args.out, exposed_address(ethereum)):
                    print(path)
        finally:
            server.stop()
            ethereum.stop()


if __name__ == "__main__":
    main()
