"""``make run-pg``: two API nodes on one PostgreSQL on this machine, to try what
docs/deployment.md describes.

A PostgreSQL cluster is created on first start (``initdb``, trust authentication, listening
on 127.0.0.1 only) and started on ``--pg-port``; database ``qday`` in it. Then, supervised
as ``qday up`` supervises its programs: node A is ``qday up`` (the API on ``--port`` and
Dagster, whose storage is on the same database) or ``qday serve`` with ``--no-dagster``,
node B ``qday serve`` on ``--port`` + 1, each with a data directory of its own under
``--data-dir``. Both get the same master secret, generated once into
``<data-dir>/cluster.key`` (this machine standing in for a secret store). Ctrl-C or SIGTERM
stops the nodes, then PostgreSQL.

PostgreSQL refuses to run as root: as root its cluster lives in a folder the ``postgres``
user owns (``/var/tmp/qday-run-pg-<port>``, as a root-only data directory cannot be entered
by it) and every server program runs as that user.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli.supervisor import Child, Supervisor
from storage.postgres_db import accepts_connections, create_database

POSTGRES_USER = "postgres"
DATABASE = "qday"
START_SECONDS = 60.0


def postgres_bin() -> Path | None:
    """The folder of ``initdb``, ``pg_ctl`` and ``postgres``: the newest
    ``/usr/lib/postgresql/*/bin`` (Debian), else the folder of ``initdb`` on PATH; None
    when PostgreSQL is not installed."""

    def version(folder: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", folder.parent.name))

    installed = [d for d in Path("/usr/lib/postgresql").glob("*/bin") if (d / "initdb").is_file()]
    for folder in sorted(installed, key=version, reverse=True):
        if (folder / "pg_ctl").is_file():
            return folder
    initdb = shutil.which("initdb")
    if initdb is not None and (Path(initdb).parent / "pg_ctl").is_file():
        return Path(initdb).parent
    return None


def as_server_user(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when we are root (PostgreSQL refuses root)."""
    return ["runuser", "-u", POSTGRES_USER, "--", *argv] if os.geteuid() == 0 else argv


def cluster_folder(data_dir: Path, pg_port: int) -> Path:
    """Where the cluster lives: ``<data_dir>/postgres``, or as root a folder of the
    ``postgres`` user's."""
    if os.geteuid() == 0:
        return Path(f"/var/tmp/qday-run-pg-{pg_port}")
    return data_dir.resolve() / "postgres"


def ensure_cluster(bin_dir: Path, folder: Path) -> Path:
    """The cluster's data directory, created with ``initdb`` when missing."""
    data = folder / "data"
    if (data / "PG_VERSION").is_file():
        return data
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    (folder / "sockets").mkdir(exist_ok=True, mode=0o700)
    if os.geteuid() == 0:
        for path in (folder, folder / "sockets"):
            shutil.chown(path, POSTGRES_USER, POSTGRES_USER)
    argv = [str(bin_dir / "initdb"), "-A", "trust", "-U", "postgres", "--encoding=UTF8", "--locale=C", "-D", str(data)]
    subprocess.run(as_server_user(argv), check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    return data


def start_server(bin_dir: Path, folder: Path, data: Path, port: int) -> subprocess.Popen[bytes]:
    """``postgres`` on 127.0.0.1:``port`` (its log in ``<folder>/server.log``), once it
    accepts connections; ``RuntimeError`` with the log's tail otherwise."""
    log_path = folder / "server.log"
    argv = [
        str(bin_dir / "postgres"),
        "-D",
        str(data),
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        f"port={port}",
        "-c",
        f"unix_socket_directories={folder / 'sockets'}",
    ]
    with open(log_path, "ab") as log:
        server = subprocess.Popen(
            as_server_user(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    deadline = time.monotonic() + START_SECONDS
    while not accepts_connections(admin):
        if server.poll() is not None or time.monotonic() > deadline:
            stop_server(server)
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"PostgreSQL did not start on 127.0.0.1:{port}:\n{tail}")
        time.sleep(0.2)
    return server


def stop_server(server: subprocess.Popen[bytes]) -> None:
    """Fast shutdown (SIGINT: sessions end, data is flushed), SIGKILL after 30 s."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGINT)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)


def cluster_secret(data_dir: Path) -> str:
    """The master secret both nodes share: ``<data_dir>/cluster.key``, made once (0600)."""
    path = data_dir / "cluster.key"
    if not path.is_file():
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return path.read_text().strip()


def nodes(data_dir: Path, port: int, dagster_port: int, dagster: bool) -> list[Child]:
    """Node A (``qday up``, or ``qday serve`` without Dagster) and node B (``qday serve``)."""
    qday = [sys.executable, "-m", "cli.main"]
    node_a = [*qday, "up", "--data-dir", str(data_dir / "node-a"), "--port", str(port)]
    if dagster:
        node_a += ["--dagster-port", str(dagster_port)]
    else:
        node_a = [*qday, "serve", "--data-dir", str(data_dir / "node-a"), "--port", str(port)]
    node_b = [*qday, "serve", "--data-dir", str(data_dir / "node-b"), "--port", str(port + 1)]
    return [Child("node-a", node_a, fatal=frozenset({2})), Child("node-b", node_b, fatal=frozenset({2}))]


def main(argv: list[str] | None = None) -> int:
    """Run the set-up until Ctrl-C or SIGTERM (exit 0), or until a node keeps failing (1)."""
    parser = argparse.ArgumentParser(prog="python -m cli.local_cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("var"))
    parser.add_argument("--port", type=int, default=8000, help="node A's API port; node B's is the next")
    parser.add_argument("--pg-port", type=int, default=5433)
    parser.add_argument("--dagster-port", type=int, default=3000)
    parser.add_argument("--no-dagster", dest="dagster", action="store_false", help="node A runs qday serve only")
    args = parser.parse_args(argv)
    bin_dir = postgres_bin()
    if bin_dir is None:
        print("PostgreSQL is not installed: make postgres (apt-get install postgresql)", file=sys.stderr)
        return 2
    folder = cluster_folder(args.data_dir, args.pg_port)
    server = start_server(bin_dir, folder, ensure_cluster(bin_dir, folder), args.pg_port)
    try:
        admin = f"postgresql://postgres@127.0.0.1:{args.pg_port}/postgres"
        create_database(admin, DATABASE)
        url = f"postgresql://postgres@127.0.0.1:{args.pg_port}/{DATABASE}"
        env = {**os.environ, "QDAY_DATABASE_URL": url, "QDAY_SECRET_KEY": cluster_secret(args.data_dir)}
        env.setdefault("PYTHONUNBUFFERED", "1")
        supervisor = Supervisor(nodes(args.data_dir, args.port, args.dagster_port, args.dagster), env, restarts=3)
        previous = {sig: signal.signal(sig, supervisor.request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        supervisor.say(f"PostgreSQL on 127.0.0.1:{args.pg_port} (cluster {folder}), database {DATABASE}")
        supervisor.say(f"node A on http://127.0.0.1:{args.port}/v1, node B on http://127.0.0.1:{args.port + 1}/v1")
        try:
            return supervisor.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        stop_server(server)


if __name__ == "__main__":
    sys.exit(main())
