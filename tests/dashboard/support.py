"""What the dashboard's HTTP tests share: a browser-like client on an https origin, the
form token of a page, and addresses put on a watch list directly."""

from __future__ import annotations

import itertools
import re
from datetime import timedelta
from typing import Any

import httpx

from chains.environment import Environment
from core.ids import new_id
from storage.models import WatchedAddress
from storage.sql_scans import SqlScanStore

#: The pages a signed-in account sees, by name (each one's own page, e.g. an address's,
#: is reached from these).
PAGES = {
    "portfolio": "/portfolio",
    "alerts": "/alerts",
    "attestations": "/attestations",
    "managed": "/managed",
    "chains": "/chains",
    "account": "/account",
}
ORIGIN = "https://qday.test"
_addresses = itertools.count(1)
PASSWORD = "correct horse battery staple"


def browser(app: Any) -> httpx.AsyncClient:
    """A client as a browser on this origin over https: it keeps cookies and sends Origin."""
    transport = httpx.ASGITransport(app=app, client=(f"127.0.9.{next(_addresses)}", 40000))  # own rate buckets
    return httpx.AsyncClient(transport=transport, base_url=ORIGIN, headers={"Origin": ORIGIN})


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert found, "no CSRF token on the page"
    return found.group(1)


async def watched(app: Any, account_id: str, entries: list[tuple[str, str, str | None]]) -> None:
    """Watch (chain, address, label) entries in the live environment, one microsecond apart
    (their watch order)."""
    store = SqlScanStore(app.ctx.database)
    now = app.ctx.clock.now()
    for i, (chain, address, label) in enumerate(entries):
        at = now + timedelta(microseconds=i)
        entry = WatchedAddress(new_id("w"), account_id, Environment.LIVE, chain, address, label, at)
        assert await store.watch(entry) is not None


async def logged_in(b: httpx.AsyncClient, email: str, password: str) -> None:
    """Log a browser in with the form."""
    r = await b.post("/login", data={"email": email, "password": password})
    assert r.status_code == 303, r.text
