"""Endpoint declarations: one place says each route's method, path, models,
credential, rate-limit group and errors. The router, the auth middleware and
the OpenAPI document all read these declarations, so they cannot drift apart.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import GenericAlias, UnionType
from typing import Any

from sanic import Blueprint, HTTPResponse

from api.context import QdayRequest
from api.ratelimit import RateGroup
from api.validation import check_query, decode_body


class Credential(enum.Enum):
    """The least credential an endpoint accepts."""

    NONE = "none"
    SESSION_OR_SECRET = "session token or secret key"
    SECRET = "secret key"
    ANY_KEY = "publishable or secret key"


#: A msgspec type expression: a model, a union of models or ``list[Model]``.
Model = type | UnionType | GenericAlias


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Everything the service knows about one route."""

    method: str
    path: str  # full path, e.g. /v1/auth/api-keys/{id}
    summary: str
    credential: Credential
    rate_group: RateGroup
    body: type | None = None
    response: Model | None = None  # the ``data`` model; None for 204 or non-JSON
    status: int = 200
    errors: tuple[str, ...] = ()
    tag: str = "service"
    description: str = ""
    content_type: str = "application/json"
    enveloped: bool = True  # False for documents served as they are (OpenAPI, HTML)
    binary_alternative: str = ""  # description of an application/octet-stream success body, if offered


Handler = Callable[..., Awaitable[HTTPResponse]]


class EndpointGroup:
    """A Sanic blueprint plus the declarations of the routes added to it."""

    def __init__(self, name: str, url_prefix: str = "", version_prefix: str = "/v1") -> None:
        self.blueprint = Blueprint(name, url_prefix=version_prefix + url_prefix)
        self.prefix = version_prefix + url_prefix
        self.endpoints: list[Endpoint] = []

    def route(
        self,
        method: str,
        path: str,
        *,
        summary: str,
        credential: Credential,
        rate_group: RateGroup,
        body: type | None = None,
        response: Model | None = None,
        status: int = 200,
        errors: tuple[str, ...] = (),
        tag: str = "service",
        description: str = "",
        content_type: str = "application/json",
        enveloped: bool = True,
        binary_alternative: str = "",
    ) -> Callable[[Handler], Handler]:
        """Register a handler under its declaration (the fields of ``Endpoint``); with
        ``body=Model`` it receives the decoded body as its second argument."""

        def decorate(handler: Handler) -> Handler:
            endpoint = Endpoint(
                method=method,
                path=self.prefix + path,
                summary=summary,
                credential=credential,
                rate_group=rate_group,
                body=body,
                response=response,
                status=status,
                errors=errors,
                tag=tag,
                description=description,
                content_type=content_type,
                enveloped=enveloped,
                binary_alternative=binary_alternative,
            )
            self.endpoints.append(endpoint)
            sanic_path = path.replace("{", "<").replace("}", ">")

            @functools.wraps(handler)
            async def wrapped(request: QdayRequest, **params: Any) -> HTTPResponse:
                check_query(request)
                if endpoint.body is not None:
                    return await handler(request, decode_body(request, endpoint.body), **params)
                return await handler(request, **params)

            self.blueprint.add_route(
                wrapped,
                sanic_path or "/",
                methods=[method],
                name=handler.__name__,
                ctx_endpoint=endpoint,
                strict_slashes=False,
            )
            return handler

        return decorate
