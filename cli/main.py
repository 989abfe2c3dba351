"""The ``qday`` command: everything a person runs.

``qday serve`` starts the API; ``qday admin set-plan`` changes an account's plan
(effective at once, even on a running server, since every request reads it);
``qday admin purge-keys`` destroys managed keys whose deletion date has passed;
``qday client …`` is the client SDK's command (``qday-client``, docs/quickstart.md).

Every command finds the same data directory wherever it runs (``--data-dir``, else
``QDAY_DATA_DIR``, else the config file's ``data_dir``, else ``var/`` of the checkout) and
says which; the commands that read a store (``sql``, ``admin``, ``watch import``) stop with
one line when there is none there instead of creating an empty one. ``serve`` and ``up``
check their ports before starting anything.

Each subcommand imports what it needs when it runs, so ``qday --help`` and ``qday admin``
start in ~0.4 s: importing the API takes ~2.9 s and the pipelines ~4.2 s (measured here).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.clock import Clock, SystemClock
from services.settings import Settings, SettingsError, load_settings
from storage.errors import StorageError
from storage.models import Account, Plan
from storage.sqlite_db import PRIVATE_UMASK

CHECKOUT = Path(__file__).resolve().parent.parent
"""The source tree qday runs from (installed editable, as ``make install`` does)."""


def default_data_dir(env: Mapping[str, str] = os.environ) -> Path:
    """The data directory when neither ``--data-dir``, ``QDAY_DATA_DIR`` nor the config file
    names one: ``var/`` of the checkout (what ``make run`` uses), whatever the working
    directory, so every ``qday`` command finds the same store; ``$XDG_DATA_HOME/qday``
    (``~/.local/share/qday``) when qday is installed without its source tree."""
    if (CHECKOUT / "pyproject.toml").is_file():
        return CHECKOUT / "var"
    return Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "qday"


def _config_names_data_dir(config: Path | None) -> bool:
    path = config or (Path(os.environ["QDAY_CONFIG"]) if os.environ.get("QDAY_CONFIG") else None)
    if path is None:
        return False
    try:
        return "data_dir" in tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # load_settings reports it


def _data_dir(args: argparse.Namespace) -> Path | None:
    """The data directory flag, absolute; the default one when nothing names one; None when
    ``QDAY_DATA_DIR`` or the config file does (the settings read it)."""
    if args.data_dir is not None:
        return Path(args.data_dir).expanduser().resolve()
    if os.environ.get("QDAY_DATA_DIR") or _config_names_data_dir(args.config):
        return None
    return default_data_dir()


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    values = {
        "data_dir": _data_dir(args),
        "host": getattr(args, "host", None),
        "port": getattr(args, "port", None),
        "workers": getattr(args, "workers", None),
    }
    return {k: v for k, v in values.items() if v is not None}


#: Commands that read an existing store and must not create an empty one elsewhere.
_READS_A_STORE = frozenset({"sql", "admin", "watch"})


def _settings(args: argparse.Namespace) -> Settings:
    settings = load_settings(config_file=args.config, **_overrides(args))
    if args.command in _READS_A_STORE:
        root = settings.data_dir.resolve()
        analytics = args.command == "sql" and (root / "analytics").is_dir()
        if not settings.database_url and not settings.operational_db.is_file() and not analytics:
            raise SettingsError(
                f"no qday data in {root} (no {settings.operational_db.name}): pass --data-dir or set "
                "QDAY_DATA_DIR to the data directory of the service (qday up, make run)"
            )
    return settings


def _quiet_sanic() -> None:
    """Sanic reads these when imported: no hint about ``--debug``/``--dev`` (flags of Sanic's
    own command, not of ``qday serve``), and no colour codes in a log (stderr) that is not a
    terminal (Sanic looks at stdout only)."""
    os.environ.setdefault("SANIC_IGNORE_PRODUCTION_WARNING", "true")
    if os.environ.get("NO_COLOR") or not sys.stderr.isatty():
        os.environ.setdefault("SANIC_NO_COLOR", "true")


def _cmd_serve(args: argparse.Namespace) -> int:
    from cli.ports import Port, busy, problem

    settings = _settings(args)
    port = Port("API", settings.host, settings.port, "pass --port or set QDAY_PORT")
    blocked = busy([port])
    if blocked:
        print(f"qday serve: {blocked}", file=sys.stderr)
        return 2
    _quiet_sanic()
    from api.server import serve

    print(f"qday API on http://{settings.host}:{settings.port}/v1", flush=True)
    print(f"data: {settings.data_dir.resolve()}", flush=True)
    try:
        serve(args.config, **_overrides(args))
    except OSError as exc:  # taken between the check and the bind
        if exc.errno != errno.EADDRINUSE:
            raise
        print(f"qday serve: {problem(port) or exc}", file=sys.stderr)
        return 2
    return 0


def _cmd_set_plan(args: argparse.Namespace) -> int:
    from services.operational import operational
    from storage.errors import AccountNotFound
    from storage.sql_accounts import SqlStore

    settings = _settings(args)

    async def set_plan() -> Account:
        async with operational(settings) as db:
            return await SqlStore(db).set_plan(args.email.lower(), Plan(args.plan))

    try:
        account = asyncio.run(set_plan())
    except AccountNotFound as exc:
        print(f"qday: {exc} ({_where(settings)})", file=sys.stderr)
        return 2
    print(f"{account.email} ({account.id}) is now on plan {account.plan.value} ({_where(settings)})")
    return 0


def _where(settings: Settings) -> str:
    """Which operational store a command used, for its messages (never the URL's password)."""
    if settings.database_url:
        return "database: PostgreSQL"
    return f"data: {settings.data_dir.resolve()}"


def purge_due_keys(settings: Settings, clock: Clock | None = None) -> list[str]:
    """Destroy the managed keys whose waiting period is over, from outside the
    server (``qday admin purge-keys``, a scheduler). The embedded backend keeps
    nothing per key on the token, so this needs only the store."""
    from services.custody.lifecycle import ManagedCustodyService
    from services.operational import operational
    from storage.sql_managed_keys import SqlManagedKeyStore

    async def purge() -> list[str]:
        async with operational(settings) as db:
            store = SqlManagedKeyStore(db)
            service = ManagedCustodyService(store, None, clock or SystemClock(), None, settings.deletion_wait_days)
            return await service.purge_due(limit=100_000)

    return asyncio.run(purge())


def _cmd_purge_keys(args: argparse.Namespace) -> int:
    settings = _settings(args)
    destroyed = purge_due_keys(settings)
    print(
        f"destroyed {len(destroyed)} managed key(s) whose deletion date has passed"
        + (": " + ", ".join(destroyed) if destroyed else "")
        + f" (data: {settings.data_dir.resolve()})"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``qday`` command."""
    parser = argparse.ArgumentParser(prog="qday", description="Post-quantum key, attestation and wallet-risk service")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir", type=Path, help="data directory (default QDAY_DATA_DIR, else var/ of the qday checkout)"
    )
    common.add_argument("--config", type=Path, help="TOML settings file (or QDAY_CONFIG)")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", parents=[common], help="run the HTTP API")
    serve.add_argument("--host", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default QDAY_PORT, else 8000)")
    serve.add_argument("--workers", type=int, help="worker processes (default 1)")
    serve.set_defaults(func=_cmd_serve)

    admin = sub.add_parser("admin", help="administrative commands")
    admin_sub = admin.add_subparsers(dest="admin_command", required=True)
    set_plan = admin_sub.add_parser("set-plan", parents=[common], help="change an account's plan")
    set_plan.add_argument("email")
    set_plan.add_argument("plan", choices=[p.value for p in Plan])
    set_plan.set_defaults(func=_cmd_set_plan)
    purge = admin_sub.add_parser(
        "purge-keys",
        parents=[common],
        help="destroy managed keys whose deletion waiting period is over (the server also does this periodically)",
    )
    purge.set_defaults(func=_cmd_purge_keys)
    sub.add_parser(
        "client",
        add_help=False,
        help="the client SDK's command: keygen, register, attest, verify, "
        "scan, keys (same as qday-client; see docs/quickstart.md)",
    )
    from cli.data import add_commands  # sql, watch import, up (docs/analytics.md)

    add_commands(sub, common, _settings)
    from cli.bitcoin import add_commands as add_bitcoin_commands

    add_bitcoin_commands(sub, common, _settings)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``qday`` console script."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["client"]:
        from qday_client.cli import main as client_main

        return client_main(argv[1:])
    args = build_parser().parse_args(argv)
    # Everything the service writes (the data directory, SQLite and its -wal/-shm, Parquet,
    # DuckDB, Dagster's files, SoftHSM2 tokens) is the owner's alone; the programs `qday up`
    # starts inherit the umask. Restored on return for callers in the same process (tests).
    previous = os.umask(PRIVATE_UMASK)
    try:
        return args.func(args)
    except (SettingsError, StorageError) as exc:
        print(f"qday: {exc}", file=sys.stderr)
        return 2
    finally:
        os.umask(previous)


if __name__ == "__main__":
    sys.exit(main())
