"""The first hour of a new user following README.md (issue 15): busy ports stop ``qday
serve``, ``qday up`` and ``make devnet`` at once with one line; ``make devnet`` runs the
whole stack on anvil and the pipelines score a watched devnet address without public
endpoints; runs a stopped stack left STARTED are failed; every ``qday`` command finds
the same data directory and the ones that read a store do not create an empty one;
``chain_readiness`` is filled on first start; logs carry no colour codes off a terminal
and no hint about flags ``qday serve`` does not have; client network errors name the URL."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from cli.main import main
from tests.anvil import MISSING_ANVIL, anvil_binary
from tests.processes import free_port, stop_group
from tests.support import REPO_ROOT

QDAY = [sys.executable, "-m", "cli.main"]
ANSI = re.compile(r"\x1b\[")


@pytest.fixture
def taken() -> Iterator[list[int]]:
    """Ports held by listening sockets here (what a running ``make run`` does to them)."""
    sockets: list[socket.socket] = []

    def hold() -> int:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        sockets.append(sock)
        return sock.getsockname()[1]

    yield [hold() for _ in range(3)]
    for sock in sockets:
        sock.close()


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without QDAY_* settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QDAY_")}
    return {**env, **extra}


# --- 10: ports are checked before anything starts ----------------------------------------


def test_serve_on_a_taken_port_stops_at_once_with_one_line(taken, tmp_path: Path, capsys) -> None:
    started = time.monotonic()
    assert main(["serve", "--data-dir", str(tmp_path / "data"), "--port", str(taken[0])]) == 2
    assert time.monotonic() - started < 2
    err = capsys.readouterr().err
    assert err == f"qday serve: port {taken[0]} (API) is in use: pass --port or set QDAY_PORT\n"
    assert not (tmp_path / "data").exists()


def test_up_checks_every_port_before_starting_anything(taken, tmp_path: Path, capsys) -> None:
    api, dagster, anvil = taken
    argv = ["up", "--data-dir", str(tmp_path / "data"), "--port", str(api), "--dagster-port", str(dagster)]
    started = time.monotonic()
    assert main([*argv, "--anvil", sys.executable, "--anvil-port", str(anvil)]) == 2
    assert time.monotonic() - started < 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert f"port {api} (API) is in use: pass --port or set QDAY_PORT" in err
    assert f"port {dagster} (Dagster webserver) is in use: pass --dagster-port or set QDAY_DAGSTER_PORT" in err
    assert f"port {anvil} (anvil) is in use: pass --anvil-port or set QDAY_ANVIL_PORT" in err
    assert not (tmp_path / "data").exists()  # nothing started, nothing written
    assert main([*argv[:-2], "--dagster-port", str(free_port())]) == 2  # only the API port taken
    assert capsys.readouterr().err.count("in use") == 1


def test_make_devnet_on_a_taken_port_fails_at_once(taken, tmp_path: Path) -> None:
    if anvil_binary() is None:
        pytest.skip(MISSING_ANVIL)
    started = time.monotonic()
    done = subprocess.run(
        ["make", "-s", "-o", "install", "devnet", f"PORT={taken[0]}", f"DAGSTER_PORT={free_port()}"]
        + [f"DEVNET_PORT={free_port()}", f"DEVNET_DATA_DIR={tmp_path / 'devnet'}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0 and time.monotonic() - started < 10
    assert f"qday up: port {taken[0]} (API) is in use: pass --port or set QDAY_PORT\n" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "started" not in done.stdout
    assert not (tmp_path / "devnet").exists()


# --- 11: `make devnet` is the whole stack on anvil ------------------------------------------


def _wait(predicate, deadline: float, what: str, log: Path) -> None:
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(1)
    raise AssertionError(f"{what} not within the deadline:\n{log.read_text()[-6000:]}")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _pipeline_results(db: Path, address: str) -> list[tuple]:
    if not db.is_file():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(
            "SELECT environment, chain, source FROM scan_results WHERE address = ? AND source = 'pipeline'",
            (address,),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def _kill_started(log: Path) -> None:
    """SIGKILL what the stack started (each child has its own process group), if it is left."""
    for pid in re.findall(r"\[qday up\] (?:re)?started \S+ \(pid (\d+)\)", log.read_text()):
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@pytest.mark.slow
def test_make_devnet_runs_the_stack_on_anvil_and_scores_a_watched_address(tmp_path: Path) -> None:
    if anvil_binary() is None:
        pytest.skip(MISSING_ANVIL)
    api, dagster, node = free_port(), free_port(), free_port()
    data = tmp_path / "devnet"
    log = tmp_path / "devnet.log"
    # any call to a public endpoint fails at once (a dead proxy); only 127.0.0.1 is reached
    dead = f"http://127.0.0.1:{free_port()}"
    env = clean_env(HTTP_PROXY=dead, HTTPS_PROXY=dead, ALL_PROXY=dead, NO_PROXY="127.0.0.1,localhost")
    process = subprocess.Popen(
        ["make", "-s", "-o", "install", "devnet", f"PORT={api}", f"DAGSTER_PORT={dagster}"]
        + [f"DEVNET_PORT={node}", f"DEVNET_DATA_DIR={data}"],
        cwd=REPO_ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{api}"
    watched = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"  # anvil's second dev account
    try:
        deadline = time.monotonic() + 300
        _wait(lambda: _answers(f"{base}/v1/health"), deadline, "the API", log)
        _wait(lambda: _answers(f"http://127.0.0.1:{dagster}/server_info"), deadline, "Dagster", log)
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": [watched, "latest"]}
        balance = httpx.post(f"http://127.0.0.1:{node}", json=rpc).json()["result"]
        assert int(balance, 16) == 10_000 * 10**18  # the stack's anvil, with its funded accounts
        # the README's walk-through, literally (only the port differs)
        readme = (REPO_ROOT / "README.md").read_text()
        walk = readme.split("Then, in another shell:\n\n```sh\n", 1)[1].split("```", 1)[0]
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", walk.replace("127.0.0.1:8000", f"127.0.0.1:{api}")],
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(),
        )
        assert done.returncode == 0, done.stderr
        walked = json.loads(done.stdout.strip().splitlines()[-1])["data"]
        assert walked["balanceAtRisk"] == "10000 ETH" and walked["balanceAtRiskUsd"] is None  # anvil, test keys
        credentials = {"email": "devnet@example.com", "password": "a long passphrase"}
        assert httpx.post(f"{base}/v1/auth/register", json=credentials, timeout=30).status_code == 201
        token = httpx.post(f"{base}/v1/auth/login", json=credentials, timeout=30).json()["data"]["token"]
        key = httpx.post(
            f"{base}/v1/auth/api-keys",
            json={"name": "devnet", "type": "secret", "environment": "test"},
            headers={"authorization": f"Bearer {token}"},
            timeout=30,
        ).json()["data"]["key"]
        auth = {"authorization": f"Bearer {key}"}
        scan = httpx.post(f"{base}/v1/scan/wallet", json={"address": watched, "chain": "ethereum"}, headers=auth)
        assert scan.status_code == 200, scan.text
        assert scan.json()["data"]["balanceAtRisk"].startswith("10000")  # read from anvil, not Sepolia
        watch = httpx.post(f"{base}/v1/watchlist", json={"address": watched, "chain": "ethereum"}, headers=auth)
        assert watch.status_code == 201, watch.text
        # the sensor (every 30 s) asks for a run that observes it on anvil and publishes its score
        _wait(lambda: _pipeline_results(data / "qday.sqlite", watched), deadline, "the pipeline's score", log)
        assert _pipeline_results(data / "qday.sqlite", watched) == [("test", "ethereum", "pipeline")]
        readiness = data / "analytics" / "chain_readiness" / f"date={datetime.now(UTC).date().isoformat()}"
        _wait(lambda: any(readiness.glob("*.parquet")), deadline, "chain_readiness on first start", log)
        os.killpg(process.pid, signal.SIGTERM)
        _wait(lambda: "[qday up] stopped" in log.read_text(), time.monotonic() + 60, "the stop", log)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        _kill_started(log)
    output = log.read_text()
    assert f"[qday up] data: {data}" in output and "[anvil]" in output
    assert "Traceback" not in output, output[-6000:]
    assert not ANSI.search(output)


# --- 12: runs a stopped stack left STARTED ---------------------------------------------------


def test_the_instance_monitors_runs(tmp_path: Path) -> None:
    from dagster import DagsterInstance

    from cli.supervisor import prepare_dagster_home

    with DagsterInstance.from_config(str(prepare_dagster_home(tmp_path / "data"))) as instance:
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_start_timeout_seconds == 300
        assert instance.run_monitoring_max_runtime_seconds == 43200
        assert instance.run_monitoring_max_resume_run_attempts == 0  # the default launcher cannot resume


SLOW_RUN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from dagster import DagsterInstance, asset, materialize

    @asset
    def slow() -> None:
        Path(sys.argv[2]).touch()
        time.sleep(600)

    with DagsterInstance.from_config(sys.argv[1]) as instance:
        materialize([slow], instance=instance)
    """
)


