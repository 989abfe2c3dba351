"""A short soak (``bench/soak.py``, 20 s of load) against a real ``qday serve`` and anvil:
the mixed workload meets no unexpected error, the 429s are exactly the ones the plan's
limits call for, and every acknowledged attestation can be fetched back afterwards.

The limits are scaled down (``QDAY_RATE_LIMIT_MULTIPLIER`` 0.3: 30 signatures a minute on
Pro; lower would leave fewer than the three set-up requests of the auth group) and the mix
leans on signing (about 70 of the 200 operations), so the signing group runs over its limit
even when the run straddles a minute boundary, and the 429 accounting is exercised.
``make soak`` runs the long version. No assertion on latency or memory."""

from __future__ import annotations

import math

import pytest

from api.ratelimit import RateGroup
from bench.soak import MIX as SOAK_MIX
from bench.soak import Sample, expected_limits, judge, run_soak
from tests.anvil import MISSING_ANVIL, anvil_binary

pytestmark = [pytest.mark.slow, pytest.mark.skipif(anvil_binary() is None, reason=MISSING_ANVIL)]

RATE, SECONDS, MULTIPLIER = 10.0, 20.0, 0.3
MIX = {**SOAK_MIX, "attest": 25, "managed_sign": 10, "scan": 20}


def test_short_soak_meets_no_unexpected_error_and_keeps_every_attestation():
    result = run_soak(RATE, SECONDS, multiplier=MULTIPLIER, mix=MIX, progress=lambda line: None)
    load = [s for s in result.samples if s.phase == "load"]
    pairs = sum(s.endpoint == "DELETE /v1/keys/{id}" for s in load)  # delete + cancel-deletion: two requests
    assert len(load) - pairs == math.ceil(RATE * SECONDS)  # bounded: exactly the scheduled operations
    assert dict(result.verdict["unexpected"]) == {}
    assert result.verdict["expected_429"] > 0  # the signing group did run over its limit
    assert result.verdict["by_status"][429] == result.verdict["expected_429"]
    assert {s.code for s in result.samples if s.status == 429} == {"RATE_001"}
    assert result.attestations > 0 and result.missing_attestations == []
    endpoints = {endpoint for endpoint, *_ in result.latencies}
    assert {
        "POST /v1/scan/wallet",
        "POST /v1/sign/hybrid",
        "POST /v1/verify",
        "POST /v1/keys/generate",
        "POST /v1/sign/managed",
        "DELETE /v1/keys/{id}",
    } <= endpoints


def test_judge_flags_a_429_the_limits_do_not_call_for():
    limits = expected_limits(MULTIPLIER)
    window = [
        Sample("POST /v1/verify", RateGroup.VERIFY, 200, None, 0.01, 60, limits[RateGroup.VERIFY], "load"),
        Sample("POST /v1/verify", RateGroup.VERIFY, 429, "RATE_001", 0.01, 60, limits[RateGroup.VERIFY], "load"),
    ]
    verdict = judge(window, limits)
    assert verdict["expected_429"] == 0 and len(verdict["unexpected"]) == 1
    full = [window[0]] * limits[RateGroup.VERIFY] + [window[1]]
    assert judge(full, limits)["unexpected"] == {}
