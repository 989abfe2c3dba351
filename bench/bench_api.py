"""Authenticated requests/s of a cheap endpoint against a bare Sanic handler.

The cheap endpoint is ``GET /v1/watchlist`` with a secret key (an empty list):
the full request path — request id, credential check (keyed hash, SQLite
freshness check), two rate-limit counters, one indexed query, envelope — with
as little endpoint work as possible, so the ratio measures the service's own
overhead. ``GET /v1/auth/api-keys`` (one key to format) is printed beside it.
Target: ≥ 60 % of the bare handler, both with one worker, driven by the same
client in the same run (medians of several alternating rounds). The peak
resident memory of each server's process tree during that load is reported
beside it (no target).
"""

from __future__ import annotations

import statistics
import sys
import tempfile

from bench.httpload import RssSampler, Server, load, provision_secret_key, python_argv
from bench.report import Figure, print_figures
from tests.processes import free_port

ROUNDS = 3
SECONDS = 3.0
TARGET = 0.60
MIB = 2**20


def measure() -> list[Figure]:
    """Run the benchmark (printing each round) and return its figures: both endpoints' rates
    against the bare handler, and the API's peak resident memory under that load against the
    bare handler's (``VmHWM`` summed over each server's process tree, sampled during the load)."""
    data_dir = tempfile.mkdtemp(prefix="qday-bench-api-")
    bare_port, api_port = free_port(), free_port()
    env = {"QDAY_RATE_LIMIT_MULTIPLIER": "100000"}
    with (
        Server(python_argv("bench/bare_server.py", str(bare_port)), bare_port) as bare,
        Server(
            python_argv("-m", "cli.main", "serve", "--data-dir", data_dir, "--port", str(api_port)),
            api_port,
            env,
            ready_path="/v1/health",
        ) as api,
    ):
        key = provision_secret_key(f"http://127.0.0.1:{api_port}")
        auth = {"Authorization": f"Bearer {key}"}
        rates: dict[str, list[float]] = {"bare": [], "/v1/watchlist": [], "/v1/auth/api-keys": []}
        with RssSampler(bare.process.pid) as bare_memory, RssSampler(api.process.pid) as api_memory:
            for i in range(ROUNDS):
                results = {"bare": load(bare.port, "GET", "/", seconds=SECONDS)}
                for path in ("/v1/watchlist", "/v1/auth/api-keys"):
                    results[path] = load(api.port, "GET", path, auth, seconds=SECONDS)
                failed = {name: r.failures for name, r in results.items() if r.failures}
                if failed:
                    raise RuntimeError(f"failures: {failed}")
                for name, r in results.items():
                    rates[name].append(r.per_second)
                print(
                    f"round {i + 1}/{ROUNDS}: "
                    + ", ".join(f"{n} {r.per_second:,.0f} req/s" for n, r in results.items()),
                    flush=True,
                )
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print(
        f"API RSS while loaded: peak sampled {api_memory.peak / MIB:.0f} MiB, "
        f"growth {api_memory.slope_per_minute(SECONDS) / MIB:+.1f} MiB/min",
        flush=True,
    )
    return [
        Figure(
            "authenticated GET /v1/watchlist",
            medians["/v1/watchlist"],
            "req/s",
            medians["bare"],
            "bare Sanic handler",
            TARGET,
        ),
        Figure(
            "authenticated GET /v1/auth/api-keys",
            medians["/v1/auth/api-keys"],
            "req/s",
            medians["bare"],
            "bare Sanic handler",
        ),
        Figure(
            "API peak RSS under load",
            api_memory.peak_hwm / MIB,
            "MiB",
            bare_memory.peak_hwm / MIB,
            "bare Sanic handler under the same load",
            compare="<=",
        ),
    ]


def main() -> int:
    """Run the benchmark and print the ratios; exit 1 if it misses the target."""
    return print_figures(measure())


if __name__ == "__main__":
    sys.exit(main())
