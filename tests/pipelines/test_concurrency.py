"""The API, a pipeline run and an analyst session at the same time: no lock error, no lost row.

Two spawned processes (API-like reads and writes of the operational SQLite file; an
analyst's DuckDB session over the Parquet views) run while this process materializes a
chain partition three times over. Every query the analyst runs sees either no rows or
all of them (files are replaced whole), and every row the API wrote is still there.
"""

from __future__ import annotations

import multiprocessing
import queue

from dagster import materialize

from pipelines.assets import RESCORING_ASSETS, risk_checks
from tests.pipelines import workers
from tests.pipelines.support import partition

ADDRESSES = 3_000
DEADLINE = 90.0  # seconds; the workers stop by themselves after this


def test_api_pipeline_and_analyst_together(snapshot_world) -> None:
    data_dir, resources = snapshot_world(ADDRESSES)
    account = data_dir.account("a@example.com")
    conn = data_dir.connect()
    addresses = [row[0] for row in conn.execute("SELECT address FROM watchlist WHERE chain = 'ethereum'")]
    conn.close()
    data_dir.analytics.ensure_layout()

    spawn = multiprocessing.get_context("spawn")
    stop, reports = spawn.Event(), spawn.Queue()
    processes = [
        spawn.Process(target=workers.api_like, args=(str(data_dir.db), account, addresses, stop, reports, DEADLINE)),
        spawn.Process(target=workers.analyst, args=(str(data_dir.analytics.root), ADDRESSES, stop, reports, DEADLINE)),
    ]
    for process in processes:
        process.start()
    try:
        runs = [
            materialize(
                [*RESCORING_ASSETS, *risk_checks],
                partition_key=partition("ethereum", data_dir.today),
                resources=resources,
            )
            for _ in range(3)
        ]
    finally:
        stop.set()
        found = {}
        for _ in processes:
            try:
                name, report = reports.get(timeout=DEADLINE + 30)
                found[name] = report
            except queue.Empty:
                break
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    assert all(run.success for run in runs)
    api, analyst = found["api"], found["analyst"]
    assert api["errors"] == [] and analyst["errors"] == []
    assert api["reads"] > 0 and analyst["queries"] > 0 and api["watched"]
    assert set(analyst["counts"]) <= {0, ADDRESSES}  # never a half-written partition
    print(
        f"api: {api['reads']} reads, {len(api['watched'])} writes; analyst: {analyst['queries']} queries "
        f"saw counts {analyst['counts']}"
    )

    conn = data_dir.connect()
    watched = {row[0] for row in conn.execute("SELECT id FROM watchlist WHERE chain = 'solana'")}
    api_results = {row[0] for row in conn.execute("SELECT address FROM scan_results WHERE source = 'api'")}
    pipeline_results = conn.execute("SELECT count(*) FROM scan_results WHERE source = 'pipeline'").fetchone()[0]
    conn.close()
    assert watched == set(api["watched"]) and api_results == set(api["saved"])
    assert pipeline_results == ADDRESSES  # every snapshot address holds a balance, so each is published
    con = data_dir.analytics.connect()
    assert con.execute("SELECT count(*), count(DISTINCT address) FROM address_risk").fetchall() == [(ADDRESSES,) * 2]
