"""The portfolio page: watched addresses with their W-levels, balances at risk and evidence,
aggregated by chain × level in the store (``services.portfolio``), charted, filtered, paged
and exported as CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

import msgspec
from sanic import HTTPResponse
from sanic.response import raw, redirect

from api.context import QdayRequest
from api.dashboard.charts import Bar, Segment, bar_chart
from api.dashboard.detail import exposure_trend
from api.dashboard.frame import LEVEL_NAMES, checked_form, dashboard, field, frame, problem, render, signed_in
from api.dashboard.public_keys import key_view, keys_page
from api.dashboard.wallets import wallet_view, wallets_page
from api.errors import code_of, status_of
from chains.environment import Environment
from core.errors import DomainError
from services.accounts import Principal
from services.pagination import PageRequest
from services.portfolio import LEVELS, Portfolio, chains, portfolio_filter
from storage.sql_portfolio import PortfolioRow

#: Addresses per page.
PAGE_SIZE = 50


def _cells_charts(portfolio: Portfolio) -> tuple[Any, Any]:
    by_chain: dict[str, list[Segment]] = {}
    by_level: dict[str, float] = dict.fromkeys(LEVELS, 0.0)
    for cell in portfolio.cells:
        by_chain.setdefault(cell.chain, []).append(Segment(cell.level, cell.balance_usd, f"level-{cell.level}"))
        by_level[cell.level] = by_level.get(cell.level, 0.0) + cell.addresses
    at_risk = bar_chart(
        "chart-balance",
        "Balance at risk (USD) by chain and W-level",
        [Bar(chain, segments) for chain, segments in by_chain.items()],
        "usd",
    )
    distribution = bar_chart(
        "chart-levels",
        "Watched addresses by W-level",
        [Bar(LEVEL_NAMES.get(level, level), [Segment(level, n, f"level-{level}")]) for level, n in by_level.items()],
        "count",
    )
    return at_risk, distribution


def _row_view(row: PortfolioRow) -> dict[str, Any]:
    result = msgspec.json.decode(row.result) if row.result else {}
    return {
        "chain": row.chain,
        "address": row.address,
        "label": row.label,
        "level": row.level,
        "exposed": result.get("publicKeyExposed"),
        "balance": result.get("balanceAtRisk"),
        "usd": result.get("balanceAtRiskUsd"),
        "evidence": result.get("exposureEvidence") or [],
    }


@dashboard.get("/portfolio")
@signed_in
async def portfolio(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Watched addresses with their levels, balances at risk and evidence; aggregates and
    charts by chain × level; filters; keyset pages of ``PAGE_SIZE``."""
    only = portfolio_filter(request.args.get("chain"), request.args.get("level"))
    page = PageRequest(PAGE_SIZE, request.args.get("cursor") or None)
    data = await request.app.ctx.portfolio.overview(principal.account.id, environment, only, page)
    at_risk, distribution = _cells_charts(data)
    wallets = await wallets_page(request, principal)
    keys = await keys_page(request, principal)
    return render(
        "portfolio.html",
        **frame(request, principal, environment),
        portfolio=data,
        rows=[_row_view(r) for r in data.page.items],
        chains=chains(),
        levels=LEVELS,
        level_names=LEVEL_NAMES,
        only=only,
        chart_balance=at_risk,
        chart_levels=distribution,
        trend=await exposure_trend(request, principal, environment, only),
        wallets=[wallet_view(w) for w in wallets.items],
        wallets_next=wallets.next_cursor,
        keys=[key_view(k) for k in keys.items],
        keys_next=keys.next_cursor,
    )


@dashboard.post("/portfolio/watch")
@signed_in
async def watch(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Watch an address from the form and scan it at once, so it shows with its level."""
    checked_form(request)
    ctx = request.app.ctx
    address = field(request, "address").strip()
    chain = field(request, "chain") or None
    label = field(request, "label") or None
    entry = await ctx.scans.watch(principal, address, chain, label, ctx.settings.enterprise_watch_cap)
    try:
        await ctx.scans.scan(principal, entry.address, entry.chain, refresh=False)
    except DomainError as exc:  # watched all the same: the daily rescoring scores it
        code = code_of(exc)
        message = f"{entry.address} on {entry.chain} is watched but could not be scored now: {exc} ({code})"
        return problem(request, principal, environment, message, status_of(code))
    return redirect(f"/portfolio?env={environment.value}", status=303)


@dashboard.get("/portfolio.csv")
@signed_in
async def portfolio_csv(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """The filtered portfolio as CSV (every address, not one page)."""
    only = portfolio_filter(request.args.get("chain"), request.args.get("level"))
    rows = await request.app.ctx.portfolio.export(principal.account.id, environment, only)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["chain", "address", "label", "level", "publicKeyExposed", "balanceAtRisk", "balanceAtRiskUsd"])
    for row in rows:
        view = _row_view(row)
        writer.writerow(
            [row.chain, row.address, _cell(row.label), row.level, view["exposed"], view["balance"], view["usd"]]
        )
    headers = {"Content-Disposition": f'attachment; filename="qday-portfolio-{environment.value}.csv"'}
    return raw(out.getvalue().encode(), content_type="text/csv; charset=utf-8", headers=headers)


def _cell(text: str | None) -> str:
    """A label as a CSV cell a spreadsheet will not run as a formula (OWASP CSV injection)."""
    if text and text[0] in "=+-@\t\r":
        return "'" + text
    return text or ""