def test_runs_left_started_by_a_stopped_stack_are_failed_when_it_starts(tmp_path: Path) -> None:
    from dagster import DagsterInstance, DagsterRunStatus

    from cli.supervisor import _fail_orphans_in_child, fail_orphaned_runs, prepare_dagster_home

    home = prepare_dagster_home(tmp_path / "data")
    assert fail_orphaned_runs(home) == []  # a new instance: its storages made, one process at a time
    assert (home / "history" / "runs.db").is_file() and (home / "schedules" / "schedules.db").is_file()
    workers = []
    try:
        for name in ("killed", "running"):
            marker = tmp_path / name
            worker = subprocess.Popen(
                [sys.executable, "-c", SLOW_RUN, str(home), str(marker)],
                cwd=tmp_path,
                env={**os.environ, "DAGSTER_HOME": str(home)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            workers.append(worker)
            deadline = time.monotonic() + 90
            while not marker.exists() and time.monotonic() < deadline and worker.poll() is None:
                time.sleep(0.2)
            assert marker.exists(), f"{name}: the run did not start"
        os.killpg(workers[0].pid, signal.SIGKILL)  # `qday up` stopped in the middle of a run
        workers[0].wait(timeout=10)
        messages: list[str] = []
        _fail_orphans_in_child(home, messages.append)  # what `qday up` does before starting anything
        assert len(messages) == 1 and messages[0].startswith("marked 1 run(s) left unfinished")
        with DagsterInstance.from_config(str(home)) as instance:
            runs = {r.status for r in instance.get_runs()}
            assert runs == {DagsterRunStatus.FAILURE, DagsterRunStatus.STARTED}  # the live run is kept
        assert fail_orphaned_runs(home) == []  # nothing left to do
    finally:
        for worker in workers:
            stop_group(worker, timeout=5)


# --- 13: one data directory ------------------------------------------------------------------


def test_the_default_data_directory_does_not_depend_on_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    from cli.main import _overrides, build_parser, default_data_dir

    monkeypatch.delenv("QDAY_DATA_DIR", raising=False)
    monkeypatch.delenv("QDAY_CONFIG", raising=False)
    found = set()
    for where in (tmp_path, REPO_ROOT / "docs"):
        monkeypatch.chdir(where)
        found.add(_overrides(build_parser().parse_args(["serve"]))["data_dir"])
    assert found == {REPO_ROOT / "var"} == {default_data_dir()}
    monkeypatch.chdir(tmp_path)
    relative = _overrides(build_parser().parse_args(["serve", "--data-dir", "here"]))["data_dir"]
    assert relative == tmp_path.resolve() / "here"  # a flag is taken from where it is typed, made absolute
    monkeypatch.setenv("QDAY_DATA_DIR", str(tmp_path / "env"))
    assert "data_dir" not in _overrides(build_parser().parse_args(["serve"]))  # the settings read it


@pytest.mark.parametrize(
    "argv",
    [
        ["sql", "-c", "SELECT 1"],
        ["admin", "set-plan", "you@example.com", "pro"],
        ["admin", "purge-keys"],
        ["watch", "import", "watch.csv", "--account", "you@example.com", "--environment", "test"],
    ],
    ids=["sql", "set-plan", "purge-keys", "watch-import"],
)
def test_commands_that_read_a_store_refuse_a_missing_one(argv, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "watch.csv").write_text("address\n0x70997970C51812dc3A010C7d01b50e0d17dc79C8\n")
    monkeypatch.setenv("QDAY_DATA_DIR", str(tmp_path / "elsewhere"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no qday data in {tmp_path / 'elsewhere'}" in err and "--data-dir" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["watch.csv"]  # no store, no var/ created


def test_admin_names_the_data_directory(tmp_path: Path, capsys) -> None:
    from storage.sqlite_db import open_connection

    open_connection(tmp_path / "qday.sqlite").close()
    assert main(["admin", "set-plan", "ghost@example.com", "pro", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"qday: no account with email ghost@example.com (data: {tmp_path})\n"
    assert main(["admin", "purge-keys", "--data-dir", str(tmp_path)]) == 0
    assert f"(data: {tmp_path})" in capsys.readouterr().out


# --- 15: chain_readiness on first start -------------------------------------------------------


def test_the_readiness_sensor_asks_for_todays_snapshot_when_it_is_missing(tmp_path: Path) -> None:
    from dagster import DagsterInstance, RunRequest, SkipReason, build_sensor_context, materialize

    from pipelines.assets import chain_readiness
    from pipelines.definitions import build_definitions
    from pipelines.resources import AnalyticsResource, FixedClockResource
    from services.settings import load_settings

    defs = build_definitions(load_settings(env={}, data_dir=tmp_path))
    sensor = defs.get_repository_def().get_sensor_def("chain_readiness_sensor")
    assert sensor.job_name == "chain_readiness_job" and sensor.minimum_interval_seconds == 30
    clock = FixedClockResource(at="2026-11-22T10:00:00+00:00")  # long after the 01:30 schedule
    with DagsterInstance.ephemeral() as instance:

        def tick():
            context = build_sensor_context(instance=instance, resources={"clock": clock})
            return sensor(context)

        request = tick()
        assert isinstance(request, RunRequest) and request.partition_key == "2026-11-22"
        analytics = AnalyticsResource(root=str(tmp_path / "analytics"))
        assert materialize(
            [chain_readiness], partition_key="2026-11-22", instance=instance, resources={"analytics": analytics}
        ).success
        assert isinstance(tick(), SkipReason)


# --- 18: logs -----------------------------------------------------------------------------


@pytest.mark.slow
def test_serve_logs_carry_no_colour_codes_off_a_terminal_and_no_dev_hint(tmp_path: Path) -> None:
    """stdout is a terminal (Sanic then colours and hints), the log (stderr) a file."""
    port = free_port()
    master, slave = pty.openpty()
    terminal: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            terminal.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    err = (tmp_path / "stderr.log").open("w+")
    process = subprocess.Popen(
        [*QDAY, "serve", "--data-dir", str(tmp_path / "data"), "--port", str(port)],
        cwd=REPO_ROOT,
        env=clean_env(QDAY_CUSTODY_BACKEND="disabled", QDAY_FAMILY_CHAINS="none"),
        stdout=slave,
        stderr=err,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(slave)
    try:
        deadline = time.monotonic() + 120
        while not _answers(f"http://127.0.0.1:{port}/v1/health"):
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr.log").read_text()
            time.sleep(0.3)
    finally:
        stop_group(process)
        reader.join(timeout=5)
        os.close(master)
    log = (tmp_path / "stderr.log").read_text()
    shown = b"".join(terminal).decode(errors="replace")
    assert not ANSI.search(log), log
    assert "--dev" not in log + shown and "--debug" not in log + shown and "PRODUCTION" not in log + shown
    assert f"data: {tmp_path / 'data'}" in shown


def test_client_network_errors_name_the_url(monkeypatch, capsys) -> None:
    from qday_client.cli import EXIT_LOCAL_ERROR
    from qday_client.cli import main as client_main

    monkeypatch.setenv("QDAY_API_KEY", "svc_sec_test_sk_" + "k" * 43)
    monkeypatch.setenv("QDAY_CLIENT_CONFIG", "/nonexistent/client.toml")
    url = f"http://127.0.0.1:{free_port()}"
    assert client_main(["scan", "0x" + "11" * 20, "--api-url", url]) == EXIT_LOCAL_ERROR
    err = capsys.readouterr().err
    assert f"({url}/v1/scan/wallet)" in err and "QDAY_API_URL" in err and err.count("\n") == 1
