"""Fuzz request-body decoding (``api.validation.decode_body``: msgspec into the endpoint
models) for every endpoint that takes a body.

Passes: an instance of the endpoint's model that survives an encode/decode round trip, or
an ``ApiError`` with ``REQ_001`` (naming a field when msgspec names one), ``REQ_002`` or
``REQ_003`` and the status ``api.errors`` gives that code. Input: byte 0 picks the endpoint,
byte 1 the Content-Type header, the rest is the body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import atheris
import msgspec

with atheris.instrument_imports(include=["api.validation"]):
    from api.validation import decode_body

from api.app import all_endpoints
from api.errors import ApiError, status_of
from fuzz.runner import run

_MODELS: tuple[type, ...] = tuple(dict.fromkeys(e.body for e in all_endpoints() if e.body is not None))
_CONTENT_TYPES = ("application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "text/plain", "")


@dataclass(frozen=True, slots=True)
class _Request:
    """The two attributes of a Sanic request that ``decode_body`` reads."""

    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def check(model: type, content_type: str, body: bytes) -> None:
    """Decode ``body`` as ``model``; raise AssertionError unless the outcome is a documented one."""
    request = _Request(body, {"content-type": content_type} if content_type else {})
    try:
        value = decode_body(request, model)  # type: ignore[arg-type]
    except ApiError as exc:
        assert exc.code in ("REQ_001", "REQ_002", "REQ_003"), exc.code
        assert exc.status_code == status_of(exc.code)
        assert isinstance(exc.details.get("field", ""), str)
        return
    assert isinstance(value, model)
    assert msgspec.json.decode(msgspec.json.encode(value), type=model) == value


def test_one_input(data: bytes) -> None:
    """libFuzzer's entry point: one body for one endpoint."""
    if len(data) >= 2:
        check(_MODELS[data[0] % len(_MODELS)], _CONTENT_TYPES[data[1] % len(_CONTENT_TYPES)], data[2:])


def _example(schema: dict[str, Any], components: dict[str, Any]) -> Any:
    ref = schema.get("$ref")
    if ref:
        return _example(components[ref.rsplit("/", 1)[1]], components)
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return _example(schema[union][0], components)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {name: _example(spec, components) for name, spec in schema.get("properties", {}).items()}
    return {"string": "ab", "integer": 1, "number": 1.5, "boolean": True, "array": []}.get(kind)


def seeds() -> list[bytes]:
    """One body per model with every field present (typed placeholder values), and `{}`."""
    schemas, components = msgspec.json.schema_components(_MODELS)
    found = []
    for index, schema in enumerate(schemas):
        for body in (msgspec.json.encode(_example(schema, components)), b"{}"):
            found.append(bytes([index, 0]) + body)
    return found


if __name__ == "__main__":
    run("bodies", test_one_input, seeds())
