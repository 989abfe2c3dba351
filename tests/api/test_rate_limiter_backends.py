"""Every rate-limiter backend keeps the same contract: exact counts per bucket and
window, all buckets must fit, a refused request is counted in none of them, windows
aligned on the minute (or on multiples of the configured window length). The backends:
counts in memory, and counters shared through a SQLite file or a PostgreSQL database."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from api.ratelimit import (
    AUTH_FAILURE_LIMIT,
    MemoryRateLimiter,
    RateGroup,
    SharedRateLimiter,
    auth_failure_buckets,
    auth_failure_limit,
    buckets_for,
    limit_for,
)
from storage.database import Database
from storage.models import Plan
from storage.postgres_db import PostgresDatabase
from storage.sql_window_counters import SqlWindowCounters
from storage.sqlite_engine import SqliteDatabase


async def _counters_database(url: str, path: Path) -> Database:
    """A database for shared counters, as the API opens one: the PostgreSQL database at
    ``url``, or (no URL) a SQLite file of their own at ``path``."""
    if url:
        return await PostgresDatabase.open(url, pool_size=4)
    return SqliteDatabase(path, "OFF", migrate=False)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def backend(request) -> tuple[str, str]:
    """The backend under test, with the URL of this test's PostgreSQL database for that one."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else ""
    return request.param, url


@pytest.fixture
async def make_limiter(backend, tmp_path):
    """Builds the backend under test with a given window length (the default when omitted)."""
    kind, url = backend
    opened: list[Database] = []

    async def make(*window: int):
        if kind == "memory":
            return MemoryRateLimiter(*window)
        db = await _counters_database(url, tmp_path / "rl.sqlite")
        opened.append(db)
        return SharedRateLimiter(await SqlWindowCounters.open(db), *window)

    yield make
    for db in opened:
        await db.aclose()


@pytest.fixture
async def limiter(make_limiter):
    return await make_limiter()


async def test_counts_up_to_the_limit_then_refuses(limiter):
    now = 1_800_000_020.0  # 20 s into a window
    decisions = [await limiter.hit(("a",), 3, now) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0]
    assert decisions[0].reset == 1_800_000_060
    assert decisions[-1].retry_after(now) == 40


async def test_every_bucket_must_fit(limiter):
    now = 1_800_000_020.0
    for _ in range(3):
        await limiter.hit(("ip", "key1"), 3, now)
    assert not (await limiter.hit(("ip", "key2"), 3, now)).allowed
    assert (await limiter.hit(("other-ip", "key2"), 3, now)).allowed


async def test_a_refused_request_is_counted_in_no_bucket(limiter):
    now = 1_800_000_020.0
    for _ in range(3):
        assert (await limiter.hit(("key", "ip1"), 3, now)).allowed
    for _ in range(5):  # the key is spent: refused from another address, which keeps its allowance
        refused = await limiter.hit(("key", "ip2"), 3, now)
        assert not refused.allowed and refused.remaining == 0
    other = await limiter.hit(("other-key", "ip2"), 3, now)
    assert other.allowed and other.remaining == 2


async def test_a_credentials_limit_binds_across_addresses(limiter):
    now = 1_800_000_020.0
    limit = limit_for(RateGroup.KEYGEN, Plan.FREE, 10, 1)
    decisions = [
        await limiter.hit(buckets_for(RateGroup.KEYGEN, f"127.0.0.{n}", "secret:key_a"), limit, now) for n in range(20)
    ]
    assert [d.allowed for d in decisions] == [True] * 5 + [False] * 15
    # keys behind one address share it: a second key there gets what the first left
    behind = [
        await limiter.hit(buckets_for(RateGroup.KEYGEN, "10.0.0.1", f"secret:key_{n}"), limit, now) for n in range(7)
    ]
    assert [d.allowed for d in behind] == [True] * 5 + [False] * 2
    # without a credential, only the address counts
    assert buckets_for(RateGroup.PUBLIC, "10.0.0.1", None) == ("public|ip|10.0.0.1",)


