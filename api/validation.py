"""Strict decoding of JSON request bodies into msgspec models.

Unknown, missing and mistyped fields become a 400 ``REQ_001`` whose details
name the field; a body that is not JSON is ``REQ_002``; a wrong Content-Type
is ``REQ_003``. Query strings and chosen text (names, labels) are checked here too:
control and bidirectional-override characters are a ``REQ_001`` (``core.text``).
"""

from __future__ import annotations

import re
from typing import TypeVar, overload
from urllib.parse import parse_qsl

import msgspec

from api.context import QdayRequest
from api.errors import ApiError
from core.text import UNSAFE_DESCRIPTION, nfc, unsafe_character

T = TypeVar("T")

_AT_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_NAMED_FIELD = re.compile(r"(?:missing required field|unknown field) `(?P<name>[^`]+)`")


def _field_of(message: str) -> tuple[str, str]:
    path = ""
    reason = message
    match = _AT_PATH.search(message)
    if match:
        path = match.group("path")
        reason = message[: match.start()]
    named = _NAMED_FIELD.search(reason)
    if named:
        path = f"{path}.{named.group('name')}"
    return path.lstrip("."), reason


def decode_body(request: QdayRequest, model: type[T]) -> T:
    """The request body decoded into ``model``; raises ``ApiError`` with a clear
    field-level reason when it does not fit."""
    content_type = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise ApiError("REQ_003", "Content-Type must be application/json", received=content_type or None)
    return decode_json(request.body or b"", model)


def decode_json(body: bytes, model: type[T]) -> T:
    """JSON text decoded into ``model`` with the API's own refusals (``REQ_002`` when empty
    or not JSON, ``REQ_001`` naming the field that does not fit): for a request body and for
    JSON pasted into a dashboard form alike."""
    if not body.strip():
        raise ApiError("REQ_002", "request body is empty; a JSON object is required")
    try:
        return msgspec.json.decode(body, type=model)
    except msgspec.ValidationError as exc:
        field, reason = _field_of(str(exc))
        raise ApiError(
            "REQ_001",
            f"invalid request: {reason}" + (f" (field '{field}')" if field else ""),
            field=field or None,
            reason=reason,
        ) from None
    except msgspec.DecodeError as exc:
        raise ApiError("REQ_002", f"request body is not valid JSON: {exc}") from None
    except UnicodeDecodeError:  # msgspec raises this, not DecodeError, for bad UTF-8 inside a string
        raise ApiError("REQ_002", "request body is not valid JSON: a string in it is not valid UTF-8") from None


def _refuse(field: str, char: str) -> ApiError:
    reason = f"contains {char}: {UNSAFE_DESCRIPTION} are not allowed"
    return ApiError("REQ_001", f"invalid request: {reason} (field '{field}')", field=field, reason=reason)


def check_query(request: QdayRequest) -> None:
    """Refuse a query string with a control or bidirectional-override character in any
    name or value (after percent-decoding): ``REQ_001`` naming the parameter."""
    if not request.query_string:
        return
    for name, value in parse_qsl(request.query_string, keep_blank_values=True, errors="replace"):
        in_name = unsafe_character(name)
        char = in_name or unsafe_character(value)
        if char is not None:
            shown = name if in_name is None else name.encode("unicode_escape").decode("ascii")
            raise _refuse(shown[:64], char)


@overload
def text_field(value: str, field: str) -> str: ...
@overload
def text_field(value: None, field: str) -> None: ...
def text_field(value: str | None, field: str) -> str | None:
    """A chosen name or label as stored (NFC); ``REQ_001`` naming ``field`` when it holds
    a control or bidirectional-override character. None stays None."""
    if value is None:
        return None
    char = unsafe_character(value)
    if char is not None:
        raise _refuse(field, char)
    return nfc(value)
