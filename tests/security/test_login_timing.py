"""Login takes the same time for an unknown email as for a wrong password (no account
enumeration by timing), measured over real HTTP against ``qday serve`` with the production
argon2id parameters.

A security property, not a speed target: the two samples must be indistinguishable by a
two-sided Mann-Whitney U test (generous: p > 0.001) and their medians within 20 %. Samples
are interleaved in random order so load from other processes falls on both alike; the
count is fixed (``SAMPLES`` each).
"""

from __future__ import annotations

import math
import random
import statistics
import time

import httpx
import pytest

from tests.security.support import register_and_login

pytestmark = pytest.mark.slow
SAMPLES = 12


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation with tie correction)."""
    ranked = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(ranked)
    i, ties = 0, 0.0
    while i < len(ranked):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    n1, n2 = len(a), len(b)
    u = sum(r for r, (_, group) in zip(ranks, ranked, strict=True) if group == 0) - n1 * (n1 + 1) / 2
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    z = (u - n1 * n2 / 2) / sigma
    return math.erfc(abs(z) / math.sqrt(2))


def test_mann_whitney_tells_shifted_samples_apart():
    same = mann_whitney_p([1.0, 2.0, 3.0, 4.0, 5.0] * 4, [1.5, 2.5, 3.5, 4.5, 5.5] * 4)
    shifted = mann_whitney_p([1.0, 2.0, 3.0, 4.0, 5.0] * 4, [11.0, 12.0, 13.0, 14.0, 15.0] * 4)
    identical = mann_whitney_p([1.0, 2.0, 3.0] * 5, [1.0, 2.0, 3.0] * 5)
    assert identical == 1.0 and same > 0.2 and shifted < 1e-6


def test_unknown_email_and_wrong_password_take_the_same_time(hostile_server):
    email = f"timing-{time.monotonic_ns()}@example.com"
    register_and_login(hostile_server.base_url, email)
    attempts = [
        ("unknown", {"email": f"nobody-{time.monotonic_ns()}@example.com", "password": "wrong password!!"}),
        ("wrong", {"email": email, "password": "wrong password!!"}),
    ]
    times: dict[str, list[float]] = {"unknown": [], "wrong": []}
    bodies: dict[str, set[str]] = {"unknown": set(), "wrong": set()}
    rng = random.Random(8)
    with httpx.Client(base_url=hostile_server.base_url, timeout=60) as c:
        for _ in range(2):  # warm-up: connection, first argon2 allocation
            c.post("/v1/auth/login", json=attempts[1][1])
        for _ in range(SAMPLES):
            for kind, body in rng.sample(attempts, 2):
                start = time.perf_counter()
                r = c.post("/v1/auth/login", json=body)
                times[kind].append(time.perf_counter() - start)
                assert r.status_code == 401, r.text
                error = r.json()["error"]
                bodies[kind].add(f"{error['code']}|{error['message']}|{sorted(error['details'].items())}")
    assert bodies["unknown"] == bodies["wrong"] and len(bodies["wrong"]) == 1  # same code, message, details
    unknown, wrong = statistics.median(times["unknown"]), statistics.median(times["wrong"])
    print(f"login medians: unknown email {unknown * 1000:.1f} ms, wrong password {wrong * 1000:.1f} ms")
    assert abs(unknown - wrong) / max(unknown, wrong) < 0.20, (unknown, wrong)
    assert mann_whitney_p(times["unknown"], times["wrong"]) > 0.001, (times["unknown"], times["wrong"])
