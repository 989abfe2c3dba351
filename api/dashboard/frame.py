"""What every dashboard page shares: the blueprint, its templates, its security headers, the
signed-in decorator, the frame of a page and this package's stylesheet.

Server-rendered HTML (Jinja2, autoescaped) with charts drawn as SVG on the server
(``api.dashboard.charts``): every asset is this package's own, no script is needed, and the
Content-Security-Policy allows nothing from elsewhere. Pages read through the same services
as the API; a session principal acts in the environment the page names (``?env=live`` by
default, ``test``), as a secret key of that environment would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import wraps
from importlib import resources
from typing import Any, TypeVar

import msgspec
from jinja2 import Environment as Templates
from jinja2 import PackageLoader, select_autoescape
from sanic import Blueprint, HTTPResponse
from sanic.response import html, raw, redirect

from api.context import QdayRequest
from api.dashboard.session import CsrfRefused, check_csrf, csrf_token, session_principal, session_token
from api.errors import ApiError, code_of, status_of
from chains.environment import Environment
from core.errors import DomainError
from services.accounts import Principal
from services.errors import InvalidRequest

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
T = TypeVar("T")
#: How each W-level is named on the pages.
LEVEL_NAMES = {"W1": "W1 low", "W2": "W2 moderate", "W3": "W3 high", "W4": "W4 critical", "unscored": "not scored"}

#: A signed-in page: the request, the acting principal, its environment, the path's parameters.
Page = Callable[..., Awaitable[HTTPResponse]]


def field(request: QdayRequest, name: str) -> str:
    """A form field's first value ("" when absent)."""
    form = request.form
    value = form.get(name) if form is not None else None
    return value if isinstance(value, str) else ""


def form_as(data: dict[str, Any], model: type[T]) -> T:
    """A form's values held to the model of the API's JSON body for the same action, so a
    form is refused exactly where that body would be (REQ_001 with the reason)."""
    try:
        return msgspec.convert(data, model)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"invalid request: {exc}", reason=str(exc)) from None


def render(template: str, status: int = 200, **context: Any) -> HTTPResponse:
    """A template rendered as an HTML response."""
    return html(_templates.get_template(template).render(**context), status=status)


@dashboard.on_response
async def _secure_headers(request: QdayRequest, response: HTTPResponse) -> None:
    for name, value in _HEADERS.items():
        response.headers.setdefault(name, value)


def _environment(request: QdayRequest) -> Environment:
    return Environment.TEST if request.args.get("env") == "test" else Environment.LIVE


def signed_in(handler: Page) -> Callable[..., Awaitable[HTTPResponse]]:
    """A page for a logged-in account: the login page's address otherwise; a domain error
    (a refused address, a cap) or a refused form answers a page saying so, never a 500."""

    @wraps(handler)
    async def page(request: QdayRequest, **params: Any) -> HTTPResponse:
        principal = await session_principal(request)
        if principal is None:
            return redirect("/", status=303)
        environment = _environment(request)
        acting = replace(principal, environment=environment)
        try:
            return await handler(request, acting, environment, **params)
        except CsrfRefused as exc:
            return problem(request, acting, environment, str(exc), 403)
        except ApiError as exc:  # a refusal only HTTP knows (a field's text), with its code
            return problem(request, acting, environment, f"{exc} ({exc.code})", exc.status_code)
        except DomainError as exc:  # the API's own table: the same code and status as /v1 would answer
            code = code_of(exc)
            return problem(request, acting, environment, f"{exc} ({code})", status_of(code))

    return page


def checked_form(request: QdayRequest) -> None:
    """Refuse a state-changing form without this session's CSRF token (raises ``CsrfRefused``)."""
    check_csrf(request, session_token(request) or "", field(request, "csrf"))


def problem(
    request: QdayRequest, principal: Principal, environment: Environment, message: str, status: int
) -> HTTPResponse:
    """The page saying what was not done and why, with the status the API would answer."""
    return render("problem.html", status, **frame(request, principal, environment), message=message)


def frame(request: QdayRequest, principal: Principal, environment: Environment) -> dict[str, Any]:
    """What every signed-in page's frame shows: who, where, and the form token."""
    token = session_token(request) or ""
    return {
        "user": principal.account,
        "environment": environment.value,
        "csrf": csrf_token(request.app.ctx.csrf_key, token),
        "path": request.path,
    }


@dashboard.get("/static/<name:str>")
async def static(request: QdayRequest, name: str) -> HTTPResponse:
    """This package's own stylesheet (nothing from elsewhere, so the pages work offline)."""
    if name not in _STATIC:
        return html("not found", status=404)
    body = resources.files("api.dashboard").joinpath("static", name).read_bytes()
    return raw(body, content_type=_STATIC[name], headers={"Cache-Control": "public, max-age=300"})
