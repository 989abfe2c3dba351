"""Signing in to the dashboard: the login and registration forms at ``/``, and logging out.

The forms post to this origin only (``check_origin``); a login counts in the ``auth`` rate
group as ``POST /v1/auth/login`` does, and sets the session cookie (``api.dashboard.session``).
"""

from __future__ import annotations

from typing import Any

from sanic import HTTPResponse
from sanic.response import redirect

from api.context import QdayRequest
from api.dashboard.frame import checked_form, dashboard, field, render, signed_in
from api.dashboard.session import CsrfRefused, check_origin, clear_session, session_principal, set_session
from api.ratelimit import RateGroup
from api.routes.accounts import log_in, register_account
from api.routes.service import home_links
from chains.environment import Environment
from core.errors import DomainError
from services.accounts import Principal


@dashboard.get("/")
async def home(request: QdayRequest) -> HTTPResponse:
    """The login and registration forms, or the portfolio when already logged in."""
    if await session_principal(request) is not None:
        return redirect("/portfolio", status=303)
    return _login(request)


def _login(request: QdayRequest, status: int = 200, **context: Any) -> HTTPResponse:
    """The login and registration page (with the service's links), saying what went wrong."""
    links = home_links(request.app.ctx.settings.dagster_url)
    return render("login.html", status, links=links, version=request.app.ctx.version, **context)


async def _signed_in_answer(request: QdayRequest, email: str, password: str) -> HTTPResponse:
    _, token, expires = await log_in(request.app.ctx, email, password)
    response = redirect("/portfolio", status=303)
    set_session(request, response, token, expires)
    return response


@dashboard.post("/login", ctx_rate_group=RateGroup.AUTH)
async def login(request: QdayRequest) -> HTTPResponse:
    """Log in from the form; the same page with the error on a wrong email or password."""
    email = field(request, "email")
    try:
        check_origin(request)
        return await _signed_in_answer(request, email, field(request, "password"))
    except CsrfRefused as exc:
        return _login(request, 403, error=str(exc))
    except DomainError as exc:
        return _login(request, 401, error=str(exc), email=email)


@dashboard.post("/register", ctx_rate_group=RateGroup.AUTH)
async def register(request: QdayRequest) -> HTTPResponse:
    """Create an account from the form and log it in."""
    email = field(request, "email")
    password = field(request, "password")
    try:
        check_origin(request)
        await register_account(request.app.ctx, email, field(request, "name") or None, password)
        return await _signed_in_answer(request, email, password)
    except CsrfRefused as exc:
        return _login(request, 403, error=str(exc))
    except DomainError as exc:
        return _login(request, 400, register_error=str(exc), register_email=email)


@dashboard.post("/logout")
@signed_in
async def logout(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """End the session (every node refuses its token from now on) and drop the cookie."""
    checked_form(request)
    await request.app.ctx.accounts.logout(principal)
    response = redirect("/", status=303)
    clear_session(response)
    return response
