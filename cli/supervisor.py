"""``qday up``: run the API, the Dagster webserver and the Dagster daemon as one service.

Before anything starts, every port the stack will listen on is tried (the API's, the
Dagster webserver's, anvil's with ``--anvil``): one that is taken stops ``qday up`` at once
with one line naming it and the flag or variable that moves it (exit 2). Runs that an
earlier ``qday up`` left starting or running when it was stopped (no process of theirs is
alive) are marked failed, so none stays STARTED forever; the daemon's run monitoring
(``dagster.yaml``) catches runs that stall while it runs.

Each program is a child process in its own process group (so a signal reaches it and
whatever it starts, and nothing else), with its output prefixed by its name (colour codes
removed unless the output is a terminal). Ctrl-C or SIGTERM stops them all (SIGTERM, then
SIGKILL after a grace period). A child that exits on its own is restarted with a growing
delay, at most ``restarts`` times within five minutes; after that everything stops and
``qday up`` exits 1. The API exiting with status 2 (a configuration problem, such as its
port taken meanwhile) stops everything at once: restarting would not help.

``--anvil PATH`` adds a local EVM node (Foundry's anvil, ``make devnet``) as a fourth
program, on 127.0.0.1 with chain id 31337 and ten funded accounts.

``DAGSTER_HOME`` is ``<data_dir>/dagster``: Dagster's run and event storage live there,
next to the data they describe, never in the repository. Its ``dagster.yaml`` is copied
from the repository's ``dagster_home/dagster.yaml`` (telemetry off, queued runs, one run
per partition at a time), or written from the embedded copy below when the package is
installed without the repository.

With ``QDAY_DATABASE_URL`` (PostgreSQL), Dagster's run, event-log and schedule storage move
to that database (schema ``dagster``), so daemons, webservers and run workers on other
machines share one instance; runs left unfinished are then failed by the daemon's run
monitoring only, since a process id on this machine says nothing about a run elsewhere.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from cli.ports import Port, busy
from storage.errors import StorageError

if TYPE_CHECKING:
    from services.settings import Settings

REPO_DAGSTER_HOME = Path(__file__).resolve().parent.parent / "dagster_home"

EMBEDDED_INSTANCE = """\
# Dagster instance settings for qday (copied into DAGSTER_HOME by `qday up`).
telemetry:
  enabled: false
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 4
    tag_concurrency_limits:
      - key: "dagster/partition"
        value:
          applyLimitPerUniqueValue: true
        limit: 1
run_monitoring:
  enabled: true
  start_timeout_seconds: 300
  cancel_timeout_seconds: 300
  max_runtime_seconds: 43200
  poll_interval_seconds: 60
"""

WORKSPACE = """\
# Written by `qday up`: the one code location of qday.
load_from:
  - python_module:
      module_name: pipelines.definitions
      attribute: defs
      working_directory: {root}
      location_name: qday
"""

GRACE_SECONDS = 15.0
RESTART_WINDOW = 300.0
CONFIGURATION_ERROR = 2
"""Exit status of ``qday serve`` (and ``qday up``) for a problem a restart cannot fix."""
DEFAULT_DAGSTER_PORT = 3000
DEFAULT_ANVIL_PORT = 8545
ANVIL_CHAIN_ID = 31337
"""The chain id ``mk/devnet.toml`` expects of every EVM endpoint."""
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
"""Terminal escape sequences (colours, cursor moves, titles)."""


#: Dagster's run, event-log and schedule storage on the operational PostgreSQL database,
#: in a schema of its own (``DAGSTER_SCHEMA``); the URL comes from the environment, so its
#: password is never written to a file.
POSTGRES_STORAGE = """
# Written by `qday up` because QDAY_DATABASE_URL is set: runs, event logs and schedules
# live in PostgreSQL (schema "dagster"), shared by every daemon, webserver and run worker
# pointed at it, wherever they run (docs/deployment.md).
storage:
  postgres:
    postgres_url:
      env: QDAY_DAGSTER_POSTGRES_URL
