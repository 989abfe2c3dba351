"""Benchmarks that still run end to end at a tiny size (their figures are measured by
``make bench``, not checked here). The rescoring bench drives the store, Dagster and anvil
the way nothing else in the suite does; the Bitcoin index bench drives the block-file
ingest in fresh processes, both worker counts, on real blocks. A change there shows up
here rather than in a bench run."""

from __future__ import annotations

import pytest

from bench import bench_alerts, bench_bip32, bench_bitcoin_index, bench_dashboard, bench_rescore
from tests.anvil import MISSING_ANVIL, anvil_binary

pytestmark = pytest.mark.slow


@pytest.mark.skipif(anvil_binary() is None, reason=MISSING_ANVIL)
def test_the_rescoring_bench_runs_end_to_end():
    figures = {f.name: f for f in bench_rescore.measure(sizes=(20,))}
    rate = figures["rescoring end to end, N=20"]
    assert rate.value > 0 and rate.ceiling > 0
    assert figures["rescoring peak RSS, N=20"].value > 0


def test_the_bitcoin_index_bench_runs_end_to_end(conformance_dir):
    figures = {
        f.name: f for f in bench_bitcoin_index.measure(files=2, blocks=2, lookups=2, conformance_dir=conformance_dir)
    }
    ingest = figures["ingest, 2 files of 2 blocks, workers=1"]
    assert ingest.ratio is not None and ingest.ratio > 0 and ingest.target == bench_bitcoin_index.TARGET
    assert figures["ingest revealed keys, 2 files of 2 blocks, workers=2"].value > 0
    assert figures["ingest peak RSS, 2 files of 2 blocks"].ratio is not None
    assert figures["ingest peak RSS, 1 file of 4 blocks"].target == bench_bitcoin_index.MEMORY_TARGET
    assert figures["key hashes compacted into lookup buckets"].value > 0
    for state in ("parts", "compacted"):
        assert figures[f"index lookup of 1 absent hash ({state}), median of 2"].value > 0


def test_the_bip32_bench_runs() -> None:
    (figure,) = bench_bip32.measure(addresses=50, rounds=1)
    assert figure.value > 0 and figure.ceiling and figure.target == bench_bip32.TARGET


@pytest.mark.skipif(anvil_binary() is None, reason=MISSING_ANVIL)
def test_the_alerts_bench_runs_end_to_end() -> None:
    figures = {f.name: f for f in bench_alerts.measure(watched=20, samples=2, burst=10)}
    latency = figures["block-to-receipt latency p99, 20 watched"]
    assert latency.value > 0 and latency.ceiling == bench_alerts.POLL
    outbox = figures["outbox deliveries, burst of 10"]
    assert outbox.ratio is not None and outbox.ratio > 0 and outbox.target == bench_alerts.THROUGHPUT_TARGET


def test_the_dashboard_bench_runs() -> None:
    figures = {f.name: f for f in bench_dashboard.measure(addresses=30, rounds=1)}
    page = figures["portfolio page server time, 30 watched"]
    assert page.value > 0 and page.target == bench_dashboard.TARGET_SECONDS
    assert figures["portfolio page over reading every result row, 30 watched"].ratio is not None
