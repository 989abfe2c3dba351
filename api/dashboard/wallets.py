"""Watched wallets on the portfolio page: descriptors and extended public keys with their
latest summary (worst W-level of a used address, balances, exposed balance), a form to watch
one (scanned at once, as ``POST /v1/watchlist/descriptors`` does) and to stop watching one."""

from __future__ import annotations

from typing import Any

import msgspec
from sanic import HTTPResponse
from sanic.response import redirect

from api.context import QdayRequest
from api.dashboard.frame import checked_form, dashboard, field, signed_in
from chains.environment import Environment
from services.accounts import Principal
from services.descriptor_scans import DEFAULT_GAP_LIMIT, MAX_GAP_LIMIT
from services.errors import InvalidRequest
from services.pagination import Page, PageRequest
from storage.models import WatchedDescriptor

#: Wallets per page of the portfolio.
WALLET_PAGE_SIZE = 20
_SAT = 100_000_000


def wallet_view(entry: WatchedDescriptor) -> dict[str, Any]:
    """What the portfolio shows of a watched wallet (no summary before its first scan)."""
    summary = msgspec.json.decode(entry.summary) if entry.summary else {}
    return {
        "id": entry.id,
        "descriptor": entry.descriptor,
        "label": entry.label,
        "gap_limit": entry.gap_limit,
        "level": summary.get("riskScore", "unscored"),
        "used": summary.get("usedAddresses"),
        "derived": entry.derived_addresses,
        "btc": None if summary.get("balanceSat") is None else summary["balanceSat"] / _SAT,
        "exposed_btc": None if summary.get("exposedBalanceSat") is None else summary["exposedBalanceSat"] / _SAT,
        "usd": summary.get("balanceAtRiskUsd"),
        "scanned_at": entry.scanned_at,
    }


async def wallets_page(request: QdayRequest, principal: Principal) -> Page[WatchedDescriptor]:
    """The page of watched wallets the portfolio's ``wallets`` cursor names (the first without)."""
    page = PageRequest(WALLET_PAGE_SIZE, request.args.get("wallets") or None)
    return await request.app.ctx.descriptor_watch.watched(principal, page)


def _gap_limit(text: str) -> int:
    """The form's gap limit (the default when empty); REQ_003 outside 1..``MAX_GAP_LIMIT``."""
    if not text.strip():
        return DEFAULT_GAP_LIMIT
    if not text.strip().isdigit() or not 1 <= int(text) <= MAX_GAP_LIMIT:
        raise InvalidRequest(
            f"gap limit must be a whole number from 1 to {MAX_GAP_LIMIT}", field="gapLimit", reason="out of range"
        )
    return int(text)


@dashboard.post("/portfolio/wallets")
@signed_in
async def watch_wallet(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Watch a wallet from the form: scanned now, so it shows with its level and balances."""
    checked_form(request)
    gap_limit = _gap_limit(field(request, "gap_limit"))
    label = field(request, "label") or None
    await request.app.ctx.descriptor_watch.watch(principal, field(request, "descriptor"), label, gap_limit)
    return redirect(f"/portfolio?env={environment.value}#wallets-heading", status=303)


@dashboard.post("/portfolio/wallets/<entry_id:str>/delete")
@signed_in
async def unwatch_wallet(
    request: QdayRequest, principal: Principal, environment: Environment, entry_id: str
) -> HTTPResponse:
    """Stop watching a wallet (the API's not-found page when it is not this account's)."""
    checked_form(request)
    await request.app.ctx.descriptor_watch.unwatch(principal, entry_id)
    return redirect(f"/portfolio?env={environment.value}#wallets-heading", status=303)
