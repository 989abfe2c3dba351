"""Benchmark: watched addresses rescored per second, end to end, against anvil.

Run with ``.venv/bin/python bench/bench_rescore.py [--sizes 1000 5000 20000]``. It needs
anvil (``make anvil`` or ``QDAY_ANVIL``) and prints SKIPPED without it.

For each N, a fresh spawned process (so its peak RSS belongs to that N alone) builds a data
directory with N watched Ethereum addresses (each holding a balance, so each is published)
and materializes one chain-day partition of the real pipeline: export the watch list,
observe every address through the EVM client (batches of 500, 4 in flight), price, score
with ``score_frame``, write the Parquet tables, run the three checks and publish N results
to SQLite with ``storage.scan_records``. In the same process it then times the raw round trip: the
same JSON-RPC calls (``eth_blockNumber`` + 3 per address) as batched POSTs of 1,000 calls,
4 in flight, decoded and not interpreted. Printed per N: both rates, their ratio, the time
of each pipeline step, and the peak RSS with its growth over the process's baseline, which
must stay flat as N grows. Nothing asserts on time; the script exits 1 only when a run
fails or the memory growth is not flat (the largest N growing more than 1.5x the smallest
N's growth plus 64 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from queue import Empty
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.report import Figure, print_figures
from tests.anvil import MISSING_ANVIL, Anvil, anvil_binary

_METHODS = ("eth_getBalance", "eth_getTransactionCount", "eth_getCode")
CALLS_PER_POST = 1_000
IN_FLIGHT = 4


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _addresses(count: int, seed: int) -> list[str]:
    return ["0x" + f"{seed:08x}{n:032x}" for n in range(count)]


def fund(url: str, addresses: list[str]) -> None:
    """Give every address a balance (anvil_setBalance, batched)."""
    with httpx.Client(timeout=120) as http:
        for start in range(0, len(addresses), CALLS_PER_POST):
            calls = [
                {"jsonrpc": "2.0", "id": i, "method": "anvil_setBalance", "params": [a, hex(10**17 + i)]}
                for i, a in enumerate(addresses[start : start + CALLS_PER_POST])
            ]
            http.post(url, json=calls).raise_for_status()


async def raw_round_trip(url: str, addresses: list[str]) -> float:
    """Seconds for the same calls as batched POSTs, ``IN_FLIGHT`` at a time."""
    per_post = CALLS_PER_POST // 3
    chunks = [addresses[i : i + per_post] for i in range(0, len(addresses), per_post)]
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def post(http: httpx.AsyncClient, chunk: list[str]) -> int:
        calls = [{"jsonrpc": "2.0", "id": 0, "method": "eth_blockNumber", "params": []}]
        calls += [
            {"jsonrpc": "2.0", "id": 3 * i + k + 1, "method": m, "params": [a, "latest"]}
            for i, a in enumerate(chunk)
            for k, m in enumerate(_METHODS)
        ]
        async with gate:
            response = await http.post(url, content=json.dumps(calls), headers={"content-type": "application/json"})
        return len(json.loads(response.content))

    async with httpx.AsyncClient(timeout=120) as http:
        started = time.perf_counter()
        answered = await asyncio.gather(*(post(http, chunk) for chunk in chunks))
        elapsed = time.perf_counter() - started
    assert sum(answered) == len(addresses) * 3 + len(chunks)
    return elapsed


def run_one(url: str, chain_id: int, count: int, seed: int, results: Any) -> None:
    """Child process: build the data directory, run the pipeline, then the raw round trip.

    The baseline RSS is taken after the imports and the data directory's set-up (streamed
    inserts), so the growth printed belongs to the pipeline run."""
    import logging
    from datetime import UTC, datetime

    from dagster import materialize

    from chains.codecs.detect import parse_address
    from core.ids import new_id
    from pipelines.assets import RESCORING_ASSETS, risk_checks
    from pipelines.resources import (
        AnalyticsResource,
        ClockResource,
        EndpointChainDataResource,
        OperationalStoreResource,
        StaticPriceResource,
    )
    from storage.models import Account, Plan
    from storage.sql import ts
    from storage.sql_accounts import SqlStore
    from storage.sqlite_db import open_connection
    from storage.sqlite_engine import SqliteDatabase

    logging.getLogger("dagster").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="bench-rescore-") as tmp:
        root = Path(tmp)
        db = SqliteDatabase(root / "qday.sqlite", "NORMAL")
        account = Account(new_id("usr"), "bench@example.com", None, Plan.FREE, datetime.now(UTC))
        asyncio.run(SqlStore(db).create_account(account, "x"))
        db.close()
        conn = open_connection(root / "qday.sqlite", "NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        now = ts(datetime.now(UTC))
        conn.executemany(
            "INSERT INTO watchlist VALUES (?,?,?,?,?,?,?)",
            (
                (new_id("wat"), account.id, "live", "ethereum", str(parse_address(a, "ethereum")), None, now)
                for a in _addresses(count, seed)
            ),
        )
        conn.execute("COMMIT")
        conn.close()
        baseline = _rss_mb()
        clock = ClockResource()
        config = root / "qday.toml"
        config.write_text(f'[chains.live.endpoints]\nethereum = {{ url = "{url}", chain_id = {chain_id} }}\n')
        resources = {
            "chain_data": EndpointChainDataResource(config_file=str(config)),
            "prices": StaticPriceResource(),
            "operational_store": OperationalStoreResource(database=str(root / "qday.sqlite"), synchronous="NORMAL"),
            "analytics": AnalyticsResource(root=str(root / "analytics")),
            "clock": clock,
        }
        key = f"ethereum|{clock.today().isoformat()}"
        print(f"  [N={count}] pipeline run…", flush=True)
        started = time.perf_counter()
        result = materialize([*RESCORING_ASSETS, *risk_checks], partition_key=key, resources=resources)
        pipeline = time.perf_counter() - started
        steps = {
            e.step_key: e.event_specific_data.duration_ms / 1000
            for e in result.all_events
            if e.event_type_value == "STEP_SUCCESS"
        }
        conn = open_connection(root / "qday.sqlite")
        published = conn.execute("SELECT count(*) FROM scan_results").fetchone()[0]
        conn.close()
        peak = _rss_mb()
    print(f"  [N={count}] raw round trip…", flush=True)
    raw = asyncio.run(raw_round_trip(url, _addresses(count, seed)))
    results.put(
        {
            "n": count,
            "pipeline": pipeline,
            "raw": raw,
            "steps": steps,
            "published": published,
            "baseline_mb": baseline,
            "peak_mb": peak,
            "success": result.success,
        }
    )


def _result_of(child: Any, queue: Any, limit: float = 1800) -> dict[str, Any]:
    """The child's result, or an error as soon as it has exited without one (a crash
    must not leave the bench waiting for the whole limit)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            return queue.get(timeout=2)
        except Empty:
            if not child.is_alive():
                raise RuntimeError(f"the rescoring child exited with code {child.exitcode} and no result") from None
    raise RuntimeError(f"the rescoring child gave no result within {limit:.0f} s")


