"""Helpers of the chain-client tests: a fake monotonic clock and the fixed observation time."""

from __future__ import annotations

from datetime import UTC, datetime

from chains.clients.transport import Timing

OBSERVED_AT = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class FakeClock:
    """A monotonic clock that only moves when told to, and a sleep that moves it."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def timing(self, jitter: float = 0.5) -> Timing:
        """A ``Timing`` on this clock whose jitter draws are always ``jitter``."""
        return Timing(sleep=self.sleep, random=lambda: jitter, monotonic=self.monotonic, now=lambda: OBSERVED_AT)
