"""Managed ML-DSA-65 signatures per second against raw in-process signing.

The ceiling is the fastest in-process ML-DSA signer here: ``cryptography``
(OpenSSL) signing from a 32-byte seed, ``pqc.sign``, one thread, measured in
the same run and interleaved with the managed measurements so both see the
same machine noise. Managed paths:

* ``custody``: ``KeyCustody.sign`` on the embedded SoftHSM2 backend: AES-GCM
  unwrap of the seed on the token, the same ``pqc.sign``, wipe. One thread.
  Target: at least 1/1.5 of the raw rate (within 1.5×).
* ``service, inline``: the whole ``ManagedCustodyService.sign``, one call at a
  time, signing on the caller's (event-loop) thread: key lookup, checks,
  unwrap + sign + wipe, then the durable usage count (group-commit writer).
* ``service, pool``: the same with signing in a 4-thread pool (what the API
  does), one caller: the durable count now overlaps the signing.
* ``service, pool x8``: 8 callers at once (commits shared by the batch).
* ``--http``: also ``POST /v1/sign/managed`` against ``qday serve`` (one
  worker, 8 keep-alive connections).

Run: ``.venv/bin/python -m bench.bench_custody [--http]``. Medians of several
rounds; exits 1 when ``custody`` or ``service, pool x8`` (the API's set-up
under load) misses the target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pqc
from bench.report import Figure, print_figures
from chains.environment import Environment
from core.clock import SystemClock
from services.accounts import Principal
from services.custody.backend import binding_for
from services.custody.lifecycle import ManagedCustodyService
from services.custody.pkcs11 import SOFTHSM_MODULE
from services.custody.softhsm import SoftHsmLayout, open_softhsm
from storage.models import Account, Plan
from storage.sql_accounts import SqlStore
from storage.sql_managed_keys import SqlManagedKeyStore
from storage.sqlite_engine import SqliteDatabase

ROUNDS = 5
SECONDS = 1.5
TARGET = 1.5  # managed within 1.5x of raw
ALGORITHM = pqc.Algorithm.ML_DSA_65
MESSAGE = b"qday managed custody benchmark: transfer 1 ETH to 0x0000000000000000000000000000000000000001"


def _rate(fn, seconds: float = SECONDS) -> float:
    fn()  # warm
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        fn()
        count += 1
    return count / (time.perf_counter() - start)


async def _service_rate(
    service: ManagedCustodyService, principal: Principal, key_id: str, callers: int, seconds: float = SECONDS
) -> float:
    count = 0
    deadline = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await service.sign(principal, key_id, ALGORITHM.value, MESSAGE, b"")
            count += 1

    start = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return count / (time.perf_counter() - start)


def _http_rate(work: Path, rounds: int) -> list[float]:
    from bench.httpload import Server, load, provision_secret_key, python_argv
    from tests.processes import free_port

    port = free_port()
    data_dir = work / "http"
    argv = python_argv("-m", "cli.main", "serve", "--data-dir", str(data_dir), "--port", str(port))
    with Server(argv, port, {"QDAY_RATE_LIMIT_MULTIPLIER": "100000"}, ready_path="/v1/health") as server:
        base = f"http://127.0.0.1:{port}"
        key = provision_secret_key(base)
        conn = sqlite3.connect(data_dir / "qday.sqlite", timeout=10)
        with conn:
            conn.execute("UPDATE accounts SET plan = 'enterprise'")
        conn.close()
        import httpx

        made = httpx.post(
            f"{base}/v1/keys/generate",
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
            json={"algorithm": ALGORITHM.value, "chain": "ethereum", "custody": "managed"},
        ).json()["data"]
        body = json.dumps({"key_id": made["id"], "message": MESSAGE.hex(), "algorithm": ALGORITHM.value}).encode()
        headers = {"X-API-Key": key, "Content-Type": "application/json"}
        rates = []
        for _ in range(rounds):
            result = load(server.port, "POST", "/v1/sign/managed", headers, body, seconds=3.0, connections=8)
            if result.failures:
                raise RuntimeError(f"{result.failures} managed-sign requests failed")
            rates.append(result.per_second)
        return rates


def measure(rounds: int = ROUNDS, http: bool = False) -> list[Figure]:
    """Run the benchmark (printing each round) and return each managed path's signing rate
    beside the raw in-process rate; ``custody`` and ``service, pool x8`` carry the target."""
    if not Path(SOFTHSM_MODULE).is_file():
        raise RuntimeError(f"SoftHSM2 is not installed ({SOFTHSM_MODULE} missing): apt-get install softhsm2")
    work = Path(tempfile.mkdtemp(prefix="qday-bench-custody-"))
    try:
        conf = SoftHsmLayout(work / "softhsm").conf
        os.environ["SOFTHSM2_CONF"] = str(conf)  # the HTTP server (a child) uses the same throw-away token
        backend = open_softhsm(conf)
        binding = binding_for("key_bench", "usr_bench", "live", ALGORITHM.value)
        made = backend.create(ALGORITHM, binding)
        seed = bytes(backend._unwrap(made.key_ref, binding))  # the raw baseline signs with the same seed

        db = SqliteDatabase(work / "qday.sqlite", group_commit=True)
        account = Account("usr_bench", "bench@example.com", None, Plan.ENTERPRISE, datetime.now(UTC))
        asyncio.run(SqlStore(db).create_account(account, "x"))
        principal = Principal(account, "secret", "key_bench_cred", Environment.LIVE)
        store = SqlManagedKeyStore(db)
        executor = ThreadPoolExecutor(max_workers=4)
        inline = ManagedCustodyService(store, backend, SystemClock())
        pooled = ManagedCustodyService(store, backend, SystemClock(), executor)
        key_id = asyncio.run(inline.create(principal, ALGORITHM.value, "ethereum")).id

        rows: dict[str, list[float]] = {
            "raw": [],
            "custody": [],
            "service, inline": [],
            "service, pool": [],
            "service, pool x8": [],
        }
        for i in range(rounds):
            rows["raw"].append(_rate(lambda: pqc.sign(ALGORITHM, seed, MESSAGE, b"")))
            rows["custody"].append(_rate(lambda: backend.sign(ALGORITHM, made.key_ref, binding, MESSAGE, b"")))
            rows["service, inline"].append(asyncio.run(_service_rate(inline, principal, key_id, 1)))
            rows["service, pool"].append(asyncio.run(_service_rate(pooled, principal, key_id, 1)))
            rows["service, pool x8"].append(asyncio.run(_service_rate(pooled, principal, key_id, 8)))
            print(f"round {i + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rows.items()), flush=True)
        if http:
            rows["HTTP, 1 worker"] = _http_rate(work, 3)
            print(f"HTTP rounds: {', '.join(f'{r:,.0f}/s' for r in rows['HTTP, 1 worker'])}", flush=True)
        executor.shutdown()
        db.close()
        backend.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    medians = {k: statistics.median(v) for k, v in rows.items()}
    print(
        f"\nML-DSA-65 signatures/s (median of {rounds} rounds, {os.cpu_count()} CPUs); "
        "one caller at a time also pays the durable usage commit and, with the pool, a thread hop"
    )
    return [
        Figure(
            f"managed ML-DSA-65 signing: {name}",
            rate,
            "sig/s",
            medians["raw"],
            "raw in-process pqc.sign",
            1 / TARGET if name in ("custody", "service, pool x8") else None,
        )
        for name, rate in medians.items()
        if name != "raw"
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print rates and ratios; 1 if the custody path misses the target."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", action="store_true", help="also measure POST /v1/sign/managed over HTTP")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    return print_figures(measure(args.rounds, args.http))


if __name__ == "__main__":
    sys.exit(main())
