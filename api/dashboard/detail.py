"""The detail page of an address (``/address/<chain>/<address>``) and the portfolio's
exposure trend, both read through ``services.address_detail``.

The detail page shows the tenant's latest stored scan result of the address (W-level, risk
value, each factor with its weight and score, balance at risk, whether its public key is
exposed and what the verdict could not see), the evidence with links to a public explorer
(``api.dashboard.explorers``: links only, never loaded) and its history from the
``address_risk`` files the pipelines write, charted by day. The trend charts the tenant's
watched addresses, and their balance at risk in USD, per W-level per day."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from sanic import HTTPResponse

from api.context import QdayRequest
from api.dashboard.charts import Point, Series, line_chart
from api.dashboard.explorers import address_url, evidence_rows, explorer
from api.dashboard.frame import LEVEL_NAMES, dashboard, frame, render, signed_in
from chains.environment import Environment
from scoring.model import RISK_BANDS
from services.accounts import Principal
from services.address_detail import AddressDetail
from services.portfolio import LEVELS
from storage.risk_history import LevelDay, RiskDay
from storage.sql_portfolio import PortfolioFilter


@dataclass(frozen=True, slots=True)
class Trend:
    """The portfolio's exposure over days: charts of addresses and of balance at risk (USD)
    per W-level per day, and the same numbers for the table beside them."""

    addresses: Markup
    balance: Markup
    days: list[LevelDay]


def _level_series(days: list[LevelDay], labels: list[str], value: str) -> list[Series]:
    """One line per W-level present: its ``value`` (``addresses`` or ``balance_usd``) per day,
    0 on a day without an address at that level."""
    found = {(d.day.isoformat(), d.level): float(getattr(d, value)) for d in days}
    present = {d.level for d in days}
    ordered = [lv for lv in LEVELS if lv in present] + sorted(present - set(LEVELS))
    return [
        Series(level, f"level-{level}", [Point(found.get((label, level), 0.0)) for label in labels])
        for level in ordered
    ]


async def exposure_trend(
    request: QdayRequest, principal: Principal, environment: Environment, only: PortfolioFilter
) -> Trend:
    """The tenant's exposure trend in ``environment`` (filtered as the portfolio is), charted."""
    days = await request.app.ctx.address_detail.trend(principal.account.id, environment, only)
    labels = sorted({d.day.isoformat() for d in days})
    addresses = line_chart(
        "chart-trend", "Watched addresses by W-level per day", labels, _level_series(days, labels, "addresses"), "count"
    )
    balance = line_chart(
        "chart-trend-usd",
        "Balance at risk (USD) by W-level per day",
        labels,
        _level_series(days, labels, "balance_usd"),
        "usd",
    )
    return Trend(addresses, balance, days)


def _history_chart(address: str, history: list[RiskDay]) -> Markup:
    """The address's risk value by day (0-100), each point coloured and named by its W-level,
    with the W-level thresholds as guides."""
    labels = [d.day.isoformat() for d in history]
    points: list[Point | None] = [Point(d.risk_value, f"level-{d.level}", d.level) for d in history]
    return line_chart(
        "chart-history",
        f"Risk value of {address} by day",
        labels,
        [Series("risk value", "risk", points)],
        "count",
        top=100,
        guides=[(band.low, f"{band.score} from {band.low}") for band in RISK_BANDS[1:]],
    )


def _view(detail: AddressDetail, environment: Environment) -> dict[str, Any]:
    body = detail.body
    coverage = body.get("coverage") or {}
    found = explorer(detail.chain, environment)
    return {
        "chain": detail.chain,
        "address": detail.address,
        "watch": detail.watch,
        "result": detail.result,
        "body": body,
        "factors": body.get("riskFactors") or [],
        "evidence": evidence_rows(body.get("exposureEvidence") or [], environment),
        "checked": coverage.get("checked") or [],
        "unavailable": coverage.get("unavailable") or [],
        "limits": coverage.get("limits") or [],
        "explorer_name": found.name if found is not None else None,
        "address_href": address_url(detail.chain, environment, detail.address),
        "history": detail.history,
        "chart_history": _history_chart(detail.address, detail.history) if detail.history else None,
    }


@dashboard.get("/address/<chain:str>/<address:str>")
@signed_in
async def address_detail(
    request: QdayRequest, principal: Principal, environment: Environment, chain: str, address: str
) -> HTTPResponse:
    """One address the tenant watches or scanned in the page's environment: its latest
    result, factors, evidence with explorer links, and its history charted by day (400 for
    an unknown chain or a malformed address, 404 for an address the tenant does not know)."""
    detail = await request.app.ctx.address_detail.detail(principal, chain, address)
    return render(
        "detail.html", **frame(request, principal, environment), level_names=LEVEL_NAMES, **_view(detail, environment)
    )
