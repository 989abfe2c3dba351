"""``qday up``: the supervisor (with stand-in programs) and the real stack once, end to end."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from cli.supervisor import Child, Supervisor
from tests.anvil import free_port

SLEEPER = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stop_request_stops_every_child() -> None:
    out = io.StringIO()
    supervisor = Supervisor([Child("one", SLEEPER), Child("two", SLEEPER)], dict(os.environ), restarts=3, out=out)
    threading.Timer(1.0, supervisor.request_stop).start()
    assert supervisor.run(poll=0.05) == 0
    pids = [child.process.pid for child in supervisor.children]
    assert not any(alive(pid) for pid in pids)
    assert "[one] up" in out.getvalue() and "[qday up] stopped" in out.getvalue()


def test_a_child_that_keeps_dying_stops_everything() -> None:
    out = io.StringIO()
    crashing = Child("crash", [sys.executable, "-c", "raise SystemExit(3)"])
    supervisor = Supervisor([Child("steady", SLEEPER), crashing], dict(os.environ), restarts=1, out=out)
    started = time.monotonic()
    assert supervisor.run(poll=0.05) == 1
    assert time.monotonic() - started < 20
    log = out.getvalue()
    assert "restarting in 1 s" in log and "crash exited with status 3 2 times; stopping everything" in log
    assert not alive(supervisor.children[0].process.pid)


def test_restarts_zero_means_exit_when_one_dies() -> None:
    supervisor = Supervisor(
        [Child("steady", SLEEPER), Child("crash", [sys.executable, "-c", "pass"])],
        dict(os.environ),
        restarts=0,
        out=io.StringIO(),
    )
    assert supervisor.run(poll=0.05) == 1


def test_a_configuration_error_stops_everything_at_once() -> None:
    """The API exits 2 (its port taken meanwhile, a bad setting): restarting cannot help."""
    out = io.StringIO()
    api = Child("api", [sys.executable, "-c", "raise SystemExit(2)"], fatal=frozenset({2}))
    supervisor = Supervisor([Child("steady", SLEEPER), api], dict(os.environ), restarts=3, out=out)
    started = time.monotonic()
    assert supervisor.run(poll=0.05) == 1
    assert time.monotonic() - started < 5  # three restarts would take 1 + 2 + 4 s, each with a traceback
    log = out.getvalue()
    assert "api exited with status 2 (a configuration problem, see above); stopping everything" in log
    assert "restart" not in log


def test_colour_codes_are_removed_when_the_output_is_not_a_terminal() -> None:
    out = io.StringIO()  # not a terminal
    code = (
        "print('\\x1b[32m2026-11-25\\x1b[0m - \\x1b[34mINFO\\x1b[0m - ready', flush=True); import time; time.sleep(600)"
    )
    supervisor = Supervisor([Child("coloured", [sys.executable, "-c", code])], dict(os.environ), restarts=0, out=out)

    def stop_once_printed() -> None:
        deadline = time.monotonic() + 30
        while "ready" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        supervisor.request_stop()

    threading.Thread(target=stop_once_printed, daemon=True).start()
    assert supervisor.run(poll=0.05) == 0
    assert "[coloured] 2026-11-25 - INFO - ready\n" in out.getvalue() and "\x1b" not in out.getvalue()


def wait_for(url: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False


@pytest.mark.slow
def test_qday_up_serves_the_api_and_dagster_and_stops_on_sigterm(tmp_path: Path) -> None:
    api_port, dagster_port = free_port(), free_port()
    log = tmp_path / "up.log"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "up",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            str(api_port),
            "--dagster-port",
            str(dagster_port),
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        assert wait_for(f"http://127.0.0.1:{api_port}/v1/health", deadline)
        assert wait_for(f"http://127.0.0.1:{dagster_port}/server_info", deadline)
        assert (tmp_path / "data" / "dagster" / "dagster.yaml").is_file()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    output = log.read_text()
    assert process.returncode == 0, output[-2000:]
    assert "[qday up] stopped" in output
    assert f"[qday up] data: {(tmp_path / 'data').resolve()}" in output
    assert "\x1b[" not in output  # Dagster colours its log even into a pipe
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{api_port}/v1/health", timeout=2)
