"""The ``{data, meta}`` and ``{error, meta}`` envelopes of every response."""

from __future__ import annotations

from typing import Any

import msgspec
from sanic import HTTPResponse

from api.context import QdayRequest
from core.clock import iso

_encoder = msgspec.json.Encoder()
JSON = "application/json"


class Meta(msgspec.Struct, rename="camel"):
    """Per-response metadata: the request id (``req_<id>``) and the time."""

    request_id: str
    timestamp: str


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


def error_response(request: QdayRequest, status: int, body: ErrorBody) -> HTTPResponse:
    """An error response in the spec's envelope."""
    return HTTPResponse(_encoder.encode({"error": body, "meta": meta_of(request)}), status=status, content_type=JSON)


def no_content() -> HTTPResponse:
    """A 204 response (no body, as the spec's DELETE shows)."""
    return HTTPResponse(status=204)
