"""Routes about the service itself: health, readiness, the OpenAPI document, the docs page and the
home page at ``/`` and ``/v1`` (links for a person who opens the API in a browser)."""

from __future__ import annotations

import html

from sanic import HTTPResponse

from api.context import QdayRequest
from api.endpoints import Credential, EndpointGroup
from api.envelope import ok
from api.models.service import HealthOut, ReadyOut
from api.ratelimit import RateGroup
from services.readiness import check_readiness

group = EndpointGroup("service")
docs_group = EndpointGroup("docs", version_prefix="")


@group.route(
    "GET",
    "/health",
    summary="Liveness check",
    credential=Credential.NONE,
    rate_group=RateGroup.PROBE,
    response=HealthOut,
    tag="service",
)
async def health(request: QdayRequest) -> HTTPResponse:
    """Answers while the process serves requests; needs no credential."""
    return ok(request, HealthOut(status="ok", version=request.app.ctx.version, api_version="v1"))


@group.route(
    "GET",
    "/ready",
    summary="Readiness check (for load balancers)",
    description="200 when this node's operational store answers a read and commits an empty write "
    "transaction, each within 2 s; otherwise 503 SRV_002 naming the probe that failed. "
    "Liveness is /v1/health.",
    credential=Credential.NONE,
    rate_group=RateGroup.PROBE,
    response=ReadyOut,
    tag="service",
)
async def ready(request: QdayRequest) -> HTTPResponse:
    """Whether this node can serve requests that touch the store; needs no credential."""
    readiness = await check_readiness(request.app.ctx.database)
    return ok(
        request,
        ReadyOut(status="ready", engine=readiness.engine, read_ms=readiness.read_ms, write_ms=readiness.write_ms),
    )


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


def home_links(dagster_url: str) -> list[tuple[str, str, str]]:
    """Where a person goes from the home page and the dashboard's login page: (address,
    name, what it is)."""
    return [
        ("/docs", "API documentation", "every endpoint, model and error code"),
        ("/v1/openapi.json", "OpenAPI document", "for code generators and API tools"),
        ("/v1/health", "Health", "liveness and version"),
        ("/v1/ready", "Readiness", "whether this node's store takes reads and writes"),
        (dagster_url, "Dagster UI", "pipelines, risk tables and runs (when started with qday up)"),
    ]


def home_page(version: str, dagster_url: str) -> str:
    """The page at ``/v1``: what this is and where to go (no external resources)."""
    links = home_links(dagster_url)
    items = "".join(
        f'<li><a href="{html.escape(href)}">{html.escape(name)}</a>: {html.escape(what)}</li>'
        for href, name, what in links
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>qday</title>"
        "<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}</style>"
        f"</head><body><h1>qday</h1><p>Post-quantum keys, attestations and quantum-risk scans, version "
        f"{html.escape(version)}. The API lives under <code>/v1</code>.</p><ul>{items}</ul></body></html>"
    )


def _home(request: QdayRequest) -> HTTPResponse:
    ctx = request.app.ctx
    return HTTPResponse(home_page(ctx.version, ctx.settings.dagster_url), content_type="text/html; charset=utf-8")


_HOME = {
    "summary": "Home page: links to the docs, the OpenAPI document and the Dagster UI",
    "credential": Credential.NONE,
    "rate_group": RateGroup.PUBLIC,
    "response": str,
    "tag": "service",
    "content_type": "text/html",
    "enveloped": False,
}


@docs_group.route("GET", "/v1", **_HOME)  # type: ignore[arg-type]
async def home_v1(request: QdayRequest) -> HTTPResponse:
    """The home page at the API's base path (``/`` is the dashboard's, with the same links)."""
    return _home(request)
