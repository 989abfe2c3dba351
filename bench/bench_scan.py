"""Cached wallet scans per second against a bare Sanic handler.

A real EVM node (anvil) holds a funded account; one scan stores its result,
then ``POST /v1/scan/wallet`` is driven with the same body: credential check,
rate limit, address validation (EIP-55), the tenant's stored result, envelope.
Both servers have one worker and the same client, in the same run.
Target: >= 70 % of the bare handler.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile

import httpx

from bench.httpload import Server, load, provision_secret_key, python_argv
from bench.report import Figure, print_figures
from tests.anvil import MISSING_ANVIL, Anvil, anvil_binary
from tests.processes import free_port

ROUNDS = 3
SECONDS = 3.0
TARGET = 0.70


def measure() -> list[Figure]:
    """Run the benchmark (printing each round) and return the cached-scan rate beside the
    bare handler's; no figures (SKIPPED printed) without anvil."""
    binary = anvil_binary()
    if binary is None:
        print(f"SKIPPED: {MISSING_ANVIL}")
        return []
    node = Anvil(binary, chain_id=1)
    try:
        account = node.new_account(3 * 10**18)
        bare_port, api_port = free_port(), free_port()
        env = {
            "QDAY_RATE_LIMIT_MULTIPLIER": "100000",
            "QDAY_ETHEREUM_RPC_URL": node.url,
            "QDAY_CUSTODY_BACKEND": "disabled",
        }
        argv = python_argv(
            "-m",
            "cli.main",
            "serve",
            "--data-dir",
            tempfile.mkdtemp(prefix="qday-bench-scan-"),
            "--port",
            str(api_port),
        )
        with (
            Server(python_argv("bench/bare_server.py", str(bare_port)), bare_port) as bare,
            Server(argv, api_port, env, ready_path="/v1/health") as api,
        ):
            key = provision_secret_key(f"http://127.0.0.1:{api_port}")
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            body = json.dumps({"address": account.address}).encode()
            first = httpx.post(f"http://127.0.0.1:{api_port}/v1/scan/wallet", content=body, headers=headers, timeout=60)
            assert first.status_code == 200 and first.json()["data"]["cached"] is False, first.text
            bare_rates, scan_rates = [], []
            for i in range(ROUNDS):
                b = load(bare.port, "GET", "/", seconds=SECONDS)
                s = load(api.port, "POST", "/v1/scan/wallet", headers, body, seconds=SECONDS)
                if b.failures or s.failures:
                    raise RuntimeError(f"failures: bare {b.failures}, scan {s.failures}")
                bare_rates.append(b.per_second)
                scan_rates.append(s.per_second)
                print(
                    f"round {i + 1}/{ROUNDS}: bare {b.per_second:,.0f} req/s, cached scans {s.per_second:,.0f} req/s",
                    flush=True,
                )
    finally:
        node.stop()
    return [
        Figure(
            "cached POST /v1/scan/wallet",
            statistics.median(scan_rates),
            "req/s",
            statistics.median(bare_rates),
            "bare Sanic handler",
            TARGET,
        )
    ]


def main() -> int:
    """Run the benchmark and print the ratio; exit 1 if it misses the target."""
    return print_figures(measure())


if __name__ == "__main__":
    sys.exit(main())
