"""The rescoring benchmark still runs end to end at a tiny size (its figures are measured
by ``make bench``, not checked here): it drives the store, Dagster and anvil the way
nothing else in the suite does, so a change there shows up here rather than in a bench run."""

from __future__ import annotations

import pytest

from bench import bench_rescore
from tests.anvil import MISSING_ANVIL, anvil_binary

pytestmark = pytest.mark.slow


@pytest.mark.skipif(anvil_binary() is None, reason=MISSING_ANVIL)
def test_the_rescoring_bench_runs_end_to_end():
    figures = {f.name: f for f in bench_rescore.measure(sizes=(20,))}
    rate = figures["rescoring end to end, N=20"]
    assert rate.value > 0 and rate.ceiling > 0
    assert figures["rescoring peak RSS, N=20"].value > 0
