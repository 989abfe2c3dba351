"""Per-minute rate limits from the spec's table, counted per (IP, credential)
and per IP: in memory for a single worker, in a SQLite file shared by every
worker process when there are several.

Fixed one-minute windows aligned on the minute: ``X-RateLimit-Reset`` is the end
of the current window. The length comes from the ``rate_window_seconds`` setting
(60 by default; tests pick their own), windows aligned on multiples of it. A request
must fit both its (IP, credential) counter and its IP counter, each against the
caller's plan limit, so clients behind one IP share that IP's allowance (spec,
Limits rule 3).
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass
from typing import Protocol

from storage.models import Plan
from storage.repository import WindowCounters

#: The spec's limits are per minute.
DEFAULT_WINDOW_SECONDS = 60


class RateGroup(enum.StrEnum):
    """Endpoint groups that share one limit (the rows of the spec's table)."""

    SCAN = "scan"
    KEYGEN = "keygen"
    SIGN = "sign"
    VERIFY = "verify"
    AUTH = "auth"  # POST /v1/auth/*
    ACCOUNT = "account"  # other authenticated endpoints (not in the spec's table)
    PUBLIC = "public"  # unauthenticated reads: health, OpenAPI, docs, unknown paths


#: Requests per minute by group and plan. Enterprise is "custom" in the spec:
#: it gets ``enterprise_limit_factor`` times the Pro limit unless configured.
BASE_LIMITS: dict[RateGroup, dict[Plan, int]] = {
    RateGroup.SCAN: {Plan.FREE: 10, Plan.BUILDER: 60, Plan.PRO: 300},
    RateGroup.KEYGEN: {Plan.FREE: 5, Plan.BUILDER: 30, Plan.PRO: 100},
    RateGroup.SIGN: {Plan.FREE: 5, Plan.BUILDER: 30, Plan.PRO: 100},
    RateGroup.VERIFY: {Plan.FREE: 20, Plan.BUILDER: 120, Plan.PRO: 600},
    RateGroup.AUTH: {Plan.FREE: 10, Plan.BUILDER: 10, Plan.PRO: 10, Plan.ENTERPRISE: 10},
    RateGroup.ACCOUNT: {Plan.FREE: 60, Plan.BUILDER: 300, Plan.PRO: 1200},
    RateGroup.PUBLIC: {Plan.FREE: 600, Plan.BUILDER: 600, Plan.PRO: 600, Plan.ENTERPRISE: 600},
}


@functools.lru_cache(maxsize=256)
def limit_for(group: RateGroup, plan: Plan, enterprise_factor: int, multiplier: float) -> int:
    """Requests per minute allowed for a plan in a group (computed once per combination)."""
    limits = BASE_LIMITS[group]
    base = limits.get(plan, limits[Plan.PRO] * enterprise_factor)
    return max(1, math.floor(base * multiplier))


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of counting one request: allowed or not, and the header values."""

    allowed: bool
    limit: int
    remaining: int
    reset: int  # Unix time at which the window ends

    def retry_after(self, now: float) -> int:
        """Whole seconds until the window resets (at least 1)."""
        return max(1, math.ceil(self.reset - now))


class RateLimiter(Protocol):
    """Counts requests per bucket and window."""

    def hit(self, buckets: tuple[str, ...], limit: int, now: float) -> Decision:
        """Count one request against every bucket and decide if it fits all of them."""

    def close(self) -> None:
        """Release resources."""


def _window_start(now: float, window_seconds: int) -> int:
    return int(now) - int(now) % window_seconds


def _decision(counts: list[int], limit: int, end: int) -> Decision:
    worst = max(counts)
    return Decision(allowed=worst <= limit, limit=limit, remaining=max(0, limit - worst), reset=end)


def _checked_window(window_seconds: int) -> int:
    if window_seconds < 1:
        raise ValueError(f"window_seconds must be positive, got {window_seconds}")
    return window_seconds


class MemoryRateLimiter:
    """Exact counters in this process: right when one worker serves the API."""

    def __init__(self, window_seconds: int = DEFAULT_WINDOW_SECONDS) -> None:
        self._window = _checked_window(window_seconds)
        self._start = 0
        self._counts: dict[str, int] = {}

    def hit(self, buckets: tuple[str, ...], limit: int, now: float) -> Decision:
        """Count one request against every bucket and decide if it fits all of them."""
        start = _window_start(now, self._window)
        if start != self._start:
            self._start, self._counts = start, {}
        counts = []
        for bucket in buckets:
            count = self._counts.get(bucket, 0) + 1
            self._counts[bucket] = count
            counts.append(count)
        return _decision(counts, limit, start + self._window)

    def close(self) -> None:
        """Nothing to release."""


class SharedRateLimiter:
    """Counters shared by every worker, kept by the store (``WindowCounters``):
    exact across processes."""

    def __init__(self, counters: WindowCounters, window_seconds: int = DEFAULT_WINDOW_SECONDS) -> None:
        self._window = _checked_window(window_seconds)
        self._counters = counters

    def hit(self, buckets: tuple[str, ...], limit: int, now: float) -> Decision:
        """Count one request against every bucket and decide if it fits all of them."""
        start = _window_start(now, self._window)
        counts = self._counters.count(buckets, start, prune_before=start - self._window)
        return _decision(counts, limit, start + self._window)

    def close(self) -> None:
        """Release the counters."""
        self._counters.close()
