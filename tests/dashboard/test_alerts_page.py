"""The alerts pages over HTTP, on both engines, with a real loopback receiver (allowed by
``QDAY_WEBHOOK_ALLOW_PRIVATE``, as in tests/api/test_webhooks.py): an endpoint added with the
form (CSRF required) shows its events and its secret once, a secret that signs what arrives;
test pings show on the deliveries page with their state, attempts and response code; refused
input is a page with the API's code and status; delete removes; another tenant and the other
environment neither see nor delete an endpoint."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest

from core.ids import new_id
from qday_client import verify_webhook
from services.settings import load_settings
from storage.webhook_records import SUBSCRIBABLE
from tests.dashboard.support import PASSWORD, browser, csrf_of, logged_in
from tests.support import ManualClock, engine_env, running_app
from tests.webhook_receiver import WebhookReceiver

Browser = tuple[httpx.AsyncClient, str]


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


@pytest.fixture(scope="module")
def hook_clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory, hook_clock: ManualClock, module_database_url: str) -> Any:
    """The app on each engine, allowing loopback receivers (refused in production settings)."""
    env = {
        "QDAY_WEBHOOK_ALLOW_PRIVATE": "true",
        "QDAY_FAMILY_CHAINS": "none",
        "QDAY_ALERT_POLL_SECONDS": "0",
        **engine_env(module_database_url),
    }
    async with running_app(load_settings(env, data_dir=tmp_path_factory.mktemp("alerts-page")), hook_clock) as app:
        yield app


class _Tables(HTMLParser):
    """The text of each row's cells of the table with a given id."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id = table_id
        self.inside = False
        self.in_body = False
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("id", self.table_id) in attrs:
            self.inside = True
        elif self.inside and tag == "tbody":
            self.in_body = True
        elif self.in_body and tag == "tr":
            self.rows.append([])
        elif self.in_body and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if self.in_body and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(" ".join(" ".join(self.cell).split()))
            self.cell = None
        elif tag == "table":
            self.inside = self.in_body = False

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def rows(page: str, table_id: str) -> list[list[str]]:
    """The body rows of a page's table, each as its cells' text."""
    parser = _Tables(table_id)
    parser.feed(page)
    return parser.rows


def _hook_url(receiver: WebhookReceiver) -> str:
    """The receiver's URL made unique to one test (the receiver answers any query)."""
    return f"{receiver.url}?to={new_id('t')}"


async def _add(b: httpx.AsyncClient, url: str, events: list[str], env: str = "live", **extra: str) -> httpx.Response:
    token = csrf_of((await b.get(f"/alerts?env={env}")).text)
    return await b.post(f"/alerts?env={env}", data={"csrf": token, "url": url, "events": events, **extra})


def _made_id(page: str) -> str:
    found = re.search(r'action="/alerts/(wh_[0-9a-f]+)/test', page)
    assert found, "no endpoint on the page"
    return found.group(1)


async def _stored(app: Any, url: str) -> int:
    row = await app.ctx.database.fetch_one("SELECT count(*) FROM webhooks WHERE url = ?", (url,))
    return int(row[0])


