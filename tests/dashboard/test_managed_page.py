"""The managed keys pages on both engines, with custody on SoftHSM2: a key created from the form
shows its public key and its ``created`` event; scheduling and cancelling its deletion show as
states and events the JSON API agrees with, as does the month's usage; destruction after the
waiting period; plans, algorithms and states the service refuses give its codes; another
tenant and the other environment get 404 and an empty list; forms need their CSRF token."""

from __future__ import annotations

import os
import re
from typing import Any

import httpx

from storage.models import Plan
from tests.custody.support import requires_softhsm, shared_softhsm_conf
from tests.dashboard.support import PASSWORD, browser, csrf_of, logged_in
from tests.support import ManualClock, Tenant, make_tenant

shared_softhsm_conf()  # at collection: before the session's app opens SoftHSM2

pytestmark = requires_softhsm
DAY = 86400


async def _pro_tenant(app: Any, client: httpx.AsyncClient, keys: tuple[str, ...] = ("secret_live",)) -> Tenant:
    tenant = await make_tenant(client, keys)
    await app.ctx.store.set_plan(tenant.email, Plan.PRO)
    return tenant


async def _post(b: httpx.AsyncClient, page: str, action: str, **form: str) -> httpx.Response:
    token = csrf_of((await b.get(page)).text)
    return await b.post(action, data={**form, "csrf": token})


async def _create(b: httpx.AsyncClient, algorithm: str = "ml-dsa-44", env: str = "live") -> str:
    r = await _post(b, f"/managed?env={env}", f"/managed/create?env={env}", algorithm=algorithm, chain="ethereum")
    assert r.status_code == 303, r.text
    found = re.fullmatch(rf"/managed/(key_[0-9a-f]+)\?env={env}", r.headers["location"])
    assert found, r.headers["location"]
    return found.group(1)


def _events(page: str) -> list[str]:
    return re.findall(r'<tr class="event-([a-z_]+)">', page)


def _state(page: str) -> str:
    found = re.search(r'<dd id="key-state"><span class="badge state-([a-z_]+)">', page)
    assert found, "no state on the page"
    return found.group(1)


async def test_a_key_is_created_moved_through_its_lifecycle_and_audited(
    app: Any, client: httpx.AsyncClient, clock: ManualClock
) -> None:
    tenant = await _pro_tenant(app, client)
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        key_id = await _create(b)
        page = (await b.get(f"/managed/{key_id}")).text
        api_key = (await client.get(f"/v1/keys/{key_id}", headers=tenant.auth("secret_live"))).json()["data"]
        assert f'<code class="address" id="public-key">{api_key["publicKey"]}</code>' in page
        assert len(bytes.fromhex(api_key["publicKey"])) == 1312  # ml-dsa-44, and never any private material
        assert _state(page) == "active" and _events(page) == ["created"] and "Schedule deletion" in page
        listed = (await b.get("/managed")).text
        assert re.search(rf"<code>{key_id}</code></a></td>\s*<td>ml-dsa-44</td>", listed)

        signed = await client.post(
            "/v1/sign/managed",
            json={"key_id": key_id, "message": "00ff", "algorithm": "ml-dsa-44"},
            headers=tenant.auth("secret_live"),
        )
        assert signed.status_code == 200, signed.text
        page = (await b.get(f"/managed/{key_id}")).text
        assert '<dd id="key-signatures">1</dd>' in page

        r = await _post(b, f"/managed/{key_id}", f"/managed/{key_id}/delete?env=live")
        assert r.status_code == 303 and r.headers["location"] == f"/managed/{key_id}?env=live"
        page = (await b.get(f"/managed/{key_id}")).text
        assert _state(page) == "pending_deletion" and _events(page) == ["created", "deletion_scheduled"]
        assert "scheduled for deletion" in (await b.get("/managed")).text and "Cancel deletion" in page
        again = await _post(b, f"/managed/{key_id}", f"/managed/{key_id}/delete?env=live")
        assert again.status_code == 409 and "CUS_006" in again.text

        r = await _post(b, f"/managed/{key_id}", f"/managed/{key_id}/cancel-deletion?env=live")
        assert r.status_code == 303
        page = (await b.get(f"/managed/{key_id}")).text
        assert _state(page) == "active" and _events(page) == ["created", "deletion_scheduled", "deletion_cancelled"]
        api_events = (await client.get(f"/v1/keys/{key_id}/events", headers=tenant.auth("secret_live"))).json()
        assert [e["type"] for e in api_events["data"]] == _events(page)
        assert all(e["hash"] in page for e in api_events["data"])

        await _post(b, f"/managed/{key_id}", f"/managed/{key_id}/delete?env=live")
        clock.advance(8 * DAY)
        await app.ctx.managed.purge_due()
        await logged_in(b, tenant.email, tenant.password)  # the session did not outlive the wait
        page = (await b.get(f"/managed/{key_id}")).text
        assert _state(page) == "destroyed" and _events(page)[-1] == "destroyed"
        assert api_key["publicKey"] in page and "Schedule deletion" not in page and "Cancel deletion" not in page
        gone = await _post(b, f"/managed/{key_id}", f"/managed/{key_id}/cancel-deletion?env=live")
        assert gone.status_code == 410 and "CUS_005" in gone.text


