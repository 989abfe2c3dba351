"""``qday up`` with ``QDAY_DATABASE_URL``: the API and Dagster's webserver and daemon all on
one PostgreSQL database; Dagster's instance tables in schema ``dagster`` (none in the data
directory), the URL nowhere in the files written, SIGTERM stops everything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tests.pipelines.test_up import wait_for
from tests.processes import free_port

pytestmark = pytest.mark.slow


def _dagster_tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'dagster'")
        return {row[0] for row in rows.fetchall()}


def test_qday_up_keeps_dagster_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    api_port, dagster_port = free_port(), free_port()
    data, log = tmp_path / "data", tmp_path / "up.log"
    env = {**os.environ, "QDAY_DATABASE_URL": postgres_url, "QDAY_SECRET_KEY": "d5" * 32}
    argv = [sys.executable, "-m", "cli.main", "up", "--data-dir", str(data), "--port", str(api_port)]
    argv += ["--dagster-port", str(dagster_port)]
    process = subprocess.Popen(argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        assert wait_for(f"http://127.0.0.1:{api_port}/v1/health", deadline), log.read_text()[-3000:]
        assert wait_for(f"http://127.0.0.1:{dagster_port}/server_info", deadline), log.read_text()[-3000:]
        while not {"runs", "event_logs", "jobs"} <= _dagster_tables(postgres_url):
            assert time.monotonic() < deadline, (
                f"Dagster made no tables in schema dagster: {_dagster_tables(postgres_url)}"
            )
            time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    output = log.read_text()
    assert process.returncode == 0, output[-2000:]
    instance = (data / "dagster" / "dagster.yaml").read_text()
    assert "env: QDAY_DAGSTER_POSTGRES_URL" in instance
    written = "".join(p.read_text(errors="replace") for p in data.rglob("*") if p.is_file())
    assert postgres_url not in written and postgres_url not in output  # the URL is in no file and no log line
    assert not list(data.rglob("*.db")) and not list(data.rglob("qday.sqlite*"))  # no SQLite storage anywhere
