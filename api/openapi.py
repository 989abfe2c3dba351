"""The OpenAPI 3.1 document and the human docs page, generated from the endpoint
declarations and the same msgspec models the handlers validate with."""

from __future__ import annotations

import html
import re
from collections import defaultdict
from types import GenericAlias
from typing import Any

import msgspec

from api.endpoints import Credential, Endpoint, Model
from api.envelope import ErrorBody, Meta, PageMeta
from api.errors import ERROR_CODES, status_of

_REF = "#/components/schemas/{name}"
_PATH_PARAM = re.compile(r"{(\w+)}")
_COMMON_ERRORS = ("REQ_004", "RATE_001", "SRV_001", "SRV_002")
_RATE_HEADERS = {
    "X-RateLimit-Limit": {"description": "Requests allowed in the current window", "schema": {"type": "integer"}},
    "X-RateLimit-Remaining": {"description": "Requests left in the current window", "schema": {"type": "integer"}},
    "X-RateLimit-Reset": {"description": "Unix time at which the window resets", "schema": {"type": "integer"}},
    "X-Request-Id": {"description": "Same as meta.requestId", "schema": {"type": "string"}},
}


def _errors_of(endpoint: Endpoint) -> list[str]:
    codes = list(endpoint.errors)
    if endpoint.credential is not Credential.NONE:
        codes += ["AUTH_001", "AUTH_002", "AUTH_003", "REQ_007"]
    if endpoint.body is not None:
        codes += ["REQ_001", "REQ_002", "REQ_003"]
    return sorted(set(codes) | set(_COMMON_ERRORS))


def _error_schema(codes: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["error", "meta"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "details"],
                "properties": {
                    "code": {"type": "string", "enum": codes},
                    "message": {"type": "string"},
                    "details": {"type": "object"},
                },
            },
            "meta": {"$ref": _REF.format(name="Meta")},
        },
    }


#: OpenAPI links: what a successful response gives to later calls, as
#: (source method, source path) -> [(link name, target method, target path, parameters, requestBody)].
#: Clients and stateful fuzzing (schemathesis) follow them: create a resource, then act on it.
_CREATED_ID = "$response.body#/data/id"
_LINKS: dict[tuple[str, str], list[tuple[str, str, str, dict[str, str], Any]]] = {
    ("POST", "/v1/auth/api-keys"): [
        ("DeleteApiKey", "DELETE", "/v1/auth/api-keys/{key_id}", {"key_id": _CREATED_ID}, None),
        ("RotateApiKey", "POST", "/v1/auth/api-keys/{key_id}/rotate", {"key_id": _CREATED_ID}, None),
    ],
    ("POST", "/v1/auth/api-keys/{key_id}/rotate"): [
        ("DeleteReplacementKey", "DELETE", "/v1/auth/api-keys/{key_id}", {"key_id": _CREATED_ID}, None),
        ("RotateReplacementKey", "POST", "/v1/auth/api-keys/{key_id}/rotate", {"key_id": _CREATED_ID}, None),
        (
            "RotateAgain",
            "POST",
            "/v1/auth/api-keys/{key_id}/rotate",
            {"key_id": "$response.body#/data/rotatedFrom"},
            None,
        ),
    ],
    ("POST", "/v1/keys/generate"): [
        ("GetManagedKey", "GET", "/v1/keys/{id}", {"id": _CREATED_ID}, None),
        ("DeleteManagedKey", "DELETE", "/v1/keys/{id}", {"id": _CREATED_ID}, None),
        ("ManagedKeyEvents", "GET", "/v1/keys/{id}/events", {"id": _CREATED_ID}, None),
    ],
    ("DELETE", "/v1/keys/{id}"): [
        ("CancelDeletion", "POST", "/v1/keys/{id}/cancel-deletion", {"id": _CREATED_ID}, None),
    ],
    ("POST", "/v1/sign/hybrid"): [
        ("VerifyAttestation", "POST", "/v1/verify", {}, {"attestationId": _CREATED_ID}),
    ],
    ("POST", "/v1/watchlist"): [
        ("DeleteWatchedAddress", "DELETE", "/v1/watchlist/{entry_id}", {"entry_id": _CREATED_ID}, None),
    ],
}


#: The query parameters of every list endpoint (``services.pagination``).
_PAGE_PARAMS: list[dict[str, Any]] = [
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": "Page size",
        "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
    },
    {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "meta.nextCursor of the previous page (opaque); absent for the first page",
        "schema": {"type": "string", "minLength": 1, "maxLength": 200},
    },
]


def _is_list(model: Model | None) -> bool:
    """True for a ``list[...]`` response: a paged list endpoint."""
    return isinstance(model, GenericAlias) and model.__origin__ is list


def _operation_id(method: str, path: str) -> str:
    return f"{method.lower()}_{path.strip('/').replace('/', '_').replace('{', '').replace('}', '').replace('-', '_')}"


def _links_of(endpoint: Endpoint) -> dict[str, Any]:
    links: dict[str, Any] = {}
    for name, method, path, parameters, body in _LINKS.get((endpoint.method, endpoint.path), []):
        link: dict[str, Any] = {"operationId": _operation_id(method, path)}
        if parameters:
            link["parameters"] = parameters
        if body is not None:
            link["requestBody"] = body
        links[name] = link
    return links


