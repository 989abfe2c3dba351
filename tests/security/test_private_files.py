"""Private files (issue 15): the data directory is 0700 and everything the service writes
in it 0600 (folders 0700), under the usual umask 022 too: SQLite with its -wal and -shm
files, the rate-limit counters, the master secret, the SoftHSM2 token it creates, the
analytics Parquet and DuckDB files. ``qday`` sets the umask 077 for what it runs, and
the store makes its folder and files owner-only itself (an app built without the CLI)."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

import cli.main
from services.settings import load_settings
from storage.sqlite_db import PRIVATE_UMASK, make_private, open_connection
from tests.custody.support import requires_softhsm, shared_softhsm_conf
from tests.support import REPO_ROOT, ManualClock, ServerProcess, client_for, make_tenant, running_app

shared_softhsm_conf()  # at collection: before any app of this process opens SoftHSM2

PASSWORD = "correct horse battery staple"


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """The process umask set to ``mask`` for the block."""
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def not_private(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every path under ``root`` (itself included) that group or others may access."""
    found = {}
    for path in [root, *sorted(root.rglob("*"))]:
        if path.name in skip or path.is_symlink():
            continue
        if mode(path) & 0o077:
            found[str(path.relative_to(root))] = oct(mode(path))
    return found


# --- the store ---------------------------------------------------------------------------------


def test_make_private_strips_group_and_other(tmp_path):
    folder, file = tmp_path / "d", tmp_path / "f"
    folder.mkdir()
    file.write_text("x")
    os.chmod(folder, 0o755)
    os.chmod(file, 0o644)
    make_private(folder)
    make_private(file)
    make_private(tmp_path / "missing")  # nothing to do, no error
    assert (mode(folder), mode(file)) == (0o700, 0o600)
    os.chmod(file, 0o400)
    make_private(file)
    assert mode(file) == 0o400  # never adds a permission


def test_make_private_leaves_sticky_shared_folders_alone(tmp_path):
    shared = tmp_path / "tmp-like"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    make_private(shared)
    assert mode(shared) == 0o1777


def test_new_database_is_private_under_umask_022(tmp_path):
    data = tmp_path / "data"
    with umask(0o022):
        data.mkdir()
        assert mode(data) == 0o755
        conn = open_connection(data / "qday.sqlite")
        try:
            conn.execute("CREATE TABLE t (x)")
            conn.execute("INSERT INTO t VALUES (1)")  # the WAL now holds a frame
            assert (data / "qday.sqlite-wal").exists() and (data / "qday.sqlite-shm").exists()
            assert not_private(data) == {}
        finally:
            conn.close()


def test_readable_files_of_an_older_version_are_made_private(tmp_path):
    data = tmp_path / "data"
    with umask(0o022):
        data.mkdir()
        old = sqlite3.connect(data / "qday.sqlite")
        old.execute("PRAGMA journal_mode = WAL")
        old.execute("CREATE TABLE t (x)")
        old.execute("INSERT INTO t VALUES (1)")
        old.commit()  # kept open: its -wal and -shm stay, readable by all
        try:
            assert mode(data / "qday.sqlite") == mode(data / "qday.sqlite-wal") == 0o644
            open_connection(data / "qday.sqlite").close()
            assert not_private(data) == {}
        finally:
            old.close()


# --- the app, built without the CLI (its umask stays 022) ------------------------------------


async def test_app_factory_writes_only_private_files_under_umask_022(tmp_path):
    data = tmp_path / "data"
    # two workers: the rate-limit counters live in ratelimit.sqlite
    settings = load_settings({"QDAY_FAMILY_CHAINS": "none", "QDAY_WORKERS": "2"}, data_dir=data)
    with umask(0o022):
        data.mkdir()
        async with running_app(settings, ManualClock()) as app, client_for(app) as client:
            tenant = await make_tenant(client, ("secret_live", "secret_test"))
            assert (await client.get("/v1/usage", headers=tenant.auth("secret_live"))).status_code == 200
            names = {p.name for p in data.rglob("*")}
            assert {"qday.sqlite-wal", "qday.sqlite-shm", "ratelimit.sqlite-wal", "secrets"} <= names
            assert not_private(data) == {}
        assert not_private(data) == {}


# --- the CLI ---------------------------------------------------------------------------------


def test_qday_runs_its_commands_under_umask_077_and_restores_the_callers(monkeypatch):
    seen = []
    monkeypatch.setattr(cli.main, "_cmd_serve", lambda args: seen.append(current_umask()) or 0)
    with umask(0o022):
        assert cli.main.main(["serve"]) == 0
        assert current_umask() == 0o022
    assert seen == [PRIVATE_UMASK] == [0o077]


def test_qday_sql_writes_private_parquet_and_duckdb_files(tmp_path):
    data = tmp_path / "data"
    command = ["sql", "--data-dir", str(data), "--write-catalog", str(data / "views.duckdb")]
    with umask(0o022):  # inherited by the child
        open_connection(data / "qday.sqlite").close()  # `qday sql` wants a service's data directory
        done = subprocess.run(
            [sys.executable, "-m", "cli.main", *command],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert list((data / "analytics").rglob("*.parquet")) and (data / "views.duckdb").is_file()
    assert not_private(data) == {}


@requires_softhsm
def test_qday_serve_writes_only_private_files(tmp_path):
    """A real ``qday serve`` started under umask 022 with its own SoftHSM2 token in the data
    directory: after start-up and some writes, nothing there is readable by others."""
    data = tmp_path / "data"
    with umask(0o022):
        server = ServerProcess(data, env={"QDAY_SOFTHSM_CONF": str(data / "softhsm" / "softhsm2.conf")})
    try:
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            email = f"private-{os.getpid()}@example.com"
            r = client.post("/v1/auth/register", json={"email": email, "password": PASSWORD})
            assert r.status_code == 201, r.text
            token = client.post("/v1/auth/login", json={"email": email, "password": PASSWORD}).json()["data"]["token"]
            r = client.post(
                "/v1/auth/api-keys",
                json={"name": "k", "type": "secret", "environment": "live"},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert r.status_code == 201, r.text
        assert (data / "softhsm" / "tokens").is_dir() and any((data / "softhsm" / "tokens").iterdir())
        assert (data / "qday.sqlite-wal").exists() and (data / "secrets").is_dir()
        # server.log is the test's own file (ServerProcess opens it before the server starts)
        assert not_private(data, skip=("server.log",)) == {}
    finally:
        server.stop()
