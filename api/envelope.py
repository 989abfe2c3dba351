"""The ``{data, meta}`` and ``{error, meta}`` envelopes of every response."""

from __future__ import annotations

from typing import Any

import msgspec
from sanic import HTTPResponse

from api.context import QdayRequest
from core.clock import iso
from services.pagination import PageRequest, page_request

_encoder = msgspec.json.Encoder()
JSON = "application/json"
#: What every list endpoint's description says about its pages.
PAGED = (
    "Paged: ?limit= (1-1000, default 100) and &cursor= (meta.nextCursor of the previous page; null on the last "
    "page). Pages are read by keyset, so entries added meanwhile never shift a page. A bad limit or cursor: REQ_001."
)


class Meta(msgspec.Struct, rename="camel"):
    """Per-response metadata: the request id (``req_<id>``) and the time."""

    request_id: str
    timestamp: str


class PageMeta(Meta):
    """``meta`` of a list response: also the cursor of the next page (null at the end)."""

    next_cursor: str | None


class ErrorBody(msgspec.Struct):
    """The ``error`` member of an error response."""

    code: str
    message: str
    details: dict[str, Any] = {}


def meta_of(request: QdayRequest) -> Meta:
    """The ``meta`` member for a response to this request."""
    return Meta(request_id=request.ctx.request_id, timestamp=iso(request.app.ctx.clock.now()))


def ok(request: QdayRequest, data: Any, status: int = 200) -> HTTPResponse:
    """A success response wrapping ``data`` (any msgspec-encodable value)."""
    body = _encoder.encode({"data": data, "meta": meta_of(request)})
    return HTTPResponse(body, status=status, content_type=JSON)


def requested_page(request: QdayRequest) -> PageRequest:
    """The page a list request asks for: ``?limit=`` (1..1000, default 100) and
    ``&cursor=`` (from the previous page's ``meta.nextCursor``); REQ_001 otherwise."""
    return page_request(request.args.get("limit"), request.args.get("cursor"))


def ok_page(request: QdayRequest, items: list[Any], next_cursor: str | None) -> HTTPResponse:
    """A list response: the page's items as ``data``, the next cursor in ``meta.nextCursor``."""
    meta = PageMeta(request.ctx.request_id, iso(request.app.ctx.clock.now()), next_cursor)
    return HTTPResponse(_encoder.encode({"data": items, "meta": meta}), status=200, content_type=JSON)


def error_response(request: QdayRequest, status: int, body: ErrorBody) -> HTTPResponse:
    """An error response in the spec's envelope."""
    return HTTPResponse(_encoder.encode({"error": body, "meta": meta_of(request)}), status=status, content_type=JSON)


def no_content() -> HTTPResponse:
    """A 204 response (no body, as the spec's DELETE shows)."""
    return HTTPResponse(status=204)
