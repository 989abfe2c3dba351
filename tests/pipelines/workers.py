"""Processes of the concurrency test (spawned: importable, light, bounded in time).

Each loops until ``stop`` is set or its deadline passes, and puts one report dict on
``reports``: what it did and every error it saw.
"""

from __future__ import annotations

import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def api_like(db: str, account_id: str, addresses: list[str], stop: Any, reports: Any, deadline: float) -> None:
    """What API workers do: point reads of results and watch lists, new watch entries and
    scan results written on another chain (Solana), through a group-commit writer."""
    import asyncio

    from chains.codecs.solana import SolanaAddress
    from chains.environment import Environment
    from chains.registry import Chain, Network
    from core.ids import new_id
    from storage.models import ScanResult, WatchedAddress
    from storage.sql_scans import SqlScanStore
    from storage.sqlite_engine import SqliteDatabase

    report: dict[str, Any] = {"reads": 0, "watched": [], "saved": [], "errors": []}

    async def work() -> None:
        database = SqliteDatabase(Path(db), group_commit=True)
        store = SqlScanStore(database)
        end = time.monotonic() + deadline
        n = 0
        try:
            while not stop.is_set() and time.monotonic() < end:
                n += 1
                try:
                    for address in addresses[n % len(addresses) :][:20]:
                        await store.latest_result(account_id, Environment.LIVE, "ethereum", address)
                        report["reads"] += 1
                    await store.watchlist(account_id, Environment.LIVE)
                    # Solana: no key family shared with the pipeline's Ethereum partition, whose
                    # observe run would otherwise look these addresses' siblings up
                    address = str(SolanaAddress((0xB000000 + n).to_bytes(32, "big"), Chain.SOLANA, Network.MAINNET))
                    entry = await store.watch(
                        WatchedAddress(
                            new_id("wat"), account_id, Environment.LIVE, "solana", address, None, datetime.now(UTC)
                        )
                    )
                    assert entry is not None  # no cap
                    report["watched"].append(entry.id)
                    now = datetime.now(UTC)
                    result = ScanResult(
                        account_id, Environment.LIVE, "solana", address, "{}", 10, "W1", "v", now, now, "api"
                    )
                    await store.save_results([result])
                    report["saved"].append(address)
                except Exception:  # noqa: BLE001 - reported to the test
                    report["errors"].append(traceback.format_exc())
                await asyncio.sleep(0.005)
        finally:
            await database.aclose()

    try:
        asyncio.run(work())
    finally:
        reports.put(("api", report))


def analyst(root: str, expected: int, stop: Any, reports: Any, deadline: float) -> None:
    """An analyst session querying the views while the pipeline rewrites the files."""
    from storage.analytics import AnalyticsStore

    report: dict[str, Any] = {"queries": 0, "counts": set(), "errors": []}
    con = AnalyticsStore(Path(root)).connect(threads=1)
    end = time.monotonic() + deadline
    try:
        while not stop.is_set() and time.monotonic() < end:
            try:
                (count,) = con.execute("SELECT count(*) FROM address_risk").fetchall()[0]
                con.execute(
                    "SELECT risk_score, count(*), sum(balance_usd) FROM address_risk_latest GROUP BY 1"
                ).fetchall()
                con.execute(
                    "SELECT count(*) FROM watchlist w JOIN address_risk_latest r USING (environment, chain, address)"
                ).fetchall()
                report["counts"].add(count)
                report["queries"] += 1
            except Exception:  # noqa: BLE001 - reported to the test
                report["errors"].append(traceback.format_exc())
    finally:
        con.close()
        report["counts"] = sorted(report["counts"])
        reports.put(("analyst", report))