async def test_an_endpoint_added_with_the_form_shows_its_secret_once_and_its_deliveries(
    app: Any, signed_in: Browser, receiver: WebhookReceiver, hook_clock: ManualClock
) -> None:
    b, _ = signed_in
    page = await b.get("/alerts")
    assert page.status_code == 200 and "No webhook endpoints in live yet" in page.text
    for kind in SUBSCRIBABLE:  # a checkbox, with its label, for every event an endpoint may take
        box = re.search(rf'<input id="(add-event-\d)" name="events" type="checkbox" value="{kind.value}"', page.text)
        assert box and f'<label for="{box.group(1)}"><code>{kind.value}</code>' in page.text
    assert 'value="ping"' not in page.text
    assert "style=" not in page.text and "<script" not in page.text

    url = _hook_url(receiver)
    refused = await b.post("/alerts", data={"url": url, "events": ["key.exposed"]})  # no form token
    assert refused.status_code == 403 and "security token" in refused.text
    assert await _stored(app, url) == 0

    made = await _add(b, url, ["key.exposed", "risk.changed"], description="desk alerts")
    assert made.status_code == 201, made.text
    secret = re.search(r'<code class="address" id="secret">(whsec_[^<]+)</code>', made.text)
    assert secret, made.text
    webhook_id = _made_id(made.text)
    assert "whsec_" not in str(made.url) and "location" not in made.headers

    listed = (await b.get("/alerts")).text
    assert "whsec_" not in listed  # never again
    (row,) = rows(listed, "endpoints")
    assert row[0] == f"{url} desk alerts"
    assert row[1] == "key.exposed risk.changed" and row[2] == "enabled"
    detail = await b.get(f"/alerts/{webhook_id}")
    assert detail.status_code == 200 and "whsec_" not in detail.text
    assert rows(detail.text, "deliveries") == [["No deliveries yet: send a test."]]

    token = csrf_of(detail.text)
    before = len(receiver.received)
    sent = await b.post(f"/alerts/{webhook_id}/test", data={"csrf": token})
    assert sent.status_code == 200 and "delivered</span> (HTTP 200" in sent.text, sent.text
    got = (await receiver.arrived(before + 1))[before]
    _, public_key = await app.ctx.webhooks.signing_key()
    event = verify_webhook(got.body, got.headers, secret.group(1), public_key, now=app.ctx.clock.now().timestamp())
    assert event.type == "ping"  # the secret shown signs what the receiver gets

    hook_clock.advance(1)  # deliveries are listed oldest first
    receiver.fail_next(500)
    failed = await b.post(f"/alerts/{webhook_id}/test", data={"csrf": token})
    assert failed.status_code == 200 and "not delivered</span>: HTTP 500" in failed.text

    history = (await b.get(f"/alerts/{webhook_id}")).text
    shown = [(r[0].split()[0], r[1].split()[0], r[2], r[3]) for r in rows(history, "deliveries")]
    assert shown == [("ping", "delivered", "1", "HTTP 200"), ("ping", "pending", "1", "HTTP 500")]
    assert rows(history, "delivery-counts") == [["pending", "1"], ["delivered", "1"], ["failed", "0"]]
    assert 'id="chart-deliveries"' in history and "delivered: 1" in history

    rotated = await b.post(f"/alerts/{webhook_id}/rotate-secret", data={"csrf": token})
    new_secret = re.search(r'id="secret">(whsec_[^<]+)<', rotated.text)
    assert rotated.status_code == 200 and new_secret and new_secret.group(1) != secret.group(1)
    assert "whsec_" not in (await b.get(f"/alerts/{webhook_id}")).text


async def test_refused_input_is_a_page_with_the_apis_code(
    app: Any, signed_in: Browser, receiver: WebhookReceiver
) -> None:
    b, _ = signed_in
    metadata = "http://169.254.169.254/latest/meta-data"  # refused even where loopback is allowed
    for url, events, extra, needle in (
        (metadata, ["key.exposed"], {}, "cloud metadata address"),
        ("ftp://127.0.0.1/hook", ["key.exposed"], {}, "only http(s) URLs"),
        (_hook_url(receiver), [], {}, "length &gt;= 1 - at `$.events`"),
        (_hook_url(receiver), ["ping"], {}, "at `$.events[0]`"),
        (_hook_url(receiver) + "x" * 2048, ["key.exposed"], {}, "at `$.url`"),
        (_hook_url(receiver), ["key.exposed"], {"description": "a\u202eb"}, "U+202E"),
    ):
        r = await _add(b, url, events, **extra)
        assert r.status_code == 400 and "(REQ_001)" in r.text and needle in r.text, (url, events, r.text)
        assert r.headers["content-type"].startswith("text/html")
        assert await _stored(app, url) == 0
    for path in ("/alerts/wh_0123abcd", "/alerts/nothing-here"):
        r = await b.get(path)
        assert r.status_code == 404 and "(REQ_005)" in r.text
    token = csrf_of((await b.get("/alerts")).text)
    r = await b.post("/alerts/wh_0123abcd/delete", data={"csrf": token})
    assert r.status_code == 404 and "(REQ_005)" in r.text
    r = await b.get("/alerts?cursor=not-a-cursor")
    assert r.status_code == 400 and "(REQ_001)" in r.text
    for _ in range(2):  # the free plan's cap, both environments together
        assert (await _add(b, _hook_url(receiver), ["key.exposed"], env="test")).status_code == 201
    capped = await _add(b, _hook_url(receiver), ["key.exposed"])
    assert capped.status_code == 403 and "(LIM_001)" in capped.text


