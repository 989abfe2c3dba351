"""A throw-away PostgreSQL server for tests and benchmarks.

``postgres_bin()`` (``cli.local_cluster``) finds the server's programs (Debian's
``/usr/lib/postgresql/<version>/bin``, else ``initdb`` on PATH). ``PostgresServer`` creates
a cluster, starts it on a free loopback port with durability turned off (``fsync``,
``full_page_writes``: the data is thrown away), creates and drops databases, and stops and
removes everything again. PostgreSQL refuses to run as root: when the tests run as root
every step runs as the ``postgres`` OS user, on a cluster under a fresh ``/tmp/qday-pg-*``
folder that user owns (pytest's folders sit under root-only ``/tmp/pytest-of-root``, which
it cannot enter).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg import sql

from cli.local_cluster import postgres_bin
from tests.processes import free_port

MISSING_POSTGRES = (
    "PostgreSQL not found (no /usr/lib/postgresql/*/bin/initdb nor initdb on PATH): "
    "`apt-get install postgresql` (or `make postgres`)"
)
#: The OS user that runs the server when the tests run as root.
POSTGRES_USER = "postgres"
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 30.0
_DATABASE_NAME = re.compile(r"[a-z_][a-z0-9_]*")


class PostgresServer:
    """One PostgreSQL cluster and server on 127.0.0.1 (superuser ``postgres``, trust
    authentication), stopped and removed by ``stop`` or at the end of a ``with`` block."""

    def __init__(self, root: Path, durable: bool = False) -> None:
        """Create a cluster under ``root`` (as root: under a fresh ``/tmp/qday-pg-*`` owned by
        the ``postgres`` user instead), start it on a free port and wait until it accepts
        connections (at most 60 s; then raise with the server log's tail). ``durable``: flush
        commits to disk as a production server does (benchmarks); tests throw the data away."""
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise RuntimeError(MISSING_POSTGRES)
        self._bin = bin_dir
        self._as_root = os.geteuid() == 0
        self._stopped = False
        self._process: subprocess.Popen[bytes] | None = None
        self._root = Path(tempfile.mkdtemp(prefix="qday-pg-")) if self._as_root else root
        self._data = self._root / "data"
        self._log = self._root / "server.log"
        self.port = free_port()
        try:
            sockets = self._root / "sockets"
            sockets.mkdir(mode=0o700, parents=True)
            os.chmod(self._root, 0o700)
            if self._as_root:
                for path in (self._root, sockets):
                    shutil.chown(path, POSTGRES_USER, POSTGRES_USER)
            self._run(
                "initdb",
                "-A",
                "trust",
                "-U",
                "postgres",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "-D",
                str(self._data),
                timeout=_START_TIMEOUT,
            )
            options = {
                "listen_addresses": "127.0.0.1",
                "port": str(self.port),
                "unix_socket_directories": str(sockets),
                "fsync": "on" if durable else "off",
                "full_page_writes": "on" if durable else "off",
                "max_connections": "200",
                "shared_buffers": "32MB",
            }
            settings = [arg for name, value in options.items() for arg in ("-c", f"{name}={value}")]
            with self._log.open("ab") as log:
                self._process = subprocess.Popen(
                    self._command("postgres", "-D", str(self._data), *settings),
                    cwd=self._root,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self._bin / program), *args]
        return ["runuser", "-u", POSTGRES_USER, "--", *command] if self._as_root else command

    def _run(self, program: str, *args: str, timeout: float) -> None:
        """Run one of the server's programs (as ``postgres`` when root); raise with its
        output and the server log's tail when it fails or outlives ``timeout`` seconds."""
        try:
            done = subprocess.run(
                self._command(program, *args),
                cwd=self._root,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"{program} did not finish within {timeout:.0f} s\n{self._log_tail()}") from exc
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stdout}{done.stderr}\n{self._log_tail()}")

    def _log_tail(self, lines: int = 40) -> str:
        try:
            text = self._log.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "server log (tail):\n" + "\n".join(text.splitlines()[-lines:])

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            try:
                with psycopg.connect(self.dsn(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError as exc:
                if self._process is not None and self._process.poll() is not None:
                    raise RuntimeError(f"postgres exited ({self._process.returncode})\n{self._log_tail()}") from exc
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"PostgreSQL did not accept connections within {_START_TIMEOUT:.0f} s: {exc}\n"
                        f"{self._log_tail()}"
                    ) from exc
                time.sleep(0.1)

    @property
    def pid(self) -> int | None:
        """The server process's id (its backends are its children), None once stopped."""
        return None if self._process is None or self._process.poll() is not None else self._process.pid

    def dsn(self, dbname: str = "postgres") -> str:
        """The URL of database ``dbname`` on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create database ``name`` (a copy of ``template`` when given: nobody may be connected
        to the template meanwhile) and return its URL."""
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(_database_name(name)))
        if template is not None:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(_database_name(template)))
        with psycopg.connect(self.dsn(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(statement)
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name`` when it exists, its open connections terminated first
        (``WITH (FORCE)``: ``pg_terminate_backend`` on each, in the same statement)."""
        statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(_database_name(name)))
        with psycopg.connect(self.dsn(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(statement)

    def stop(self) -> None:
        """Stop the server (immediate shutdown: the data is thrown away; SIGKILL when that
        takes longer than 30 s) and remove the cluster's temporary folder. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self._process is not None and self._process.poll() is None:
            try:
                self._run("pg_ctl", "stop", "-m", "immediate", "-w", "-t", "30", "-D", str(self._data), timeout=45)
                self._process.wait(timeout=_STOP_TIMEOUT)
            except (RuntimeError, subprocess.TimeoutExpired):
                _kill_postmaster(self._data / "postmaster.pid")
                self._process.kill()
                self._process.wait(timeout=_STOP_TIMEOUT)
        if self._as_root:
            shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def _database_name(name: str) -> str:
    if not _DATABASE_NAME.fullmatch(name):
        raise ValueError(f"not a database name for tests (want [a-z_][a-z0-9_]*): {name!r}")
    return name


def _kill_postmaster(pid_file: Path) -> None:
    """SIGKILL the postmaster named in ``postmaster.pid`` (its backends exit on their own
    when they notice it gone)."""
    try:
        os.kill(int(pid_file.read_text().splitlines()[0]), signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass
