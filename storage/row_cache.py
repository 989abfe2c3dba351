"""A bounded in-memory copy of rows the request path looks up again and again."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class RowCache(Generic[K, V]):
    """Rows found by key, at most ``size`` of them: a full cache starts over rather than
    tracking recency (the hot set refills in one lookup each). Only found rows go in, so
    guessing keys cannot fill memory and a row created later is always looked up."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._rows: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        """The remembered row, or None."""
        return self._rows.get(key)

    def remember(self, key: K, row: V) -> V:
        """Keep ``row`` under ``key`` and return it."""
        if len(self._rows) >= self._size:
            self._rows.clear()
        self._rows[key] = row
        return row

    def clear(self) -> None:
        """Forget every row (the store's rows changed)."""
        self._rows.clear()