"""
DAGSTER_SCHEMA = "dagster"


def dagster_postgres_url(database_url: str) -> str:
    """The URL Dagster's storage uses: the operational database, its tables in the
    ``dagster`` schema (``search_path``), apart from qday's own, through psycopg2 (Dagster
    binds ``NOTIFY`` parameters client-side, which SQLAlchemy's default driver, psycopg 3,
    does not)."""
    parts = urlsplit(database_url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "options"]
    query.append(("options", f"-c search_path={DAGSTER_SCHEMA}"))
    return urlunsplit(parts._replace(scheme="postgresql+psycopg2", query=urlencode(query, quote_via=quote)))


def create_dagster_schema(database_url: str) -> None:
    """Create the ``dagster`` schema when missing (Dagster creates its tables in it)."""
    from storage.postgres_db import create_schema

    create_schema(database_url, DAGSTER_SCHEMA)


def prepare_dagster_home(data_dir: Path, postgres: bool = False) -> Path:
    """``<data_dir>/dagster`` with ``dagster.yaml`` (from the repository, else embedded; with
    ``postgres``, the storage on PostgreSQL: ``POSTGRES_STORAGE``) and ``workspace.yaml``;
    returns its path."""
    home = data_dir.resolve() / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    source = REPO_DAGSTER_HOME / "dagster.yaml"
    instance = source.read_text(encoding="utf-8") if source.is_file() else EMBEDDED_INSTANCE
    if postgres:
        instance += POSTGRES_STORAGE
    _write_if_changed(home / "dagster.yaml", instance)
    _write_if_changed(home / "workspace.yaml", WORKSPACE.format(root=REPO_DAGSTER_HOME.parent))
    return home


def _write_if_changed(path: Path, text: str) -> None:
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def _program(name: str) -> str:
    """A console script of this environment (beside the interpreter), else from PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found (install dagster-webserver into this environment)")
    return found


