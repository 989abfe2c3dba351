"""Alerts (issue 19): block-to-receipt latency with 1,000 watched addresses, and the
outbox's delivery rate against a bare POST loop.

One ``qday serve`` (SQLite, a SoftHSM token for the signing key) on an anvil node as
ethereum, ``QDAY_ALERT_POLL_SECONDS`` = ``POLL`` and a local receiver
(``tests.webhook_receiver``, a thread per request):

- **latency**: ``watched`` addresses are watched by one tenant with a webhook for
  ``key.exposed``; ``samples`` of them, one at a time and at a random phase of the poll,
  sign a transaction (anvil mines it at once); the latency is from the mined receipt to the
  signed delivery's arrival. Targets on p50 and p99 over the poll interval: one poll
  interval plus delivery at worst (the issue's "within one block interval plus delivery").
- **throughput**: ``burst`` watched addresses sign in one block (automine off, then one
  ``evm_mine``): one follower pass raises ``burst`` events in one transaction, which the
  outbox delivers (claimed ``BATCH`` at a time, each signed with HMAC and ML-DSA-65 through
  custody). The ceiling is a bare loop POSTing the same bodies to the same receiver with
  as many requests in flight, in this process (no signing, no store).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from eth_account import Account
from eth_account.signers.local import LocalAccount

from bench.httpload import Server, provision_secret_key, python_argv
from bench.report import Figure, print_figures
from services.webhook_delivery import BATCH
from tests.anvil import MISSING_ANVIL, Anvil, anvil_binary
from tests.processes import free_port
from tests.webhook_receiver import WebhookReceiver

POLL = 1.0
LATENCY_TARGETS = {"p50": 1.0, "p99": 2.0}  # × the poll interval
THROUGHPUT_TARGET = 0.25
TRANSFER = {"value": 1, "gas": 21000, "maxFeePerGas": 10**10, "maxPriorityFeePerGas": 10**9, "chainId": 1}
EMAIL = "alerts@example.com"


def _signed(account: LocalAccount) -> str:
    raw = account.sign_transaction({"to": Account.create().address, "nonce": 0, **TRANSFER}).raw_transaction
    return "0x" + raw.hex()


def _arrivals(receiver: WebhookReceiver, start: int) -> dict[str, float]:
    """Address → arrival time of its ``key.exposed``, for requests since ``start``."""
    found: dict[str, float] = {}
    for got in receiver.received[start:]:
        event = json.loads(got.body)
        if event["type"] == "key.exposed":
            found.setdefault(event["data"]["address"], got.at)
    return found


def _baseline(database: Path, count: int, node: Anvil) -> None:
    """Mine a block and wait until the follower has recorded every watched address."""
    node.rpc("evm_mine")
    deadline = time.monotonic() + 60
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
        while time.monotonic() < deadline:
            (seen,) = conn.execute("SELECT count(*) FROM alert_state").fetchone()
            if seen >= count:
                return
            time.sleep(0.1)
    raise RuntimeError("the follower never took its baseline")


async def _bare_loop(url: str, bodies: list[bytes]) -> float:
    """Deliveries per second of a plain POST loop, ``BATCH`` in flight."""
    queue = list(bodies)
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:

        async def worker() -> None:
            while queue:
                body = queue.pop()
                (await client.post(url, content=body, headers={"Content-Type": "application/json"})).raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(BATCH)))
        return len(bodies) / (time.perf_counter() - started)


def measure(watched: int = 1000, samples: int = 30, burst: int = 300) -> list[Figure]:
    """Both measurements; the figures (SKIPPED printed when anvil is missing)."""
    binary = anvil_binary()
    if binary is None:
        print(f"SKIPPED: {MISSING_ANVIL}")
        return []
    node = Anvil(binary, chain_id=1)
    data = Path(tempfile.mkdtemp(prefix="qday-bench-alerts-"))
    port = free_port()
    env = {
        "QDAY_ETHEREUM_RPC_URL": node.url,
        "QDAY_FAMILY_CHAINS": "ethereum",
        "QDAY_WEBHOOK_ALLOW_PRIVATE": "true",
        "QDAY_ALERT_POLL_SECONDS": str(POLL),
        "QDAY_RATE_LIMIT_MULTIPLIER": "100000",
        "QDAY_SECRET_KEY": "c4" * 32,
    }
    argv = python_argv("-m", "cli.main", "serve", "--data-dir", str(data), "--port", str(port))
    try:
        with WebhookReceiver() as receiver, Server(argv, port, env, ready_path="/v1/health") as server:
            base = f"http://127.0.0.1:{server.port}"
            key = provision_secret_key(base, EMAIL)
            subprocess.run(
                [*python_argv("-m", "cli.main", "admin", "set-plan", "--data-dir", str(data), EMAIL, "builder")],
                check=True,
                env={**os.environ, **env},
                capture_output=True,
            )
            auth = {"Authorization": f"Bearer {key}"}
            with httpx.Client(base_url=base, headers=auth, timeout=60) as api:
                hook = api.post("/v1/webhooks", json={"url": receiver.url, "events": ["key.exposed"]})
                hook.raise_for_status()
                accounts = [Account.create() for _ in range(watched)]
                for account in accounts:
                    api.post("/v1/watchlist", json={"address": account.address, "chain": "ethereum"}).raise_for_status()
            for account in accounts[: samples + burst]:
                node.fund(account.address, 10**17)
            _baseline(data / "qday.sqlite", watched, node)
            latencies = []
            for account in accounts[:samples]:
                time.sleep(random.uniform(0, POLL))
                start = len(receiver.received)
                node.send(account, {"to": Account.create().address, **TRANSFER})
                mined = time.monotonic()
                receiver.wait_for(start + 1, timeout=30)
                arrived = _arrivals(receiver, start)[account.address]
                latencies.append(arrived - mined)
            node.rpc("evm_setAutomine", False)
            for account in accounts[samples : samples + burst]:
                node.rpc("eth_sendRawTransaction", _signed(account))
            start = len(receiver.received)
            node.rpc("evm_mine")
            receiver.wait_for(start + burst, timeout=300)
            times = sorted(got.at for got in receiver.received[start:])
            bodies = [got.body for got in receiver.received[start:]]
            outbox_rate = (burst - 1) / (times[-1] - times[0])
            bare_rate = asyncio.run(_bare_loop(receiver.url, bodies))
    finally:
        node.stop()
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    print(f"latency p50 {p50:.3f} s, p99 {p99:.3f} s; outbox {outbox_rate:,.0f}/s, bare {bare_rate:,.0f}/s")
    return [
        Figure(
            f"block-to-receipt latency p50, {watched} watched",
            p50,
            "s",
            POLL,
            "poll interval",
            LATENCY_TARGETS["p50"],
            "<=",
        ),
        Figure(
            f"block-to-receipt latency p99, {watched} watched",
            p99,
            "s",
            POLL,
            "poll interval",
            LATENCY_TARGETS["p99"],
            "<=",
        ),
        Figure(
            f"outbox deliveries, burst of {burst}",
            outbox_rate,
            "/s",
            bare_rate,
            "bare POST loop",
            THROUGHPUT_TARGET,
        ),
    ]


def main() -> int:
    """Run the benchmark and print the figures; exit 1 if one misses its target."""
    return print_figures(measure())


if __name__ == "__main__":
    sys.exit(main())
