"""Cursor pagination of every list: a page size and an opaque cursor in, a page and
the next page's cursor out. Free of HTTP; bad values are ``InvalidRequest``.

Lists are read by keyset on (created_at, id) (a managed key's audit log: by its
order of writing), never by offset, so rows added while a client pages through
never shift a page: nothing is skipped or repeated. A cursor is the URL-safe base64
of the list's tag and the last row's position; it is not a secret and grants
nothing (every list is still scoped by the caller's account and environment).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from services.errors import InvalidRequest
from storage.models import Keyset

T = TypeVar("T")
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_MAX_CURSOR = 200  # characters; ours are well under 100
_MAX_ID = 64


@dataclass(frozen=True, slots=True)
class PageRequest:
    """What a caller asked for: at most ``limit`` rows after ``cursor`` (None: from the start)."""

    limit: int = DEFAULT_LIMIT
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list and the cursor of the next one (None at the end)."""

    items: list[T]
    next_cursor: str | None


def page_request(limit: str | None, cursor: str | None) -> PageRequest:
    """A ``PageRequest`` from the raw query values; ``InvalidRequest`` (field ``limit``
    or ``cursor``) when the limit is not a whole number from 1 to ``MAX_LIMIT`` or the
    cursor is empty or over-long (its content is checked by the list it is used with)."""
    size = DEFAULT_LIMIT
    if limit is not None:
        text = limit.strip()
        if not (text.isascii() and text.isdigit() and len(text) <= 6) or not 1 <= int(text) <= MAX_LIMIT:
            raise InvalidRequest(
                f"invalid request: limit must be a whole number from 1 to {MAX_LIMIT} (field 'limit')",
                field="limit",
                reason=f"not an integer in 1..{MAX_LIMIT}",
            )
        size = int(text)
    if cursor is not None and not 0 < len(cursor) <= _MAX_CURSOR:
        raise _bad_cursor()
    return PageRequest(size, cursor)


def _bad_cursor() -> InvalidRequest:
    return InvalidRequest(
        "invalid request: cursor is not one this list returned (field 'cursor')",
        field="cursor",
        reason="malformed cursor",
    )


def _encode(parts: Sequence[str]) -> str:
    return base64.urlsafe_b64encode("|".join(parts).encode()).decode().rstrip("=")


def _decode(cursor: str, tag: str, count: int) -> list[str]:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, ValueError):
        raise _bad_cursor() from None
    parts = text.split("|")
    if len(parts) != count or parts[0] != tag or any(not p or len(p) > _MAX_ID for p in parts[1:]):
        raise _bad_cursor()
    return parts[1:]


def keyset_cursor(tag: str, created_at: datetime, row_id: str) -> str:
    """The cursor after a row of a (created_at, id)-ordered list tagged ``tag``."""
    return _encode((tag, created_at.isoformat(timespec="microseconds"), row_id))


def keyset_after(tag: str, cursor: str | None) -> Keyset | None:
    """The position a cursor of list ``tag`` names (None: from the start)."""
    if cursor is None:
        return None
    at, row_id = _decode(cursor, tag, 3)
    try:
        created_at = datetime.fromisoformat(at)
    except ValueError:
        raise _bad_cursor() from None
    if created_at.tzinfo is None:
        raise _bad_cursor()
    return created_at, row_id


def id_cursor(tag: str, row_id: str) -> str:
    """The cursor after a row of a list ordered by something only the store knows
    (a managed key's audit log): the row's id."""
    return _encode((tag, row_id))


def id_after(tag: str, cursor: str | None) -> str | None:
    """The row id an ``id_cursor`` of list ``tag`` names (None: from the start)."""
    return None if cursor is None else _decode(cursor, tag, 2)[0]


def page_of(rows: list[T], limit: int, cursor_of: Callable[[T], str]) -> Page[T]:
    """The page from ``limit + 1`` rows read: the first ``limit``, and the cursor after
    the last of them when there was one more."""
    if len(rows) > limit:
        items = rows[:limit]
        return Page(items, cursor_of(items[-1]))
    return Page(rows, None)
