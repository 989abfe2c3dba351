"""Both rate-limiter backends keep the same contract: exact counts per bucket
and window, all buckets must fit, a refused request is counted in none of them,
windows aligned on the minute (or on multiples of the configured window length)."""

from __future__ import annotations

import threading

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
from storage.models import Plan
from storage.window_counters_sqlite import SqliteWindowCounters


@pytest.fixture(params=["memory", "sqlite"])
def make_limiter(request, tmp_path):
    """Builds the backend under test with a given window length (the default when omitted)."""
    made = []

    def make(*window: int):
        if request.param == "memory":
            backend = MemoryRateLimiter(*window)
        else:
            backend = SharedRateLimiter(SqliteWindowCounters(tmp_path / f"rl{len(made)}.sqlite"), *window)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def limiter(make_limiter):
    return make_limiter()


def test_counts_up_to_the_limit_then_refuses(limiter):
    now = 1_800_000_020.0  # 20 s into a window
    decisions = [limiter.hit(("a",), 3, now) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0]
    assert decisions[0].reset == 1_800_000_060
    assert decisions[-1].retry_after(now) == 40


def test_every_bucket_must_fit(limiter):
    now = 1_800_000_020.0
    for _ in range(3):
        limiter.hit(("ip", "key1"), 3, now)
    assert not limiter.hit(("ip", "key2"), 3, now).allowed
    assert limiter.hit(("other-ip", "key2"), 3, now).allowed


def test_a_refused_request_is_counted_in_no_bucket(limiter):
    now = 1_800_000_020.0
    for _ in range(3):
        assert limiter.hit(("key", "ip1"), 3, now).allowed
    for _ in range(5):  # the key is spent: refused from another address, which keeps its allowance
        refused = limiter.hit(("key", "ip2"), 3, now)
        assert not refused.allowed and refused.remaining == 0
    other = limiter.hit(("other-key", "ip2"), 3, now)
    assert other.allowed and other.remaining == 2


def test_a_credentials_limit_binds_across_addresses(limiter):
    now = 1_800_000_020.0
    limit = limit_for(RateGroup.KEYGEN, Plan.FREE, 10, 1)
    decisions = [
        limiter.hit(buckets_for(RateGroup.KEYGEN, f"127.0.0.{n}", "secret:key_a"), limit, now) for n in range(20)
    ]
    assert [d.allowed for d in decisions] == [True] * 5 + [False] * 15
    # keys behind one address share it: a second key there gets what the first left
    behind = [limiter.hit(buckets_for(RateGroup.KEYGEN, "10.0.0.1", f"secret:key_{n}"), limit, now) for n in range(7)]
    assert [d.allowed for d in behind] == [True] * 5 + [False] * 2
    # without a credential, only the address counts
    assert buckets_for(RateGroup.PUBLIC, "10.0.0.1", None) == ("public|ip|10.0.0.1",)


def test_failed_authentications_count_in_a_bucket_of_their_own(limiter):
    now = 1_800_000_020.0
    limit = auth_failure_limit(1)
    assert limit == AUTH_FAILURE_LIMIT
    failures = [limiter.hit(auth_failure_buckets("10.0.0.2"), limit, now) for _ in range(limit + 1)]
    assert [d.allowed for d in failures] == [True] * limit + [False]
    valid = limiter.hit(buckets_for(RateGroup.KEYGEN, "10.0.0.2", "secret:key_b"), 5, now)
    assert valid.allowed and valid.remaining == 4
    assert not set(auth_failure_buckets("10.0.0.2")) & set(buckets_for(RateGroup.AUTH, "10.0.0.2", "session:s"))


def test_shared_counters_admit_exactly_the_limit_across_connections(tmp_path):
    """Four limiters on one file (as four workers have, each with its connection) under
    concurrent hits: exactly the limit is admitted, and refused hits count nowhere."""
    path = tmp_path / "shared.sqlite"
    limiters = [SharedRateLimiter(SqliteWindowCounters(path)) for _ in range(4)]
    now = 1_800_000_020.0
    allowed: list[bool] = []
    lock = threading.Lock()

    def worker(limiter: SharedRateLimiter, ip: str) -> None:
        for _ in range(30):
            decision = limiter.hit(("cred", ip), 40, now)
            with lock:
                allowed.append(decision.allowed)

    threads = [threading.Thread(target=worker, args=(limiters[n], f"ip{n}")) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert allowed.count(True) == 40 and len(allowed) == 120
    counts = SqliteWindowCounters(path)
    try:
        admitted = counts.admit(("cred", "ip0", "ip1", "ip2", "ip3"), 1_800_000_000, 10**6, 0)
    finally:
        counts.close()
        for limiter in limiters:
            limiter.close()
    assert admitted[0] == 40 and sum(admitted[1:]) == 40


def test_a_new_window_starts_from_zero(limiter):
    now = 1_800_000_020.0
    for _ in range(5):
        limiter.hit(("a",), 3, now)
    fresh = limiter.hit(("a",), 3, now + 45)
    assert fresh.allowed and fresh.remaining == 2


def test_the_window_length_is_configurable(make_limiter):
    limiter = make_limiter(10)
    now = 1_800_000_023.0  # 3 s into a 10 s window (1_800_000_020 is a multiple of 10)
    decisions = [limiter.hit(("a",), 2, now) for _ in range(3)]
    assert [d.allowed for d in decisions] == [True, True, False]
    assert decisions[-1].reset == 1_800_000_030
    assert decisions[-1].retry_after(now) == 7
    fresh = limiter.hit(("a",), 2, now + 7)
    assert fresh.allowed and fresh.remaining == 1 and fresh.reset == 1_800_000_040


def test_a_long_window_keeps_counting(make_limiter):
    limiter = make_limiter(3600)
    now = 1_800_000_000.0  # a multiple of 3600: the window's first second
    for _ in range(3):
        limiter.hit(("a",), 3, now)
    late = limiter.hit(("a",), 3, now + 3599)
    assert not late.allowed and late.reset == 1_800_003_600 and late.retry_after(now + 3599) == 1


@pytest.mark.parametrize("window", [0, -60])
def test_a_window_must_be_positive(window, tmp_path):
    with pytest.raises(ValueError, match="positive"):
        MemoryRateLimiter(window)
    counters = SqliteWindowCounters(tmp_path / "rl.sqlite")
    with pytest.raises(ValueError, match="positive"):
        SharedRateLimiter(counters, window)
    counters.close()


def test_limits_follow_the_spec_table():
    assert limit_for(RateGroup.SCAN, Plan.FREE, 10, 1) == 10
    assert limit_for(RateGroup.KEYGEN, Plan.BUILDER, 10, 1) == 30
    assert limit_for(RateGroup.VERIFY, Plan.PRO, 10, 1) == 600
    assert limit_for(RateGroup.SIGN, Plan.ENTERPRISE, 10, 1) == 1000
    assert limit_for(RateGroup.AUTH, Plan.ENTERPRISE, 10, 1) == 10
    assert limit_for(RateGroup.SCAN, Plan.FREE, 10, 0.01) == 1
