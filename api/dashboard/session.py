"""The dashboard's cookie session and its CSRF defences.

The session token of ``POST /v1/auth/login`` travels in a cookie the page's scripts cannot
read (``HttpOnly``), sent only to this origin's own requests (``SameSite=Strict``) and only
over TLS except on a loopback host (``Secure``). Every state-changing form carries a CSRF
token bound to the session (HMAC-SHA256 of the token under a key derived from the master
secret), checked in constant time, and every form POST must come from this origin
(``Origin``, else ``Referer``): a cross-site form can neither read the token nor pass the
origin check, and login and registration, which have no session yet, rely on the latter.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from urllib.parse import urlsplit

from sanic import HTTPResponse

from api.context import QdayRequest
from services.accounts import Principal
from services.errors import Unauthenticated

#: The session cookie's name.
COOKIE = "qday_session"
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]"}


class CsrfRefused(Exception):
    """A form POST without this origin or without its session's CSRF token (403)."""


def csrf_token(key: bytes, session_token: str) -> str:
    """The CSRF token of a session (hex, 64 characters): stable for the session's life."""
    return hmac.new(key, b"csrf:" + session_token.encode(), hashlib.sha256).hexdigest()


def _host(request: QdayRequest) -> str:
    return (request.headers.get("host") or "").lower()


def check_origin(request: QdayRequest) -> None:
    """Refuse a POST whose ``Origin`` (else ``Referer``) is not this server's own, or that
    names neither (browsers send ``Origin`` with every form POST)."""
    source = request.headers.get("origin") or request.headers.get("referer") or ""
    parts = urlsplit(source)
    if not parts.netloc or parts.netloc.lower() != _host(request) or parts.scheme not in ("http", "https"):
        raise CsrfRefused("this form must be sent from this site's own pages")


def check_csrf(request: QdayRequest, session_token: str, sent: str | None) -> None:
    """Refuse a POST from another origin or without the session's CSRF token."""
    check_origin(request)
    expected = csrf_token(request.app.ctx.csrf_key, session_token)
    if not sent or not hmac.compare_digest(expected.encode(), sent.encode()):
        raise CsrfRefused("the form's security token is missing or stale: reload the page and send it again")


def session_token(request: QdayRequest) -> str | None:
    """The session token the request's cookie carries, if any."""
    return request.cookies.get(COOKIE) or None


async def session_principal(request: QdayRequest) -> Principal | None:
    """The logged-in account behind the cookie (None: none, expired, logged out, or not a
    session token)."""
    token = session_token(request)
    if token is None:
        return None
    try:
        principal = await request.app.ctx.accounts.authenticate(token)
    except Unauthenticated:
        return None
    return principal if principal.kind == "session" else None


def set_session(request: QdayRequest, response: HTTPResponse, token: str, expires: datetime) -> None:
    """Put the session token in the response's cookie until the token expires (as a
    lifetime, ``Max-Age``: the browser's clock need not agree with the server's)."""
    loopback = _host(request).rsplit(":", 1)[0] in _LOOPBACK_HOSTS
    lifetime = max(int((expires - request.app.ctx.clock.now()).total_seconds()), 0)
    response.add_cookie(
        COOKIE, token, path="/", max_age=lifetime, httponly=True, samesite="Strict", secure=not loopback
    )


def clear_session(response: HTTPResponse) -> None:
    """Drop the session cookie."""
    response.delete_cookie(COOKIE, path="/")
