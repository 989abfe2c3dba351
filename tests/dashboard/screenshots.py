"""``make screenshots``: every dashboard page at desktop (1280 px) and phone (390 px) width,
saved as ``<page>-<width>.png`` under ``var/screenshots/`` (or ``--out``), from a ``qday
serve`` of its own on 127.0.0.1 (an empty data directory; an account made for the run)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from playwright.sync_api import Browser

from core.ids import new_id
from tests.dashboard.browser import DESKTOP, PHONE, chromium, register, watched_page
from tests.support import ServerProcess

#: The pages a signed-in account sees, by name (the login page is taken signed out).
PAGES = {"portfolio": "/portfolio"}


def take(browser: Browser, origin: str, out: Path) -> list[Path]:
    """Screenshots of every page at both widths, full length; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    for viewport in (DESKTOP, PHONE):
        width = viewport["width"]
        with watched_page(browser, origin, viewport) as (page, seen):
            page.goto(origin + "/")
            saved.append(out / f"login-{width}.png")
            page.screenshot(path=str(saved[-1]), full_page=True)
            register(page, origin, f"{new_id('shot')}@example.com", "correct horse battery staple")
            for name, path in PAGES.items():
                page.goto(origin + path)
                saved.append(out / f"{name}-{width}.png")
                page.screenshot(path=str(saved[-1]), full_page=True)
            if seen.errors or seen.foreign:
                raise RuntimeError(f"page errors {seen.errors} or foreign requests {seen.foreign}")
    return saved


def main() -> None:
    """Start a server, take the screenshots, stop it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("var/screenshots"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qday-screenshots-") as data:
        server = ServerProcess(Path(data))
        try:
            with chromium() as browser:
                for path in take(browser, server.base_url, args.out):
                    print(path)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
