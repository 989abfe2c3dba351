"""``qday up``: run the API, the Dagster webserver and the Dagster daemon as one service.

Each program is a child process in its own process group (so a signal reaches it and
whatever it starts, and nothing else), with its output prefixed by its name. Ctrl-C or
SIGTERM stops them all (SIGTERM, then SIGKILL after a grace period). A child that exits on
its own is restarted with a growing delay, at most ``restarts`` times within five minutes;
after that everything stops and ``qday up`` exits 1.

``DAGSTER_HOME`` is ``<data_dir>/dagster``: Dagster's run and event storage live there,
next to the data they describe, never in the repository. Its ``dagster.yaml`` is copied
from the repository's ``dagster_home/dagster.yaml`` (telemetry off, queued runs, one run
per partition at a time), or written from the embedded copy below when the package is
installed without the repository.
"""

from __future__ import annotations

import os
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


def prepare_dagster_home(data_dir: Path) -> Path:
    """``<data_dir>/dagster`` with ``dagster.yaml`` (from the repository, else embedded)
    and ``workspace.yaml``; returns its path."""
    home = data_dir.resolve() / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    source = REPO_DAGSTER_HOME / "dagster.yaml"
    instance = source.read_text(encoding="utf-8") if source.is_file() else EMBEDDED_INSTANCE
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
        self.pump = threading.Thread(target=_pump, args=(self.name, self.process.stdout, out, lock), daemon=True)
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


def _pump(name: str, stream: Any, out: TextIO, lock: threading.Lock) -> None:
    for line in stream:
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
        self._stop = threading.Event()
        self.failed: str | None = None

    def say(self, message: str) -> None:
        with self._lock:
            self.out.write(f"[qday up] {message}\n")
            self.out.flush()

    def request_stop(self, *_: object) -> None:
        self._stop.set()

    def run(self, poll: float = 0.2) -> int:
        for child in self.children:
            pid = child.start(self.env, self.out, self._lock)
            self.say(f"started {child.name} (pid {pid})")
        while not self._stop.wait(poll):
            for child in self.children:
                if child.running() or time.monotonic() < child.next_start:
                    continue
                if child.process is not None and child.next_start == 0.0:
                    code = child.process.returncode
                    now = time.monotonic()
                    while child.starts and now - child.starts[0] > RESTART_WINDOW:
                        child.starts.popleft()
                    if len(child.starts) > self.restarts:
                        self.failed = f"{child.name} exited with status {code} {len(child.starts)} times"
                        self.say(f"{self.failed}; stopping everything")
                        self._stop.set()
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


def stack_children(settings: Settings, config: Path | None, dagster_home: Path, dagster_port: int) -> list[Child]:
    """The three programs of ``qday up``."""
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
    return [
        Child("api", api),
        Child(
            "dagster-webserver",
            [_program("dagster-webserver"), "-h", "127.0.0.1", "-p", str(dagster_port), "-w", workspace],
        ),
        Child("dagster-daemon", [_program("dagster-daemon"), "run", "-w", workspace]),
    ]


def stack_environment(settings: Settings, config: Path | None, dagster_home: Path) -> dict[str, str]:
    """The children's environment: ours, plus where the data, settings and Dagster live."""
    env = dict(os.environ)
    env["DAGSTER_HOME"] = str(dagster_home)
    env["QDAY_DATA_DIR"] = str(settings.data_dir.resolve())
    if config is not None:
        env["QDAY_CONFIG"] = str(config.resolve())
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_stack(settings: Settings, *, config: Path | None, dagster_port: int, restarts: int) -> int:
    """Run until Ctrl-C / SIGTERM (exit 0) or until a program keeps dying (exit 1)."""
    if dagster_port == settings.port:
        print("qday up: --dagster-port must differ from the API port", file=sys.stderr)
        return 2
    home = prepare_dagster_home(settings.data_dir)
    supervisor = Supervisor(
        stack_children(settings, config, home, dagster_port), stack_environment(settings, config, home), restarts
    )
    previous = {sig: signal.signal(sig, supervisor.request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    supervisor.say(
        f"API on http://{settings.host}:{settings.port}/v1, Dagster on http://127.0.0.1:{dagster_port}, "
        f"DAGSTER_HOME={home}"
    )
    try:
        return supervisor.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