@dataclass
class Child:
    """One supervised program."""

    name: str
    argv: Sequence[str]
    fatal: frozenset[int] = frozenset()
    """Exit statuses that stop everything instead of a restart."""
    process: subprocess.Popen | None = None
    starts: deque[float] = field(default_factory=deque)
    next_start: float = 0.0
    pump: threading.Thread | None = None

    def start(self, env: Mapping[str, str], out: TextIO, lock: threading.Lock) -> int:
        """Start the program with its output pumped to ``out``; returns its pid."""
        self.starts.append(time.monotonic())
        self.process = subprocess.Popen(
            list(self.argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            bufsize=1,
            text=True,
            errors="replace",
        )
        plain = not _is_terminal(out)
        self.pump = threading.Thread(target=_pump, args=(self.name, self.process.stdout, out, lock, plain), daemon=True)
        self.pump.start()
        return self.process.pid

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty() and not os.environ.get("NO_COLOR")
    except (AttributeError, ValueError):
        return False


def _pump(name: str, stream: Any, out: TextIO, lock: threading.Lock, plain: bool = True) -> None:
    for line in stream:
        if plain:
            line = ANSI.sub("", line)
        with lock:
            out.write(f"[{name}] {line}" if line.endswith("\n") else f"[{name}] {line}\n")
            out.flush()


class Supervisor:
    """Starts the children, restarts one that dies (bounded), stops all on request."""

    def __init__(
        self, children: Sequence[Child], env: Mapping[str, str], restarts: int, out: TextIO = sys.stdout
    ) -> None:
        self.children = list(children)
        self.env = env
        self.restarts = restarts
        self.out = out
        self._lock = threading.Lock()
        # A plain flag, not a threading.Event: request_stop runs as a signal handler in the
        # main thread, and Event.set() takes the lock Event.wait() may be holding there at
        # that moment (a SIGTERM could then hang the supervisor for good).
        self._stop_requested = False
        self.failed: str | None = None

    def say(self, message: str) -> None:
        with self._lock:
            self.out.write(f"[qday up] {message}\n")
            self.out.flush()

    def request_stop(self, *_: object) -> None:
        """Ask the supervisor to stop everything (safe in a signal handler: sets a flag only)."""
        self._stop_requested = True

    def _stopping(self, poll: float) -> bool:
        """True once a stop was asked for; otherwise waits ``poll`` seconds and checks again."""
        if not self._stop_requested:
            time.sleep(poll)
        return self._stop_requested

    def run(self, poll: float = 0.2) -> int:
        if self._stop_requested:  # asked to stop before anything started
            self.say("stopped")
            return 0
        for child in self.children:
            pid = child.start(self.env, self.out, self._lock)
            self.say(f"started {child.name} (pid {pid})")
        while not self._stopping(poll):
            for child in self.children:
                if child.running() or time.monotonic() < child.next_start:
                    continue
                if child.process is not None and child.next_start == 0.0:
                    code = child.process.returncode
                    if code in child.fatal:
                        self.failed = f"{child.name} exited with status {code}"
                        self.say(f"{self.failed} (a configuration problem, see above); stopping everything")
                        self._stop_requested = True
                        break
                    now = time.monotonic()
                    while child.starts and now - child.starts[0] > RESTART_WINDOW:
                        child.starts.popleft()
                    if len(child.starts) > self.restarts:
                        self.failed = f"{child.name} exited with status {code} {len(child.starts)} times"
                        self.say(f"{self.failed}; stopping everything")
                        self._stop_requested = True
                        break
                    delay = min(30.0, 2.0 ** (len(child.starts) - 1))
                    self.say(f"{child.name} exited with status {code}; restarting in {delay:g} s")
                    child.next_start = now + delay
                    continue
                child.next_start = 0.0
                pid = child.start(self.env, self.out, self._lock)
                self.say(f"restarted {child.name} (pid {pid})")
        self.stop_all()
        return 1 if self.failed else 0

    def stop_all(self) -> None:
        """SIGTERM every child's process group, then SIGKILL what is left after the grace period."""
        for child in self.children:
            child.signal(signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        for child in self.children:
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"{child.name} did not stop within {GRACE_SECONDS:g} s; killing it")
                child.signal(signal.SIGKILL)
                child.process.wait(timeout=10)
            # the group may hold grandchildren (code servers) that outlive their parent
            try:
                os.killpg(child.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for child in self.children:
            if child.pump is not None:
                child.pump.join(timeout=2)
        self.say("stopped")


def stack_children(
    settings: Settings,
    config: Path | None,
    dagster_home: Path,
    dagster_port: int,
    anvil: Path | None = None,
    anvil_port: int = DEFAULT_ANVIL_PORT,
) -> list[Child]:
    """The programs of ``qday up``: anvil (with ``anvil``), the API, the Dagster webserver and daemon."""
    api = [
        sys.executable,
        "-m",
        "cli.main",
        "serve",
        "--data-dir",
        str(settings.data_dir.resolve()),
        "--host",
        settings.host,
        "--port",
        str(settings.port),
    ]
    if config is not None:
        api += ["--config", str(config.resolve())]
    workspace = str(dagster_home / "workspace.yaml")
    children = [
        Child("api", api, fatal=frozenset({CONFIGURATION_ERROR})),
        Child(
            "dagster-webserver",
            [_program("dagster-webserver"), "-h", "127.0.0.1", "-p", str(dagster_port), "-w", workspace],
        ),
        Child("dagster-daemon", [_program("dagster-daemon"), "run", "-w", workspace]),
    ]
    if anvil is not None:
        node = [str(anvil), "--host", "127.0.0.1", "--port", str(anvil_port), "--chain-id", str(ANVIL_CHAIN_ID)]
        children.insert(0, Child("anvil", [*node, "--accounts", "10"]))
    return children


def stack_environment(settings: Settings, config: Path | None, dagster_home: Path) -> dict[str, str]:
    """The children's environment: ours, plus where the data, settings and Dagster live."""
    env = dict(os.environ)
    env["DAGSTER_HOME"] = str(dagster_home)
    env["QDAY_DATA_DIR"] = str(settings.data_dir.resolve())
    if settings.database_url:  # the API, the pipelines and Dagster's storage: one database
        env["QDAY_DATABASE_URL"] = settings.database_url
        env["QDAY_DAGSTER_POSTGRES_URL"] = dagster_postgres_url(settings.database_url)
    if config is not None:
        env["QDAY_CONFIG"] = str(config.resolve())
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def env_port(name: str, default: int) -> int:
    """A port from the environment variable ``name`` (``default`` when unset)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{name} must be a port number (1..65535), got {raw!r}")
    return int(raw)


def stack_ports(settings: Settings, dagster_port: int, anvil_port: int | None) -> list[Port]:
    """Every port the stack listens on, with what moves it."""
    ports = [
        Port("API", settings.host, settings.port, "pass --port or set QDAY_PORT"),
        Port("Dagster webserver", "127.0.0.1", dagster_port, "pass --dagster-port or set QDAY_DAGSTER_PORT"),
    ]
    if anvil_port is not None:
        ports.append(Port("anvil", "127.0.0.1", anvil_port, "pass --anvil-port or set QDAY_ANVIL_PORT"))
    return ports


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


ORPHAN_MESSAGE = (
    "no process of this run is alive: the qday up (or other program) running it was stopped; "
    "marked {status} when qday up started"
)


def fail_orphaned_runs(dagster_home: Path) -> list[str]:
    """Mark failed (canceled, if it was being canceled) every run of the instance in
    ``dagster_home`` that its storage says is starting, running or canceling while no
    process that wrote its events is alive: what stopping ``qday up`` (or a crash) during a
    run leaves behind. Runs of a live process (``make rescore`` on the same home) are kept.
    Returns the run ids changed. Call it before the daemon starts: opening the instance also
    creates a new one's SQLite storages, once, so the daemon, the webserver and their code
    servers starting together do not race to create them (Alembic then finds two version
    heads and the daemon cannot load the code location)."""
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

    changed = []
    statuses = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        for record in instance.get_run_records(RunsFilter(statuses=statuses)):
            run = record.dagster_run
            events = instance.get_records_for_run(run.run_id, ascending=False, limit=500).records
            pids = {
                e.event_log_entry.dagster_event.pid
                for e in events
                if e.event_log_entry.dagster_event is not None and e.event_log_entry.dagster_event.pid
            }
            if any(_alive(pid) for pid in pids):
                continue
            if run.status == DagsterRunStatus.CANCELING:
                instance.report_run_canceled(run, ORPHAN_MESSAGE.format(status="canceled"))
            else:
                instance.report_run_failed(run, ORPHAN_MESSAGE.format(status="failed"))
            changed.append(run.run_id)
    return changed


def _fail_orphans_in_child(dagster_home: Path, say: Any) -> None:
    """``fail_orphaned_runs`` in a short-lived process: Dagster's ~150 MB of imports stay
    out of the supervisor, which lives as long as the stack."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cli.supervisor", "fail-orphaned-runs", str(dagster_home)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "DAGSTER_HOME": str(dagster_home)},
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        say("checking for runs left unfinished took too long; skipped (run monitoring will fail them)")
        return
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        say(f"could not check for runs left unfinished: {last}")
        return
    run_ids = done.stdout.split()
    if run_ids:
        say(f"marked {len(run_ids)} run(s) left unfinished by an earlier stop as failed: {', '.join(run_ids)}")


def run_stack(
    settings: Settings,
    *,
    config: Path | None,
    dagster_port: int,
    restarts: int,
    anvil: Path | None = None,
    anvil_port: int = DEFAULT_ANVIL_PORT,
) -> int:
    """Run until Ctrl-C / SIGTERM (exit 0) or until a program keeps dying (exit 1); exit 2
    at once, having started nothing, when a port is taken."""
    chosen = [settings.port, dagster_port] + ([anvil_port] if anvil is not None else [])
    if len(set(chosen)) != len(chosen):
        print(f"qday up: the API, Dagster and anvil ports must differ, got {chosen}", file=sys.stderr)
        return CONFIGURATION_ERROR
    if anvil is not None and not os.access(anvil, os.X_OK):
        print(f"qday up: anvil not found at {anvil} (make anvil installs it)", file=sys.stderr)
        return CONFIGURATION_ERROR
    blocked = busy(stack_ports(settings, dagster_port, anvil_port if anvil is not None else None))
    if blocked:
        print(f"qday up: {blocked}", file=sys.stderr)
        return CONFIGURATION_ERROR
    postgres = bool(settings.database_url)
    if postgres:
        try:
            create_dagster_schema(settings.database_url)
        except StorageError as exc:
            print(f"qday up: {exc}", file=sys.stderr)
            return CONFIGURATION_ERROR
    home = prepare_dagster_home(settings.data_dir, postgres)
    supervisor = Supervisor(
        stack_children(settings, config, home, dagster_port, anvil, anvil_port),
        stack_environment(settings, config, home),
        restarts,
    )
    previous = {sig: signal.signal(sig, supervisor.request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    supervisor.say(f"data: {settings.data_dir.resolve()}")
    chain = f", anvil on http://127.0.0.1:{anvil_port}" if anvil is not None else ""
    supervisor.say(
        f"API on http://{settings.host}:{settings.port}/v1, Dagster on http://127.0.0.1:{dagster_port}{chain}, "
        f"DAGSTER_HOME={home}"
    )
    try:
        if not postgres:  # a shared instance's runs may belong to other machines: run monitoring fails those
            _fail_orphans_in_child(home, supervisor.say)
        return supervisor.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":  # python -m cli.supervisor fail-orphaned-runs DAGSTER_HOME (from run_stack)
    if sys.argv[1:2] == ["fail-orphaned-runs"] and len(sys.argv) == 3:
        print("\n".join(fail_orphaned_runs(Path(sys.argv[2]))))
        sys.exit(0)
    print("usage: python -m cli.supervisor fail-orphaned-runs DAGSTER_HOME", file=sys.stderr)
    sys.exit(2)