def _figures(rows: list[dict[str, Any]]) -> list[Figure]:
    """Rates beside the raw round trip per N, peak RSS per N, and the memory verdict: growth at
    the largest N within 1.5x the smallest N's growth plus 64 MB, with the least-squares slope."""
    figures = []
    for row in rows:
        n = row["n"]
        figures.append(
            Figure(
                f"rescoring end to end, N={n:,}",
                n / row["pipeline"],
                "addresses/s",
                n / row["raw"],
                "raw batched JSON-RPC round trip to anvil",
            )
        )
        figures.append(
            Figure(
                f"rescoring peak RSS, N={n:,}",
                row["peak_mb"],
                "MB",
                row["baseline_mb"],
                "process baseline after imports and set-up",
                compare="<=",
            )
        )
    growths = {row["n"]: row["peak_mb"] - row["baseline_mb"] for row in rows}
    smallest, largest = min(growths), max(growths)
    if len(growths) > 1:
        slope = statistics.linear_regression(list(growths), list(growths.values())).slope * 100_000
        figures.append(Figure("rescoring peak RSS growth per 100,000 addresses (least squares)", slope, "MB"))
    figures.append(
        Figure(
            f"rescoring peak RSS growth, N={largest:,}",
            growths[largest],
            "MB",
            growths[smallest],
            f"growth at N={smallest:,}",
            1.5 * growths[smallest] + 64,
            "<=",
            "value",
        )
    )
    return figures


def measure(sizes: Sequence[int] = (1_000, 5_000, 20_000)) -> list[Figure]:
    """Run the pipeline at each size on one anvil (printing progress) and return the figures;
    no figures (SKIPPED printed) without anvil."""
    binary = anvil_binary()
    if binary is None:
        print(f"SKIPPED: {MISSING_ANVIL}")
        return []
    anvil = Anvil(binary, chain_id=31337)
    spawn = multiprocessing.get_context("spawn")
    rows = []
    try:
        for seed, n in enumerate(sizes, start=1):
            print(f"[N={n}] funding {n} addresses on anvil…", flush=True)
            fund(anvil.url, _addresses(n, seed))
            queue = spawn.Queue()
            child = spawn.Process(target=run_one, args=(anvil.url, anvil.chain_id, n, seed, queue))
            child.start()
            row = _result_of(child, queue)
            child.join(timeout=60)
            if not row["success"]:
                raise RuntimeError(f"the rescoring run for N={n} failed")
            rows.append(row)
            rate, raw_rate = n / row["pipeline"], n / row["raw"]
            print(
                f"[N={n}] pipeline {row['pipeline']:.2f} s = {rate:,.0f} addresses/s end to end "
                f"({row['published']:,} published)"
            )
            print(
                f"[N={n}] raw batched JSON-RPC {row['raw']:.2f} s = {raw_rate:,.0f} addresses/s; "
                f"pipeline/raw = {rate / raw_rate:.2f}"
            )
            print(f"[N={n}] steps: " + ", ".join(f"{k} {v:.2f}s" for k, v in row["steps"].items()))
            print(
                f"[N={n}] peak RSS {row['peak_mb']:.0f} MB (baseline after imports and set-up "
                f"{row['baseline_mb']:.0f} MB, growth {row['peak_mb'] - row['baseline_mb']:.0f} MB)",
                flush=True,
            )
    finally:
        anvil.stop()
    return _figures(rows)


def main() -> int:
    """Run the benchmark; exit 1 when a run fails or the memory growth is not flat."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 5_000, 20_000])
    args = parser.parse_args()
    return print_figures(measure(args.sizes))


if __name__ == "__main__":
    sys.exit(main())
