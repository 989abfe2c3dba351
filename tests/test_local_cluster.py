"""``make run-pg`` (``cli.local_cluster``): a PostgreSQL cluster made and started on this
machine, two API nodes on it sharing accounts and the master secret, and everything
stopped again on SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cli.local_cluster import cluster_folder, postgres_bin
from storage.postgres_db import accepts_connections
from tests.processes import free_port
from tests.support import REPO_ROOT

pytestmark = pytest.mark.slow


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"local cluster exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} not healthy after {timeout} s:\n{log.read_text()[-3000:]}")


def test_two_nodes_on_a_local_postgresql(tmp_path: Path) -> None:
    if postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed (make postgres)")
    data, port, pg_port = tmp_path / "data", free_port(), free_port()
    while pg_port in (port, port + 1):
        pg_port = free_port()
    log = tmp_path / "cluster.log"
    argv = [sys.executable, "-m", "cli.local_cluster", "--data-dir", str(data), "--port", str(port)]
    argv += ["--pg-port", str(pg_port), "--no-dagster"]
    env = {**os.environ, "QDAY_FAMILY_CHAINS": "none"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        a, b = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"
        _wait_healthy(a, process, log)
        _wait_healthy(b, process, log)
        email, password = "cluster@example.com", "correct horse battery staple"
        assert httpx.post(f"{a}/v1/auth/register", json={"email": email, "password": password}).status_code == 201
        login = httpx.post(f"{b}/v1/auth/login", json={"email": email, "password": password})
        assert login.status_code == 200, login.text  # node B reads what node A wrote, same secret
        assert not list(data.rglob("qday.sqlite"))
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(timeout=90) == 0, log.read_text()[-3000:]
        assert not accepts_connections(f"postgresql://postgres@127.0.0.1:{pg_port}/postgres")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        shutil.rmtree(cluster_folder(data, pg_port), ignore_errors=True)
