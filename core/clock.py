"""Time source of the service, injectable so tests control expiry without sleeping."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Something that tells the current UTC time."""

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""


class SystemClock:
    """The real wall clock."""

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        return datetime.now(UTC)


def iso(value: datetime) -> str:
    """ISO 8601 UTC with milliseconds and a ``Z``, the format of every API timestamp."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
