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

from api.errors import ApiError, status_of
from api.models import accounts, crypto, custody, scans, webhooks
from fuzz.runner import run


def request_models() -> tuple[type, ...]:
    """Every request-body model: the strict (unknown fields refused) structs with fields in
    ``api.models``. Read from the model modules rather than ``api.app.all_endpoints()`` to
    keep start-up short (the app imports web3 and Polars); tests/security/test_fuzz_smoke.py
    checks that the two lists agree."""
    found = []
    for module in (accounts, crypto, custody, scans, webhooks):
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, msgspec.Struct)
                and value.__module__ == module.__name__
                and value.__struct_config__.forbid_unknown_fields
                and value.__struct_fields__
            ):
                found.append(value)
    return tuple(found)


_MODELS = request_models()
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
        value = decode_body(request, model)  # type: ignore[arg-type]  # a stand-in with the request's two attributes
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
