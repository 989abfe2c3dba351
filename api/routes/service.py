"""Routes about the service itself: health, the OpenAPI document, the docs page."""

from __future__ import annotations

from sanic import HTTPResponse

from api.context import QdayRequest
from api.endpoints import Credential, EndpointGroup
from api.envelope import ok
from api.models.service import HealthOut
from api.ratelimit import RateGroup

group = EndpointGroup("service")
docs_group = EndpointGroup("docs", version_prefix="")


@group.route(
    "GET",
    "/health",
    summary="Liveness check",
    credential=Credential.NONE,
    rate_group=RateGroup.PUBLIC,
    response=HealthOut,
    tag="service",
)
async def health(request: QdayRequest) -> HTTPResponse:
    """Answers while the process serves requests; needs no credential."""
    return ok(request, HealthOut(status="ok", version=request.app.ctx.version, api_version="v1"))


@group.route(
    "GET",
    "/openapi.json",
    summary="This OpenAPI 3.1 document",
    credential=Credential.NONE,
    rate_group=RateGroup.PUBLIC,
    response=dict,
    tag="service",
    enveloped=False,
)
async def openapi_document(request: QdayRequest) -> HTTPResponse:
    """The OpenAPI document (not enveloped: tools read it as it is)."""
    return HTTPResponse(request.app.ctx.openapi_json, content_type="application/json")


@docs_group.route(
    "GET",
    "/docs",
    summary="Human-readable API documentation",
    credential=Credential.NONE,
    rate_group=RateGroup.PUBLIC,
    response=str,
    tag="service",
    content_type="text/html",
    enveloped=False,
)
async def docs_page(request: QdayRequest) -> HTTPResponse:
    """The HTML docs page generated from the OpenAPI document."""
    return HTTPResponse(request.app.ctx.docs_html, content_type="text/html; charset=utf-8")