async def test_refusals_show_the_service_codes(app: Any, client: httpx.AsyncClient) -> None:
    free = await make_tenant(client)
    async with browser(app) as b:
        await logged_in(b, free.email, free.password)
        assert 'id="plan-note"' in (await b.get("/managed")).text
        r = await _post(b, "/managed", "/managed/create", algorithm="ml-dsa-44", chain="ethereum")
        assert r.status_code == 403 and "CUS_001" in r.text
    tenant = await _pro_tenant(app, client)
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        assert 'id="plan-note"' not in (await b.get("/managed")).text
        cases = {
            ("slh-dsa-sha2-128s", "ethereum"): (400, "CUS_003"),
            ("rsa-2048", "ethereum"): (400, "PQC_001"),
            ("", "ethereum"): (400, "PQC_001"),
            ("ml-dsa-44", "dogecoin"): (400, "GEN_001"),
        }
        for (algorithm, chain), (status, code) in cases.items():
            r = await _post(b, "/managed", "/managed/create", algorithm=algorithm, chain=chain)
            assert r.status_code == status and f"({code})" in r.text, (algorithm, chain, r.text[-500:])
        for path, status in (
            ("/managed?month=2026-13", 400),
            ("/managed?cursor=nonsense", 400),
            ("/managed/key_nope", 404),
            ("/managed/key_nope?cursor=nonsense", 404),
        ):
            assert (await b.get(path)).status_code == status, path
        assert (await b.get("/managed?month=2026-11")).status_code == 200
        assert await app.ctx.database.fetch_one(
            "SELECT count(*) FROM managed_keys WHERE account_id = ?", (tenant.account_id,)
        ) == (0,)


async def test_keys_stay_in_their_tenant_and_environment(app: Any, client: httpx.AsyncClient) -> None:
    tenant = await _pro_tenant(app, client, ("secret_live", "secret_test"))
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        live_id = await _create(b)
        test_id = await _create(b, env="test")
        live, test = (await b.get("/managed")).text, (await b.get("/managed?env=test")).text
        assert live_id in live and test_id not in live and test_id in test and live_id not in test
        assert (await b.get(f"/managed/{live_id}?env=test")).status_code == 404
        assert (await b.get(f"/managed/{test_id}?env=test")).status_code == 200
    async with browser(app) as other:
        email = f"other-{os.urandom(6).hex()}@example.com"
        assert (await other.post("/register", data={"email": email, "password": PASSWORD})).status_code == 303
        await app.ctx.store.set_plan(email, Plan.PRO)
        assert live_id not in (await other.get("/managed")).text
        r = await other.get(f"/managed/{live_id}")
        assert r.status_code == 404 and "REQ_005" in r.text
        r = await _post(other, "/managed", f"/managed/{live_id}/delete")
        assert r.status_code == 404 and "REQ_005" in r.text
    state = await app.ctx.database.fetch_one("SELECT state FROM managed_keys WHERE id = ?", (live_id,))
    assert state == ("active",)


async def test_forms_without_their_token_do_nothing(app: Any, client: httpx.AsyncClient) -> None:
    tenant = await _pro_tenant(app, client)
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        key_id = await _create(b)
        r = await b.post("/managed/create", data={"algorithm": "ml-dsa-44", "chain": "ethereum"})
        assert r.status_code == 403
        r = await b.post(f"/managed/{key_id}/delete", data={"csrf": "0" * 64})
        assert r.status_code == 403
        token = csrf_of((await b.get("/managed")).text)
        r = await b.post(f"/managed/{key_id}/delete", data={"csrf": token}, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403
    rows = await app.ctx.database.fetch_all(
        "SELECT id, state FROM managed_keys WHERE account_id = ?", (tenant.account_id,)
    )
    assert [tuple(row) for row in rows] == [(key_id, "active")]
    events = await app.ctx.database.fetch_all("SELECT type FROM managed_key_events WHERE key_id = ?", (key_id,))
    assert [row[0] for row in events] == ["created"]
