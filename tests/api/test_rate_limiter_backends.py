"""Both rate-limiter backends keep the same contract: exact counts per bucket
and window, all buckets must fit, windows aligned on the minute (or on multiples
of the configured window length)."""

from __future__ import annotations

import pytest

from api.ratelimit import MemoryRateLimiter, RateGroup, SharedRateLimiter, limit_for
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
