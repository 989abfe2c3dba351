"""Authenticated requests/s of a cheap endpoint against a bare Sanic handler.

The cheap endpoint is ``GET /v1/auth/api-keys`` with a secret key: envelope,
credential lookup (keyed hash → SQLite), two rate-limit counters, one list
query. Target: ≥ 60 % of the bare handler, both with one worker, driven by the
same client in the same run (medians of several alternating rounds).
"""

from __future__ import annotations

import statistics
import sys
import tempfile

from bench.httpload import Server, free_port, load, provision_secret_key, python_argv

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
        bare_rates, api_rates = [], []
        for i in range(ROUNDS):
            b = load(bare.port, "GET", "/", seconds=SECONDS)
            a = load(api.port, "GET", "/v1/auth/api-keys", auth, seconds=SECONDS)
            if a.failures or b.failures:
                print(f"failures: bare {b.failures}, api {a.failures}")
                return 1
            bare_rates.append(b.per_second)
            api_rates.append(a.per_second)
            print(f"round {i + 1}/{ROUNDS}: bare {b.per_second:,.0f} req/s, authenticated {a.per_second:,.0f} req/s",
                  flush=True)
        rss = api.rss_bytes()
    bare_median, api_median = statistics.median(bare_rates), statistics.median(api_rates)
    ratio = api_median / bare_median
    print(f"authenticated GET /v1/auth/api-keys: {api_median:,.0f} req/s; bare Sanic handler: {bare_median:,.0f} req/s")
    print(f"ratio {ratio:.2f} (target >= {TARGET:.2f}) {'OK' if ratio >= TARGET else 'BELOW TARGET'}; API RSS {rss / 2**20:.0f} MiB")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
