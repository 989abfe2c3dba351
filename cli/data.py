"""``qday`` subcommands of the pipelines part: ``sql``, ``watch import`` and ``up``.

``cli.main`` registers them with ``add_commands``; each command reads the settings the
same way as ``qday serve`` (``--data-dir``, ``--config``, ``QDAY_*``).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # imported lazily at run time: `qday --help` stays fast
    from services.settings import Settings
    from storage.models import Account

SettingsLoader = Callable[[argparse.Namespace], "Settings"]


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser, settings: SettingsLoader) -> None:
    """Add ``sql``, ``watch import`` and ``up`` to the ``qday`` parser."""
    sql = sub.add_parser(
        "sql",
        parents=[common],
        help="query the analytics tables (DuckDB over Parquet) and the operational tables",
        description="Open a DuckDB session with the analytics views (watchlist, "
        "address_observations, address_risk, address_risk_latest, key_exposure, "
        "chain_readiness, ...) and a snapshot of the operational tables in schema ops "
        "(ops.watchlist, ops.scan_results, ...; from PostgreSQL with QDAY_DATABASE_URL). "
        "See docs/analytics.md.",
    )
    sql.add_argument("-c", "--command", dest="sql", help="run one query and print CSV to stdout")
    sql.add_argument(
        "--write-catalog",
        type=Path,
        metavar="FILE",
        help="write a DuckDB file holding only the views (open it read-only) and exit",
    )
    sql.set_defaults(func=lambda args: cmd_sql(args, settings(args)))

    watch = sub.add_parser("watch", help="watch-list administration")
    watch_sub = watch.add_subparsers(dest="watch_command", required=True)
    imp = watch_sub.add_parser(
        "import",
        parents=[common],
        help="bulk-add watched addresses from a CSV file",
        description="CSV columns: address (required), chain (optional: detected, an EVM "
        "address means ethereum), label (optional). Bad rows are reported "
        "with their line numbers; good rows are imported. New addresses beyond the account's plan "
        "cap on watched addresses (free 100, builder 10,000, pro 1,000,000, enterprise "
        "QDAY_ENTERPRISE_WATCH_CAP) are rejected the same way (LIM_001).",
    )
    imp.add_argument("file", type=Path, help="CSV file with a header row")
    imp.add_argument("--account", required=True, metavar="EMAIL", help="the account that watches them")
    imp.add_argument("--environment", required=True, choices=["live", "test"])
    imp.set_defaults(func=lambda args: cmd_watch_import(args, settings(args)))

    up = sub.add_parser(
        "up",
        parents=[common],
        help="run the API, the Dagster webserver and daemon together",
        description="Supervises `qday serve`, `dagster-webserver` (127.0.0.1) and `dagster-daemon "
        "run` with DAGSTER_HOME under the data directory (and anvil with --anvil). Every port is "
        "checked first. Ctrl-C or SIGTERM stops all.",
    )
    up.add_argument("--port", type=int, help="API port (default QDAY_PORT, else 8000)")
    up.add_argument("--host", help="API listen address (default 127.0.0.1)")
    up.add_argument("--dagster-port", type=int, help="Dagster webserver port (default QDAY_DAGSTER_PORT, else 3000)")
    up.add_argument("--anvil", type=Path, metavar="PATH", help="also run this anvil binary (make devnet)")
    up.add_argument("--anvil-port", type=int, help="anvil's port (default QDAY_ANVIL_PORT, else 8545)")
    up.add_argument(
        "--restarts",
        type=int,
        default=3,
        help="restarts allowed per process within 5 minutes before everything stops (default 3)",
    )
    up.set_defaults(func=lambda args: cmd_up(args, settings(args)))


# --- qday sql ---------------------------------------------------------------------------


def _text(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def format_table(columns: Sequence[str], rows: Sequence[Sequence[object]], max_width: int = 60) -> str:
    """Rows as an aligned text table (cells cut at ``max_width`` characters)."""
    cells = [[_text(v) for v in row] for row in rows]
    cells = [[c if len(c) <= max_width else c[: max_width - 1] + "…" for c in row] for row in cells]
    widths = [max([len(name)] + [len(row[i]) for row in cells]) for i, name in enumerate(columns)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def render(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    return "\n".join([line, render(columns), line, *(render(r) for r in cells), line])


def _csv_value(value: object) -> object:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, datetime):
        return value.isoformat()
    return "" if value is None else value


def run_csv(con, sql: str, out: TextIO, chunk: int = 10_000) -> int:
    """Run ``sql`` and write its result as CSV (header first); returns the row count."""
    cursor = con.execute(sql)
    writer = csv.writer(out, lineterminator="\n")
    if cursor.description is None:
        return 0
    writer.writerow([d[0] for d in cursor.description])
    count = 0
    while rows := cursor.fetchmany(chunk):
        writer.writerows([_csv_value(v) for v in row] for row in rows)
        count += len(rows)
    return count


REPL_HELP = """Statements end with ';'. Commands: .tables  .schema VIEW  .help  .quit
Views: watchlist, address_observations, native_prices, address_risk, address_risk_latest,
key_exposure, key_exposure_latest, chain_readiness, chain_readiness_latest, watchlist_exports
(docs/analytics.md). Operational tables (a snapshot taken at start): ops.accounts,
ops.watchlist, ops.watched_descriptors, ops.scan_results, ops.api_keys, ops.managed_keys, ..."""


class Repl:
    """A small DuckDB shell: reads statements (``;``-terminated, several lines allowed),
    prints results as tables. Works on a terminal and on piped input."""

    def __init__(self, con, out: TextIO, err: TextIO, max_rows: int = 1_000) -> None:
        self.con = con
        self.out = out
        self.err = err
        self.max_rows = max_rows

    def command(self, line: str) -> bool:
        """Run a dot command; False to quit."""
        name, _, arg = line.strip().partition(" ")
        if name in (".quit", ".exit", ".q"):
            return False
        if name == ".help":
            print(REPL_HELP, file=self.out)
        elif name == ".tables":
            self.statement(
                "SELECT CASE WHEN table_schema = 'main' THEN table_name ELSE table_schema || '.' || table_name END"
                " AS name, table_type AS type FROM information_schema.tables ORDER BY table_schema, table_name"
            )
        elif name == ".schema" and arg.strip():
            schema, _, view = arg.strip().rstrip(";").replace("'", "''").rpartition(".")
            self.statement(
                f"SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '{view}'"
                f" AND table_schema = '{schema or 'main'}' ORDER BY ordinal_position"
            )
        else:
            print(f"unknown command {name!r}; try .help", file=self.err)
        return True

    def statement(self, sql: str) -> None:
        """Run one statement and print its result (errors go to ``err``, the session goes on)."""
        try:
            cursor = self.con.execute(sql)
            if cursor.description is None:
                print("OK", file=self.out)
                return
            columns = [d[0] for d in cursor.description]
            rows = cursor.fetchmany(self.max_rows + 1)
        except Exception as exc:  # noqa: BLE001 - a shell reports and continues
            print(f"Error: {exc}", file=self.err)
            return
        shown = rows[: self.max_rows]
        print(format_table(columns, shown), file=self.out)
        more = " (more rows not shown; add LIMIT or use qday sql -c for CSV)" if len(rows) > self.max_rows else ""
        print(f"{len(shown)} row{'s' if len(shown) != 1 else ''}{more}", file=self.out)

    def run(self, lines: Iterable[str], interactive: bool) -> None:
        buffer: list[str] = []
        if interactive:
            print("qday analytics (DuckDB). " + REPL_HELP, file=self.out)
        iterator = iter(lines)
        while True:
            if interactive:
                prompt = "   ...> " if buffer else "qday> "
                try:
                    line = input(prompt)
                except EOFError:
                    print(file=self.out)
                    break
                except KeyboardInterrupt:
                    print("^C", file=self.out)
                    buffer = []
                    continue
            else:
                following = next(iterator, None)
                if following is None:
                    break
                line = following
            if not buffer and line.strip().startswith("."):
                if not self.command(line):
                    return
                continue
            buffer.append(line)
            text = "\n".join(buffer).strip()
            if text.endswith(";"):
                buffer = []
                for statement in _split_statements(self.con, text):
                    self.statement(statement)
            elif not text:
                buffer = []
        rest = "\n".join(buffer).strip()
        if rest:
            self.statement(rest)


def _split_statements(con, text: str) -> list[str]:
    try:
        return [str(s.query) if hasattr(s, "query") else str(s) for s in con.extract_statements(text)]
    except Exception:  # noqa: BLE001 - let the engine report the syntax error
        return [text]


def _copy_operational(settings: Settings, con: Any) -> int | None:
    """The operational tables into schema ``ops`` of the session (``storage.operational_snapshot``),
    from PostgreSQL or the SQLite file; None when this data directory has no store yet."""
    import tempfile

    from services.operational import operational
    from storage.operational_snapshot import copy_operational

    if not settings.database_url and not settings.operational_db.is_file():
        return None

    async def copy(folder: Path) -> int:
        async with operational(settings) as db:
            return await copy_operational(db, con, folder)

    with tempfile.TemporaryDirectory(prefix="qday-sql-") as folder:  # owner-only: rows hold e-mail addresses
        return asyncio.run(copy(Path(folder)))


def cmd_sql(args: argparse.Namespace, settings: Settings) -> int:
    """``qday sql``: a shell, one query to CSV, or a views-only catalog file."""
    from pipelines.definitions import analytics_dir
    from storage.analytics import AnalyticsStore

    store = AnalyticsStore(analytics_dir(settings))
    if args.write_catalog is not None:
        path = store.write_catalog(args.write_catalog)
        print(f"wrote {path} (views over {store.root}); open it with duckdb.connect(path, read_only=True)")
        return 0
    con = store.connect()
    try:
        copied = _copy_operational(settings, con)
        if args.sql is not None:
            try:
                run_csv(con, args.sql, sys.stdout)
            except Exception as exc:  # noqa: BLE001 - duckdb raises many types; report them the same way
                print(f"qday sql: {exc}", file=sys.stderr)
                return 1
            return 0
        interactive = sys.stdin.isatty()
        if interactive:
            print(f"data: {settings.data_dir.resolve()}")
            if copied is not None:
                print(f"ops.*: the operational tables as of now ({copied} rows; a snapshot, secrets left out)")
            try:
                import readline  # noqa: F401  (line editing and history for input())
            except ImportError:
                pass
        Repl(con, sys.stdout, sys.stderr).run(sys.stdin, interactive)
        return 0
    finally:
        con.close()


# --- qday watch import ------------------------------------------------------------------


async def import_watchlist(
    rows: Iterable[tuple[int, dict[str, Any]]],
    *,
    account_id: str,
    environment: str,
    watch: Callable[[Any], Awaitable[Any]],
    now: Callable[[], datetime],
) -> tuple[list[tuple[int, str]], int, list[tuple[int, str]]]:
    """Validate and add (line number, CSV row) pairs; returns (imported (line, address)
    pairs, already watched count, rejected (line, reason) pairs). ``watch`` stores an
    entry (idempotent per account, environment, chain and address: ``services.scans.
    watch_within_cap``); a domain error it raises, such as the plan cap reached (LIM_001),
    rejects that row only, so rows beyond the cap are reported by line and the rest imported."""
    from api.errors import code_of
    from chains.environment import Environment
    from core.errors import DomainError
    from services.scans import watch_entry

    env = Environment(environment)
    imported: list[tuple[int, str]] = []
    rejected: list[tuple[int, str]] = []
    existing = 0
    for line, row in rows:
        address = (row.get("address") or "").strip()
        chain = (row.get("chain") or "").strip() or None
        label = (row.get("label") or "").strip() or None
        if None in row:  # csv.DictReader puts surplus fields under the None key
            surplus = row[None]  # type: ignore[index]  # csv.DictReader's surplus key is None, not a str
            rejected.append((line, f"{len(surplus)} more field(s) than the header has"))
            continue
        if not address:
            rejected.append((line, "address is empty"))
            continue
        try:
            entry = watch_entry(account_id, env, address, chain, label, now())
        except DomainError as exc:
            rejected.append((line, f"{code_of(exc)}: {exc}"))
            continue
        try:
            stored = await watch(entry)
        except DomainError as exc:
            rejected.append((line, f"{code_of(exc)}: {exc}"))
            continue
        if stored.id == entry.id:
            imported.append((line, f"{entry.chain}:{entry.address}"))
        else:
            existing += 1
    return imported, existing, rejected


def cmd_watch_import(args: argparse.Namespace, settings: Settings) -> int:
    """``qday watch import``: exit 0 when every row was imported (or already watched), 1 when
    some rows were rejected (the good ones are imported all the same), 2 on a usage error."""
    from services.operational import operational
    from services.scans import watch_within_cap
    from storage.sql_accounts import SqlStore
    from storage.sql_scans import SqlScanStore

    try:
        text = args.file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"qday watch import: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip().lower() for h in (reader.fieldnames or [])]
    unknown = sorted(set(header) - {"address", "chain", "label"})
    if "address" not in header or unknown:
        print(
            f"qday watch import: {args.file}: the header must name address and optionally chain, label"
            + (f" (unknown: {', '.join(unknown)})" if unknown else ""),
            file=sys.stderr,
        )
        return 2
    reader.fieldnames = header

    async def run() -> tuple[Account, list[tuple[int, str]], int, list[tuple[int, str]]] | None:
        async with operational(settings) as db:
            found = await SqlStore(db).account_by_email(args.account.strip().lower())
            if found is None:
                return None
            account = found[0]
            store = SqlScanStore(db)
            imported, existing, rejected = await import_watchlist(
                ((reader.line_num, row) for row in reader),
                account_id=account.id,
                environment=args.environment,
                watch=lambda entry: watch_within_cap(store, entry, account.plan, settings.enterprise_watch_cap),
                now=lambda: datetime.now(UTC),
            )
            return account, imported, existing, rejected

    outcome = asyncio.run(run())
    if outcome is None:
        print(f"qday watch import: no account {args.account}", file=sys.stderr)
        return 2
    account, imported, existing, rejected = outcome
    for line, reason in rejected:
        print(f"{args.file}:{line}: {reason}", file=sys.stderr)
    print(
        f"imported {len(imported)}, already watched {existing}, rejected {len(rejected)} "
        f"({account.email}, {args.environment})"
    )
    return 1 if rejected else 0


# --- qday up ----------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    """``qday up``: the API, the Dagster webserver and the daemon, supervised."""
    from cli.supervisor import DEFAULT_ANVIL_PORT, DEFAULT_DAGSTER_PORT, env_port, run_stack

    try:
        dagster_port = args.dagster_port or env_port("QDAY_DAGSTER_PORT", DEFAULT_DAGSTER_PORT)
        anvil_port = args.anvil_port or env_port("QDAY_ANVIL_PORT", DEFAULT_ANVIL_PORT)
    except ValueError as exc:
        print(f"qday up: {exc}", file=sys.stderr)
        return 2
    return run_stack(
        settings,
        config=args.config,
        dagster_port=dagster_port,
        restarts=args.restarts,
        anvil=args.anvil,
        anvil_port=anvil_port,
    )