async def test_failed_authentications_count_in_a_bucket_of_their_own(limiter):
    now = 1_800_000_020.0
    limit = auth_failure_limit(1)
    assert limit == AUTH_FAILURE_LIMIT
    failures = [await limiter.hit(auth_failure_buckets("10.0.0.2"), limit, now) for _ in range(limit + 1)]
    assert [d.allowed for d in failures] == [True] * limit + [False]
    valid = await limiter.hit(buckets_for(RateGroup.KEYGEN, "10.0.0.2", "secret:key_b"), 5, now)
    assert valid.allowed and valid.remaining == 4
    assert not set(auth_failure_buckets("10.0.0.2")) & set(buckets_for(RateGroup.AUTH, "10.0.0.2", "session:s"))


async def test_shared_counters_admit_exactly_the_limit_across_workers(engine_url, tmp_path):
    """Four limiters, each with its own connections to one store (as four workers, or four
    nodes, have), under concurrent hits: exactly the limit is admitted, and refused hits
    count nowhere. SQLite's calls never suspend, so its limiters hit from four threads."""
    now = 1_800_000_020.0
    databases = [await _counters_database(engine_url, tmp_path / "shared.sqlite") for _ in range(4)]
    try:
        limiters = [SharedRateLimiter(await SqlWindowCounters.open(db)) for db in databases]

        async def worker(limiter: SharedRateLimiter, ip: str) -> list[bool]:
            return [(await limiter.hit(("cred", ip), 40, now)).allowed for _ in range(30)]

        workers = [worker(limiter, f"ip{n}") for n, limiter in enumerate(limiters)]
        if databases[0].dialect == "sqlite":
            runs = await asyncio.gather(*(asyncio.to_thread(asyncio.run, w) for w in workers))
        else:
            runs = await asyncio.gather(*workers)
        allowed = [a for run in runs for a in run]
        assert allowed.count(True) == 40 and len(allowed) == 120
        counts = SqlWindowCounters(databases[0])
        admitted = await counts.admit(("cred", "ip0", "ip1", "ip2", "ip3"), 1_800_000_000, 10**6, 0)
    finally:
        for db in databases:
            await db.aclose()
    assert admitted[0] == 40 and sum(admitted[1:]) == 40


async def test_a_new_window_starts_from_zero(limiter):
    now = 1_800_000_020.0
    for _ in range(5):
        await limiter.hit(("a",), 3, now)
    fresh = await limiter.hit(("a",), 3, now + 45)
    assert fresh.allowed and fresh.remaining == 2


async def test_the_window_length_is_configurable(make_limiter):
    limiter = await make_limiter(10)
    now = 1_800_000_023.0  # 3 s into a 10 s window (1_800_000_020 is a multiple of 10)
    decisions = [await limiter.hit(("a",), 2, now) for _ in range(3)]
    assert [d.allowed for d in decisions] == [True, True, False]
    assert decisions[-1].reset == 1_800_000_030
    assert decisions[-1].retry_after(now) == 7
    fresh = await limiter.hit(("a",), 2, now + 7)
    assert fresh.allowed and fresh.remaining == 1 and fresh.reset == 1_800_000_040


async def test_a_long_window_keeps_counting(make_limiter):
    limiter = await make_limiter(3600)
    now = 1_800_000_000.0  # a multiple of 3600: the window's first second
    for _ in range(3):
        await limiter.hit(("a",), 3, now)
    late = await limiter.hit(("a",), 3, now + 3599)
    assert not late.allowed and late.reset == 1_800_003_600 and late.retry_after(now + 3599) == 1


@pytest.mark.parametrize("window", [0, -60])
async def test_a_window_must_be_positive(make_limiter, window):
    with pytest.raises(ValueError, match="positive"):
        await make_limiter(window)


def test_limits_follow_the_spec_table():
    assert limit_for(RateGroup.SCAN, Plan.FREE, 10, 1) == 10
    assert limit_for(RateGroup.KEYGEN, Plan.BUILDER, 10, 1) == 30
    assert limit_for(RateGroup.VERIFY, Plan.PRO, 10, 1) == 600
    assert limit_for(RateGroup.SIGN, Plan.ENTERPRISE, 10, 1) == 1000
    assert limit_for(RateGroup.AUTH, Plan.ENTERPRISE, 10, 1) == 10
    assert limit_for(RateGroup.SCAN, Plan.FREE, 10, 0.01) == 1
