"""Both rate-limiter backends keep the same contract: exact counts per bucket
and window, all buckets must fit, windows aligned on the minute."""

from __future__ import annotations

import pytest

from api.ratelimit import MemoryRateLimiter, RateGroup, SqliteRateLimiter, limit_for
from storage.models import Plan


@pytest.fixture(params=["memory", "sqlite"])
def limiter(request, tmp_path):
    backend = MemoryRateLimiter() if request.param == "memory" else SqliteRateLimiter(tmp_path / "rl.sqlite")
    yield backend
    backend.close()


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


def test_limits_follow_the_spec_table():
    assert limit_for(RateGroup.SCAN, Plan.FREE, 10, 1) == 10
    assert limit_for(RateGroup.KEYGEN, Plan.BUILDER, 10, 1) == 30
    assert limit_for(RateGroup.VERIFY, Plan.PRO, 10, 1) == 600
    assert limit_for(RateGroup.SIGN, Plan.ENTERPRISE, 10, 1) == 1000
    assert limit_for(RateGroup.AUTH, Plan.ENTERPRISE, 10, 1) == 10
    assert limit_for(RateGroup.SCAN, Plan.FREE, 10, 0.01) == 1
