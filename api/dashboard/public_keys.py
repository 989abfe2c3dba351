"""Public keys on the dashboard: the portfolio's list of the keys this account scanned
(``POST /v1/scan/key``'s stored results under today's rules) with a form to scan one across
every chain, and a page per key with every address its key makes on each chain, the level
and balance of each, the evidence that shows the key, and what the scan could not see."""

from __future__ import annotations

from typing import Any

import msgspec
from sanic import HTTPResponse
from sanic.response import redirect

from api.context import QdayRequest
from api.dashboard.explorers import evidence_rows
from api.dashboard.frame import checked_form, dashboard, field, frame, render, signed_in
from chains.environment import Environment
from services.accounts import Principal
from services.pagination import Page, PageRequest
from storage.models import KeyScanResult

#: Keys per page of the portfolio.
KEY_PAGE_SIZE = 20


def key_view(row: KeyScanResult) -> dict[str, Any]:
    """What the pages show of one stored key scan: its answer, the chains it asked for, and
    its evidence with explorer links."""
    result = msgspec.json.decode(row.result)
    chains = row.subject.rsplit("/", 1)[1]
    return {
        **result,
        "chains": "all chains" if chains == "*" else chains.replace(",", ", "),
        "evidence": evidence_rows(result["exposureEvidence"], row.environment),
        "stored": row,
    }


async def keys_page(request: QdayRequest, principal: Principal) -> Page[KeyScanResult]:
    """The page of scanned keys the portfolio's ``keys`` cursor names (the first without)."""
    page = PageRequest(KEY_PAGE_SIZE, request.args.get("keys") or None)
    return await request.app.ctx.key_scans.scanned(principal, page)


@dashboard.post("/portfolio/keys")
@signed_in
async def scan_key(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Scan a public key from the form on every chain (a stored scan younger than the TTL
    answers) and show its page."""
    checked_form(request)
    public_key = field(request, "public_key").strip().removeprefix("0x")
    outcome = await request.app.ctx.key_scans.scan(principal, public_key, None, refresh=False)
    compressed = msgspec.json.decode(outcome.result)["publicKey"]
    return redirect(f"/key/{compressed}?env={environment.value}", status=303)


@dashboard.get("/key/<public_key:str>")
@signed_in
async def key_page(
    request: QdayRequest, principal: Principal, environment: Environment, public_key: str
) -> HTTPResponse:
    """One key's stored scans: its level, evidence, coverage and every address it makes
    (the API's not-found page when this account never scanned it here)."""
    rows = await request.app.ctx.key_scans.results_of(principal, public_key)
    return render("public_key.html", **frame(request, principal, environment), scans=[key_view(r) for r in rows])
