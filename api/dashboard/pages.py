"""The dashboard's pages (issue 20), served by the API at ``/`` on the same origin.

Server-rendered HTML (Jinja2, autoescaped) with charts drawn as SVG on the server
(``api.dashboard.charts``): every asset is this package's own, no script is needed, and the
Content-Security-Policy allows nothing from elsewhere. Pages read through the same services
as the API; a session principal acts in the environment the page names (``?env=live`` by
default, ``test``), as a secret key of that environment would.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import wraps
from importlib import resources
from typing import Any

import msgspec
from jinja2 import Environment as Templates
from jinja2 import PackageLoader, select_autoescape
from sanic import Blueprint, HTTPResponse
from sanic.response import html, raw, redirect

from api.context import QdayRequest
from api.dashboard.charts import Bar, Segment, bar_chart
from api.dashboard.session import (
    CsrfRefused,
    check_csrf,
    check_origin,
    clear_session,
    csrf_token,
    session_principal,
    session_token,
    set_session,
)
from api.errors import code_of, status_of
from api.ratelimit import RateGroup
from api.routes.accounts import log_in, register_account
from api.routes.service import home_links
from chains.environment import Environment
from core.errors import DomainError
from services.accounts import Principal
from services.pagination import PageRequest
from services.portfolio import LEVELS, Portfolio, chains, portfolio_filter
from storage.sql_portfolio import PortfolioRow

dashboard = Blueprint("dashboard")
_templates = Templates(loader=PackageLoader("api.dashboard", "templates"), autoescape=select_autoescape(default=True))

#: Files under /static/ (nothing else of the package is served).
_STATIC = {"qday.css": "text/css; charset=utf-8"}
#: The policy of every dashboard response: this origin only, no inline script or style.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
    " font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make Chromium send "Origin: null" with forms
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
PAGE_SIZE = 50
_LEVEL_NAMES = {"W1": "W1 low", "W2": "W2 moderate", "W3": "W3 high", "W4": "W4 critical", "unscored": "not scored"}

Page = Callable[[QdayRequest, Principal, Environment], Awaitable[HTTPResponse]]


def _field(request: QdayRequest, name: str) -> str:
    """A form field's first value ("" when absent)."""
    form = request.form
    value = form.get(name) if form is not None else None
    return value if isinstance(value, str) else ""


def _render(template: str, status: int = 200, **context: Any) -> HTTPResponse:
    return html(_templates.get_template(template).render(**context), status=status)


@dashboard.on_response
async def _secure_headers(request: QdayRequest, response: HTTPResponse) -> None:
    for name, value in _HEADERS.items():
        response.headers.setdefault(name, value)


def _environment(request: QdayRequest) -> Environment:
    return Environment.TEST if request.args.get("env") == "test" else Environment.LIVE


def signed_in(handler: Page) -> Callable[[QdayRequest], Awaitable[HTTPResponse]]:
    """A page for a logged-in account: the login page's address otherwise; a domain error
    (a refused address, a cap) or a refused form answers a page saying so, never a 500."""

    @wraps(handler)
    async def page(request: QdayRequest, **_: Any) -> HTTPResponse:
        principal = await session_principal(request)
        if principal is None:
            return redirect("/", status=303)
        environment = _environment(request)
        acting = replace(principal, environment=environment)
        try:
            return await handler(request, acting, environment)
        except CsrfRefused as exc:
            return _problem(request, acting, environment, str(exc), 403)
        except DomainError as exc:  # the API's own table: the same code and status as /v1 would answer
            code = code_of(exc)
            return _problem(request, acting, environment, f"{exc} ({code})", status_of(code))

    return page


def _problem(
    request: QdayRequest, principal: Principal, environment: Environment, message: str, status: int
) -> HTTPResponse:
    return _render("problem.html", status, **_frame(request, principal, environment), message=message)


def _frame(request: QdayRequest, principal: Principal, environment: Environment) -> dict[str, Any]:
    """What every signed-in page's frame shows: who, where, and the form token."""
    token = session_token(request) or ""
    return {
        "user": principal.account,
        "environment": environment.value,
        "csrf": csrf_token(request.app.ctx.csrf_key, token),
        "path": request.path,
    }