async def test_delete_and_isolation_between_tenants_and_environments(
    app: Any, signed_in: Browser, receiver: WebhookReceiver
) -> None:
    b, _ = signed_in
    url, test_url = _hook_url(receiver), _hook_url(receiver)
    webhook_id = _made_id((await _add(b, url, ["balance.changed"])).text)
    test_id = _made_id((await _add(b, test_url, ["key.exposed"], env="test")).text)
    live_page, test_page = (await b.get("/alerts?env=live")).text, (await b.get("/alerts?env=test")).text
    assert [r[0] for r in rows(live_page, "endpoints")] == [url]
    assert [r[0] for r in rows(test_page, "endpoints")] == [test_url]
    token = csrf_of(live_page)
    for path in (f"/alerts/{webhook_id}?env=test", f"/alerts/{test_id}?env=live"):
        assert (await b.get(path)).status_code == 404
    r = await b.post(f"/alerts/{webhook_id}/delete?env=test", data={"csrf": token})
    assert r.status_code == 404

    async with browser(app) as other:
        await other.post("/register", data={"email": f"{new_id('o')}@example.com", "password": PASSWORD})
        theirs = (await other.get("/alerts")).text
        assert url not in theirs and rows(theirs, "endpoints") == [["No webhook endpoints in live yet: add one below."]]
        foreign = csrf_of(theirs)
        assert (await other.get(f"/alerts/{webhook_id}")).status_code == 404
        for action in ("delete", "test", "rotate-secret", "enable"):
            r = await other.post(f"/alerts/{webhook_id}/{action}", data={"csrf": foreign})
            assert r.status_code == 404 and "(REQ_005)" in r.text, action
    assert all(g.path != url[url.index("/hook") :] for g in receiver.received)  # no ping was sent to it
    assert await _stored(app, url) == 1

    assert (await b.post(f"/alerts/{webhook_id}/delete", data={})).status_code == 403  # no form token
    assert await _stored(app, url) == 1
    r = await b.post(f"/alerts/{webhook_id}/delete?env=live", data={"csrf": token})
    assert r.status_code == 303 and r.headers["location"] == "/alerts?env=live"
    assert await _stored(app, url) == 0
    assert rows((await b.get("/alerts")).text, "endpoints") == [["No webhook endpoints in live yet: add one below."]]
    assert (await b.get(f"/alerts/{webhook_id}")).status_code == 404
    assert [r[0] for r in rows((await b.get("/alerts?env=test")).text, "endpoints")] == [test_url]


async def test_an_endpoint_failing_for_a_day_shows_disabled_and_can_be_enabled(
    app: Any, signed_in: Browser, hook_clock: ManualClock
) -> None:
    b, email = signed_in
    with socket.socket() as closed:  # a loopback port nothing listens on once closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    webhook_id = _made_id((await _add(b, f"http://127.0.0.1:{port}/hook", ["risk.changed"])).text)
    token = csrf_of((await b.get(f"/alerts/{webhook_id}")).text)
    sent = await b.post(f"/alerts/{webhook_id}/test", data={"csrf": token})
    assert "not delivered</span>" in sent.text and "enabled</span>, failing since" in sent.text
    hook_clock.advance(24 * 3600)
    for _ in range(100):  # the delivery loop's due retries, until none is left
        if await app.ctx.deliverer.run_once() == 0:
            break
    await logged_in(b, email, PASSWORD)  # the session outlived by the day
    page = (await b.get(f"/alerts/{webhook_id}")).text
    assert "disabled</span>" in page and "24 hours" in page and f"/alerts/{webhook_id}/enable" in page
    assert [(r[1], r[2], r[3]) for r in rows(page, "deliveries")] == [("failed", "2", "no response")]
    token = csrf_of(page)
    refused = await b.post(f"/alerts/{webhook_id}/test", data={"csrf": token})
    assert refused.status_code == 400 and "enable it first" in refused.text
    r = await b.post(f"/alerts/{webhook_id}/enable", data={"csrf": token})
    assert r.status_code == 303 and r.headers["location"] == f"/alerts/{webhook_id}?env=live"
    page = (await b.get(r.headers["location"])).text
    assert '<dd id="endpoint-state"><span class="badge state-delivered">enabled' in page
