"""Per-minute rate limits from the spec's table, counted per credential (across
every IP) and per client IP: in memory for a single worker, in a SQLite file
shared by every worker process when there are several.

Fixed one-minute windows aligned on the minute: ``X-RateLimit-Reset`` is the end
of the current window. The length comes from the ``rate_window_seconds`` setting
(60 by default; tests pick their own), windows aligned on multiples of it.

The buckets of one request (``buckets_for``):

- an authenticated request counts against its credential's bucket (the plan's
  limit, whatever IP it comes from) and its IP's bucket (the same limit, so
  keys behind one IP share that IP's allowance: spec, Limits rule 3);
- a request to an endpoint that takes no credential counts against its IP's
  bucket only (free-plan limits);
- a failed authentication (missing, malformed, unknown, deleted or expired
  credential, repeated credential headers) counts only against its IP's
  auth-failure bucket (``auth_failure_buckets``, ``AUTH_FAILURE_LIMIT``), never
  against the buckets valid credentials use there.

A request is counted only when it fits every one of its buckets: a refused
request uses up nobody's allowance (a key over its limit does not eat its IP's,
nor an IP over its limit the key's).
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
    PUBLIC = "public"  # unauthenticated reads: OpenAPI, docs, unknown paths
    PROBE = "probe"  # health and readiness: counted per node in memory (answer while the store is down)


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
    RateGroup.PROBE: {Plan.FREE: 600, Plan.BUILDER: 600, Plan.PRO: 600, Plan.ENTERPRISE: 600},
}


#: Failed authentications per client IP and window, across all groups, in a bucket of
#: their own: enough for a client to find its mistake, too few to use the server for
#: guessing, and never the allowance of the valid credentials behind that IP.
AUTH_FAILURE_LIMIT = 30


@functools.lru_cache(maxsize=256)
def limit_for(group: RateGroup, plan: Plan, enterprise_factor: int, multiplier: float) -> int:
    """Requests per minute allowed for a plan in a group (computed once per combination)."""
    limits = BASE_LIMITS[group]
    base = limits.get(plan, limits[Plan.PRO] * enterprise_factor)
    return max(1, math.floor(base * multiplier))


def auth_failure_limit(multiplier: float) -> int:
    """Failed authentications allowed per client IP and window."""
    return max(1, math.floor(AUTH_FAILURE_LIMIT * multiplier))


def buckets_for(group: RateGroup, ip: str, credential: str | None) -> tuple[str, ...]:
    """The buckets a request of ``group`` from ``ip`` counts against: the credential's own
    (whatever the IP: the plan's limit binds the credential) and the IP's (shared by every
    credential behind it), or only the IP's for a request that carries no credential."""
    if credential is None:
        return (f"{group}|ip|{ip}",)
    return (f"{group}|cred|{credential}", f"{group}|ip|{ip}")


def auth_failure_buckets(ip: str) -> tuple[str, ...]:
    """The one bucket a failed authentication from ``ip`` counts against (all groups)."""
    return (f"authfail|ip|{ip}",)


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

    async def hit(self, buckets: tuple[str, ...], limit: int, now: float) -> Decision:
        """Admit one request when every bucket (distinct names) is below ``limit``, and then
        count it in all of them; a refused request is counted in none."""
        ...


def _window_start(now: float, window_seconds: int) -> int:
    return int(now) - int(now) % window_seconds


def _decision(before: list[int], limit: int, end: int) -> Decision:
    """The decision for a request that found the counts ``before`` (admitted when all were below the limit)."""
    worst = max(before)
    if worst < limit:
        return Decision(allowed=True, limit=limit, remaining=limit - worst - 1, reset=end)
    return Decision(allowed=False, limit=limit, remaining=0, reset=end)


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

    async def hit(self, buckets: tuple[str, ...], limit: int, now: float) -> Decision:
        """Admit one request when every bucket is below ``limit``, and then count it in all of them."""
        start = _window_start(now, self._window)
        if start != self._start:
            self._start, self._counts = start, {}
        counts = self._counts
        before = [counts.get(bucket, 0) for bucket in buckets]
        if max(before) < limit:
            for bucket, count in zip(buckets, before, strict=True):
                counts[bucket] = count + 1
        return _decision(before, limit, start + self._window)


class SharedRateLimiter:
    """Counters shared by every worker and node, kept in a database
    (``storage.repository.WindowCounters``): exact across processes and nodes."""

    def __init__(self, counters: WindowCounters, window_seconds: int = DEFAULT_WINDOW_SECONDS) -> None:
        self._window = _checked_window(window_seconds)
        self._counters = counters

    async def hit(self, buckets: tuple[str, ...], limit: int, now: float) -> Decision:
        """Admit one request when every bucket is below ``limit``, and then count it in all of them."""
        start = _window_start(now, self._window)
        before = await self._counters.admit(buckets, start, limit, prune_before=start - self._window)
        return _decision(before, limit, start + self._window)