# --- signing in ----------------------------------------------------------------------------


@dashboard.get("/")
async def home(request: QdayRequest) -> HTTPResponse:
    """The login and registration forms, or the portfolio when already logged in."""
    if await session_principal(request) is not None:
        return redirect("/portfolio", status=303)
    return _login(request)


def _login(request: QdayRequest, status: int = 200, **context: Any) -> HTTPResponse:
    """The login and registration page (with the service's links), saying what went wrong."""
    links = home_links(request.app.ctx.settings.dagster_url)
    return _render("login.html", status, links=links, version=request.app.ctx.version, **context)


async def _signed_in_answer(request: QdayRequest, email: str, password: str) -> HTTPResponse:
    _, token, expires = await log_in(request.app.ctx, email, password)
    response = redirect("/portfolio", status=303)
    set_session(request, response, token, expires)
    return response


@dashboard.post("/login", ctx_rate_group=RateGroup.AUTH)
async def login(request: QdayRequest) -> HTTPResponse:
    """Log in from the form; the same page with the error on a wrong email or password."""
    email = _field(request, "email")
    try:
        check_origin(request)
        return await _signed_in_answer(request, email, _field(request, "password"))
    except CsrfRefused as exc:
        return _login(request, 403, error=str(exc))
    except DomainError as exc:
        return _login(request, 401, error=str(exc), email=email)


@dashboard.post("/register", ctx_rate_group=RateGroup.AUTH)
async def register(request: QdayRequest) -> HTTPResponse:
    """Create an account from the form and log it in."""
    email = _field(request, "email")
    password = _field(request, "password")
    try:
        check_origin(request)
        await register_account(request.app.ctx, email, _field(request, "name") or None, password)
        return await _signed_in_answer(request, email, password)
    except CsrfRefused as exc:
        return _login(request, 403, error=str(exc))
    except DomainError as exc:
        return _login(request, 400, register_error=str(exc), register_email=email)


@dashboard.post("/logout")
@signed_in
async def logout(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """End the session (every node refuses its token from now on) and drop the cookie."""
    check_csrf(request, session_token(request) or "", _field(request, "csrf"))
    await request.app.ctx.accounts.logout(principal)
    response = redirect("/", status=303)
    clear_session(response)
    return response


# --- the portfolio -------------------------------------------------------------------------


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
        [Bar(_LEVEL_NAMES.get(level, level), [Segment(level, n, f"level-{level}")]) for level, n in by_level.items()],
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
    return _render(
        "portfolio.html",
        **_frame(request, principal, environment),
        portfolio=data,
        rows=[_row_view(r) for r in data.page.items],
        chains=chains(),
        levels=LEVELS,
        level_names=_LEVEL_NAMES,
        only=only,
        chart_balance=at_risk,
        chart_levels=distribution,
    )


@dashboard.post("/portfolio/watch")
@signed_in
async def watch(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Watch an address from the form and scan it at once, so it shows with its level."""
    check_csrf(request, session_token(request) or "", _field(request, "csrf"))
    ctx = request.app.ctx
    address = _field(request, "address").strip()
    chain = _field(request, "chain") or None
    label = _field(request, "label") or None
    entry = await ctx.scans.watch(principal, address, chain, label, ctx.settings.enterprise_watch_cap)
    try:
        await ctx.scans.scan(principal, entry.address, entry.chain, refresh=False)
    except DomainError as exc:  # watched all the same: the daily rescoring scores it
        code = code_of(exc)
        message = f"{entry.address} on {entry.chain} is watched but could not be scored now: {exc} ({code})"
        return _problem(request, principal, environment, message, status_of(code))
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


# --- static files ----------------------------------------------------------------------------


@dashboard.get("/static/<name:str>")
async def static(request: QdayRequest, name: str) -> HTTPResponse:
    """This package's own stylesheet (nothing from elsewhere, so the pages work offline)."""
    if name not in _STATIC:
        return html("not found", status=404)
    body = resources.files("api.dashboard").joinpath("static", name).read_bytes()
    return raw(body, content_type=_STATIC[name], headers={"Cache-Control": "public, max-age=300"})