def _operation(endpoint: Endpoint, schemas: dict[Model, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": endpoint.summary,
        "operationId": _operation_id(endpoint.method, endpoint.path),
        "tags": [endpoint.tag],
        "description": (
            endpoint.description + f"\n\nCredential: {endpoint.credential.value}. "
            f"Rate-limit group: {endpoint.rate_group.value}."
        ).strip(),
    }
    params = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
        for name in _PATH_PARAM.findall(endpoint.path)
    ]
    paged = _is_list(endpoint.response)
    if paged:
        params += _PAGE_PARAMS
    if params:
        op["parameters"] = params
    if endpoint.credential is Credential.NONE:
        op["security"] = []
    if endpoint.body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": schemas[endpoint.body]}}}
    responses: dict[str, Any] = {}
    if endpoint.response is None:
        responses[str(endpoint.status)] = {"description": "Success, no body", "headers": _RATE_HEADERS}
    elif not endpoint.enveloped:
        responses[str(endpoint.status)] = {
            "description": "Success",
            "headers": _RATE_HEADERS,
            "content": {endpoint.content_type: {"schema": schemas[endpoint.response]}},
        }
    else:
        envelope = {
            "type": "object",
            "required": ["data", "meta"],
            "properties": {
                "data": schemas[endpoint.response],
                "meta": {"$ref": _REF.format(name="PageMeta" if paged else "Meta")},
            },
        }
        content: dict[str, Any] = {"application/json": {"schema": envelope}}
        if endpoint.binary_alternative:
            content["application/octet-stream"] = {
                "schema": {"type": "string", "format": "binary", "description": endpoint.binary_alternative}
            }
        responses[str(endpoint.status)] = {"description": "Success", "headers": _RATE_HEADERS, "content": content}
    links = _links_of(endpoint)
    if links:
        responses[str(endpoint.status)]["links"] = links
    by_status: dict[int, list[str]] = defaultdict(list)
    for code in _errors_of(endpoint):
        by_status[status_of(code)].append(code)
    for status, codes in sorted(by_status.items()):
        headers = dict(_RATE_HEADERS)
        if status == 429 or "SCAN_004" in codes:
            headers["Retry-After"] = {"description": "Seconds to wait", "schema": {"type": "integer"}}
        responses[str(status)] = {
            "description": "; ".join(f"{c}: {ERROR_CODES[c][1]}" for c in codes),
            "headers": headers,
            "content": {"application/json": {"schema": _error_schema(codes)}},
        }
    op["responses"] = responses
    return op


def build_openapi(endpoints: list[Endpoint], version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the given endpoints."""
    models = sorted(
        {m for e in endpoints for m in (e.body, e.response) if m is not None} | {Meta, PageMeta, ErrorBody}, key=repr
    )
    schema_list, components = msgspec.json.schema_components(models, ref_template=_REF)
    schemas = dict(zip(models, schema_list, strict=True))
    paths: dict[str, dict[str, Any]] = defaultdict(dict)
    for endpoint in endpoints:
        paths[endpoint.path][endpoint.method.lower()] = _operation(endpoint, schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "qday: post-quantum keys, hybrid attestations and wallet quantum-risk scans",
            "version": version,
            "description": "All responses use the {data, meta} or {error, meta} envelope. See /docs.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearerAuth": []}, {"apiKeyHeader": []}],
        "paths": dict(paths),
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "description": "API key or session token"},
                "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
    }


def _fields_table(schema: dict[str, Any], components: dict[str, Any]) -> str:
    ref = schema.get("$ref")
    if ref:
        schema = components[ref.rsplit("/", 1)[1]]
    props = schema.get("properties", {})
    if not props:
        return ""
    required = set(schema.get("required", []))
    rows = "".join(
        f"<tr><td><code>{html.escape(name)}</code></td><td>{'yes' if name in required else 'no'}</td>"
        f"<td><code>{html.escape(msgspec.json.encode(spec).decode()[:160])}</code></td></tr>"
        for name, spec in props.items()
    )
    return f"<table><tr><th>field</th><th>required</th><th>schema</th></tr>{rows}</table>"


def render_docs(document: dict[str, Any]) -> str:
    """A self-contained HTML page describing every endpoint and error code."""
    components = document["components"]["schemas"]
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>qday API</title>",
        "<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "code{background:#f3f3f3;padding:0 .2em}table{border-collapse:collapse;margin:.5rem 0}"
        "td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left;vertical-align:top}"
        "h3{margin-top:2rem}</style></head><body>",
        f"<h1>{html.escape(document['info']['title'])}</h1>",
        f"<p>Version {html.escape(document['info']['version'])}. Machine-readable: "
        "<a href='/v1/openapi.json'>/v1/openapi.json</a>. Send <code>Authorization: Bearer &lt;key&gt;</code>.</p>",
    ]
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            parts.append(f"<h3><code>{method.upper()} {html.escape(path)}</code></h3>")
            parts.append(f"<p>{html.escape(op['summary'])}. {html.escape(op['description'])}</p>")
            body = op.get("requestBody")
            if body:
                parts.append(
                    "<p>Request body:</p>" + _fields_table(body["content"]["application/json"]["schema"], components)
                )
            codes = sorted(
                c
                for status, r in op["responses"].items()
                if status >= "400"
                for c in r["content"]["application/json"]["schema"]["properties"]["error"]["properties"]["code"]["enum"]
            )
            parts.append("<p>Errors: " + ", ".join(f"<code>{c}</code>" for c in codes) + "</p>")
    rows = "".join(
        f"<tr><td><code>{c}</code></td><td>{s}</td><td>{html.escape(m)}</td></tr>" for c, (s, m) in ERROR_CODES.items()
    )
    parts.append(f"<h2>Error codes</h2><table><tr><th>code</th><th>HTTP</th><th>meaning</th></tr>{rows}</table>")
    parts.append("</body></html>")
    return "".join(parts)
