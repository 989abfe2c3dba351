"""Authenticated requests/s of a cheap endpoint against a bare Sanic handler.

The cheap endpoint is ``GET /v1/watchlist`` with a secret key (an empty list):
the full request path — request id, credential check (keyed hash, SQLite
freshness check), two rate-limit counters, one indexed query, envelope — with
as little endpoint work as possible, so the ratio measures the service's own
overhead. ``GET /v1/auth/api-keys`` (one key to format) is printed beside it.
Target: ≥ 60 % of the bare handler, both with one worker, driven by the same
client in the same run (medians of several alternating rounds).
"""

from __future__ import annotations

import statistics
import sys
import tempfile

from bench.httpload import Server, load, provision_secret_key, python_argv
from tests.processes import free_port

ROUNDS = 3
SECONDS = 3.0
TARGET = 0.60


def main() -> int:
    """Run the benchmark and print the ratio; exit 1 if it misses the target."""
    data_dir = tempfile.mkdtemp(prefix="qday-bench-api-")
    bare_port, api_port = free_port(), free_port()
    env = {"QDAY_RATE_LIMIT_MULTIPLIER": "100000"}
    with Server(python_argv("bench/bare_server.py", str(bare_port)), bare_port) as bare, Server(
        python_argv("-m", "api.cli", "serve", "--data-dir", data_dir, "--port", str(api_port)), api_port, env,
        ready_path="/v1/health",
    ) as api:
        key = provision_secret_key(f"http://127.0.0.1:{api_port}")
        auth = {"Authorization": f"Bearer {key}"}
        rates: dict[str, list[float]] = {"bare": [], "/v1/watchlist": [], "/v1/auth/api-keys": []}
        for i in range(ROUNDS):
            results = {"bare": load(bare.port, "GET", "/", seconds=SECONDS)}
            for path in ("/v1/watchlist", "/v1/auth/api-keys"):
                results[path] = load(api.port, "GET", path, auth, seconds=SECONDS)
            failed = {name: r.failures for name, r in results.items() if r.failures}
            if failed:
                print(f"failures: {failed}")
                return 1
            for name, r in results.items():
                rates[name].append(r.per_second)
            print(f"round {i + 1}/{ROUNDS}: " + ", ".join(f"{n} {r.per_second:,.0f} req/s" for n, r in results.items()),
                  flush=True)
        rss = api.rss_bytes()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    ratio = medians["/v1/watchlist"] / medians["bare"]
    print(f"bare Sanic handler: {medians['bare']:,.0f} req/s")
    for path in ("/v1/watchlist", "/v1/auth/api-keys"):
        print(f"authenticated GET {path}: {medians[path]:,.0f} req/s (ratio {medians[path] / medians['bare']:.2f})")
    print(f"ratio {ratio:.2f} (target >= {TARGET:.2f}) {'OK' if ratio >= TARGET else 'BELOW TARGET'}; API RSS {rss / 2**20:.0f} MiB")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
