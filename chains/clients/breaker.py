"""A circuit breaker per upstream endpoint.

States: **closed** (requests flow; consecutive failures are counted), **open** (after
``failures`` consecutive failures: every request fails at once, without touching the
network, for ``cooldown`` seconds), **half-open** (after the cool-down: one probe request
is let through; its success closes the breaker, its failure opens it for another
cool-down). A failing endpoint is then asked once per cool-down instead of once per scan,
and callers get an immediate SCAN_004 instead of waiting out timeouts and retries.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from chains.endpoints import BreakerSettings
from chains.errors import ChainUnavailable


class BreakerState(enum.StrEnum):
    """Where the breaker is in its cycle."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitOpen(ChainUnavailable):
    """The endpoint's breaker is open: the request was refused without being sent."""


class CircuitBreaker:
    """Counts consecutive failures of one endpoint and refuses requests while it is open.

    ``clock`` is a monotonic clock in seconds (injectable for tests). Not thread-safe; it
    lives on one event loop like the clients that use it.
    """

    def __init__(self, settings: BreakerSettings, label: str, clock: Callable[[], float]) -> None:
        """``label`` names the endpoint (redacted) in the error raised while open."""
        self._settings = settings
        self._label = label
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> BreakerState:
        """The current state (an open breaker whose cool-down has passed is half-open)."""
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock() - self._opened_at >= self._settings.cooldown:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    def before_request(self) -> None:
        """Let a request through, or raise ``CircuitOpen``.

        While half-open only one probe is in flight at a time; others are refused until it
        has reported.
        """
        state = self.state
        if state is BreakerState.CLOSED:
            return
        if state is BreakerState.HALF_OPEN and not self._probing:
            self._probing = True
            return
        wait = self.cooldown_left()
        raise CircuitOpen(
            f"{self._label} is failing ({self._failures} consecutive failures); circuit open, "
            f"next attempt in {wait:.0f}s",
            endpoint=self._label,
            retry_after=round(wait, 3),
        )

    def cooldown_left(self) -> float:
        """Seconds until an open breaker lets a probe through (0 when closed or half-open):
        what a caller should wait before asking again (the API's ``Retry-After``)."""
        if self._opened_at is None:
            return 0.0
        return max(0.0, self._opened_at + self._settings.cooldown - self._clock())

    def record_success(self) -> None:
        """The endpoint answered: close the breaker and reset the count."""
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def record_failure(self) -> None:
        """The endpoint failed (connection, timeout, 5xx, 429, unusable body).

        The ``failures``-th consecutive failure, or a failed half-open probe, opens the
        breaker for a new cool-down.
        """
        self._failures += 1
        if self._probing or self._failures >= self._settings.failures:
            self._opened_at = self._clock()
        self._probing = False
