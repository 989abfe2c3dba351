"""The PostgreSQL migrations (storage/migrations/postgres) against the SQLite ones they
translate: the same files; the same tables, columns, keys, foreign keys and indexes; and
triggers that refuse the same changes with the same messages and keep the same counts,
checked by running one statement sequence on both engines."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from storage.sqlite_db import connect, migrate
from tests.postgres import MISSING_POSTGRES, PostgresServer, postgres_bin

SQLITE_MIGRATIONS = "storage.migrations"
POSTGRES_MIGRATIONS = "storage.migrations.postgres"
TEMPLATE = "qday_schema_template"
#: The PostgreSQL type of each SQLite (STRICT) column type.
TYPES = {"TEXT": "text", "BLOB": "bytea", "INTEGER": "bigint", "REAL": "double precision"}
#: PostgreSQL only: TRUNCATE fires no row trigger, so the append-only tables refuse it too.
TRUNCATE_GUARDS = {
    ("managed_key_events", "managed_key_events_no_truncate"),
    ("managed_keys", "managed_keys_no_truncate"),
    ("pq_keys", "pq_keys_no_truncate"),
}
T0 = "2026-11-21T00:00:00.000000+00:00"
T1 = "2026-11-22T00:00:00.000000+00:00"

_databases = itertools.count()


def _migrations(package: str) -> list[Traversable]:
    return sorted((f for f in resources.files(package).iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)


def _apply(url: str, files: Sequence[Traversable]) -> None:
    """Apply PostgreSQL migration files in order, each as one script in its own transaction."""
    with psycopg.connect(url, autocommit=True) as conn:
        for file in files:
            with conn.transaction():
                conn.execute(file.read_text())


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """One throw-away PostgreSQL server for the session; skips when PostgreSQL is absent."""
    if postgres_bin() is None:
        pytest.skip(MISSING_POSTGRES)
    with PostgresServer(tmp_path_factory.mktemp("postgres")) as server:
        yield server


@pytest.fixture(scope="module")
def template(postgres: PostgresServer) -> str:
    """A database with every PostgreSQL migration applied, copied for each test."""
    _apply(postgres.create_database(TEMPLATE), _migrations(POSTGRES_MIGRATIONS))
    return TEMPLATE


@pytest.fixture
def pg(postgres: PostgresServer, template: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    """An autocommit connection to a fresh copy of the migrated template."""
    name = f"qday_schema_{next(_databases)}"
    with psycopg.connect(postgres.create_database(name, template=template), autocommit=True) as conn:
        yield conn
    postgres.drop_database(name)


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A migrated SQLite file (autocommit, foreign keys on), as the store opens it."""
    conn = connect(tmp_path / "store.sqlite")
    migrate(conn)
    yield conn
    conn.close()


# --- the schema -------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """What both engines must agree on about one table."""

    columns: tuple[tuple[str, str, bool], ...]  # (name, PostgreSQL type, NOT NULL) in order
    primary_key: tuple[str, ...]
    unique: frozenset[tuple[str, ...]]  # UNIQUE constraints by their columns
    indexes: dict[str, tuple[tuple[str, ...], bool]]  # CREATE INDEX name -> (columns, unique)
    foreign_keys: frozenset[tuple[tuple[str, ...], str, tuple[str, ...]]]
    checks: int


def _sqlite_schema(conn: sqlite3.Connection) -> dict[str, Table]:
    tables: dict[str, Table] = {}
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " AND name != 'schema_migrations'"  # the migration runner's own table, not a migration's
    ).fetchall()
    for table, create in rows:
        info = conn.execute(f"PRAGMA table_info({table})").fetchall()
        # A rowid alias (INTEGER PRIMARY KEY) is never NULL though table_info says nullable.
        columns = tuple((name, TYPES[kind], bool(notnull or pk)) for _, name, kind, notnull, _, pk in info)
        primary_key = tuple(name for _, name, _, _, _, pk in sorted(info, key=lambda c: c[5]) if pk)
        unique: set[tuple[str, ...]] = set()
        indexes: dict[str, tuple[tuple[str, ...], bool]] = {}
        for _, index, is_unique, origin, _ in conn.execute(f"PRAGMA index_list({table})").fetchall():
            index_columns = tuple(row[2] for row in conn.execute(f"PRAGMA index_info({index})").fetchall())
            if origin == "u":
                unique.add(index_columns)
            elif origin == "c":
                indexes[index] = (index_columns, bool(is_unique))
        references: dict[int, list[tuple[str, str, str]]] = {}
        for fk_id, _, parent, column, parent_column, *_ in conn.execute(f"PRAGMA foreign_key_list({table})"):
            references.setdefault(fk_id, []).append((parent, column, parent_column))
        foreign_keys = frozenset(
            (tuple(c for _, c, _ in ref), ref[0][0], tuple(p for _, _, p in ref)) for ref in references.values()
        )
        tables[table] = Table(
            columns, primary_key, frozenset(unique), indexes, foreign_keys, create.upper().count("CHECK")
        )
    return tables


_PG_COLUMNS = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum
"""
_PG_INDEXES = """
SELECT t.relname, i.relname, x.indisunique, x.indisprimary, k.contype,
       ARRAY(SELECT a.attname FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS n(attnum, position)
             JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = n.attnum ORDER BY n.position)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
LEFT JOIN pg_constraint k ON k.conindid = x.indexrelid AND k.conrelid = x.indrelid AND k.contype IN ('p', 'u')
WHERE t.relnamespace = 'public'::regnamespace
"""
_PG_CONSTRAINTS = """
SELECT t.relname, k.contype, r.relname,
       ARRAY(SELECT a.attname FROM unnest(k.conkey) WITH ORDINALITY AS n(attnum, position)
             JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = n.attnum ORDER BY n.position),
       ARRAY(SELECT a.attname FROM unnest(k.confkey) WITH ORDINALITY AS n(attnum, position)
             JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = n.attnum ORDER BY n.position)
FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid LEFT JOIN pg_class r ON r.oid = k.confrelid
WHERE k.connamespace = 'public'::regnamespace AND k.contype IN ('f', 'c')
"""


def _postgres_schema(conn: psycopg.Connection[tuple[Any, ...]]) -> dict[str, Table]:
    columns: dict[str, list[tuple[str, str, bool]]] = {}
    for table, name, kind, notnull in conn.execute(_PG_COLUMNS):
        columns.setdefault(table, []).append((name, kind, notnull))
    primary_key: dict[str, tuple[str, ...]] = {}
    unique: dict[str, set[tuple[str, ...]]] = {table: set() for table in columns}
    indexes: dict[str, dict[str, tuple[tuple[str, ...], bool]]] = {table: {} for table in columns}
    for table, index, is_unique, is_primary, contype, index_columns in conn.execute(_PG_INDEXES):
        if is_primary:
            primary_key[table] = tuple(index_columns)
        elif contype == "u":
            unique[table].add(tuple(index_columns))
        else:
            indexes[table][index] = (tuple(index_columns), is_unique)
    foreign_keys: dict[str, set[tuple[tuple[str, ...], str, tuple[str, ...]]]] = {table: set() for table in columns}
    checks = dict.fromkeys(columns, 0)
    for table, contype, parent, own, referenced in conn.execute(_PG_CONSTRAINTS):
        if contype == "f":
            foreign_keys[table].add((tuple(own), parent, tuple(referenced)))
        else:
            checks[table] += 1
    return {
        table: Table(
            tuple(columns[table]),
            primary_key.get(table, ()),
            frozenset(unique[table]),
            indexes[table],
            frozenset(foreign_keys[table]),
            checks[table],
        )
        for table in columns
    }


def test_both_engines_have_the_same_migration_files():
    sqlite_names = [f.name for f in _migrations(SQLITE_MIGRATIONS)]
    postgres_names = [f.name for f in _migrations(POSTGRES_MIGRATIONS)]
    assert sqlite_names == postgres_names
    assert len(sqlite_names) >= 10


def test_same_tables_columns_keys_and_indexes(lite, pg):
    sqlite_schema = _sqlite_schema(lite)
    postgres_schema = _postgres_schema(pg)
    assert sorted(postgres_schema) == sorted(sqlite_schema)
    for table, expected in sqlite_schema.items():
        assert postgres_schema[table] == expected, table


def test_same_triggers_each_with_a_function_of_its_name(lite, pg):
    sqlite_triggers = set(lite.execute("SELECT tbl_name, name FROM sqlite_master WHERE type = 'trigger'").fetchall())
    postgres_triggers = pg.execute(
        "SELECT c.relname, t.tgname, p.proname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " JOIN pg_proc p ON p.oid = t.tgfoid WHERE NOT t.tgisinternal"
    ).fetchall()
    assert {(table, name) for table, name, _ in postgres_triggers} == sqlite_triggers | TRUNCATE_GUARDS
    assert all(name == function for _, name, function in postgres_triggers)


def test_backfill_counts_addresses_watched_before_the_counts_existed(postgres):
    name = f"qday_schema_{next(_databases)}"
    url = postgres.create_database(name)
    files = _migrations(POSTGRES_MIGRATIONS)
    before = [f for f in files if f.name < "0009"]
    _apply(url, before)
    with psycopg.connect(url, autocommit=True) as conn:
        both = Both(None, conn)
        both.account("usr_1")
        both.account("usr_2")
        for n in range(3):
            both.watch(f"wat_{n}", "usr_1" if n else "usr_2")
    _apply(url, files[len(before) :])
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT account_id, n FROM watch_counts ORDER BY account_id").fetchall() == [
            ("usr_1", 2),
            ("usr_2", 1),
        ]
    postgres.drop_database(name)


# --- trigger behaviour, statement for statement ------------------------------------------


class Both:
    """The same statements on a migrated SQLite file and a migrated PostgreSQL database
    (both autocommit: a refused statement leaves nothing behind)."""

    def __init__(self, lite: sqlite3.Connection | None, pg: psycopg.Connection[tuple[Any, ...]]) -> None:
        self.lite = lite
        self.pg = pg

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Run ``statement`` (``?`` placeholders) on both engines."""
        if self.lite is not None:
            self.lite.execute(statement, params)
        self.pg.execute(statement.replace("?", "%s"), params)

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        """The rows of ``query``, asserted the same on both engines."""
        found = [tuple(row) for row in self.pg.execute(query).fetchall()]
        if self.lite is not None:
            assert [tuple(row) for row in self.lite.execute(query).fetchall()] == found, query
        return found

    def refused(self, statement: str, params: Sequence[Any] = ()) -> str:
        """The message both engines refuse ``statement`` with (asserted the same)."""
        assert self.lite is not None
        with pytest.raises(sqlite3.IntegrityError) as lite_error:
            self.lite.execute(statement, params)
        with pytest.raises(psycopg.IntegrityError) as pg_error:
            self.pg.execute(statement.replace("?", "%s"), params)
        assert pg_error.value.diag.message_primary == str(lite_error.value), statement
        return str(lite_error.value)

    def account(self, account_id: str, plan: str = "free") -> None:
        """A minimal account."""
        self.execute(
            "INSERT INTO accounts (id, email, name, plan, password_hash, created_at) VALUES (?, ?, NULL, ?, 'h', ?)",
            (account_id, f"{account_id}@example.com", plan, T0),
        )

    def api_key(self, key_id: str, account_id: str) -> None:
        """A minimal live secret key."""
        self.execute(
            "INSERT INTO api_keys (id, account_id, name, type, environment, key_hash, prefix, created_at)"
            " VALUES (?, ?, 'k', 'secret', 'live', ?, 'sk_live', ?)",
            (key_id, account_id, key_id.encode(), T0),
        )

    def watch(self, watch_id: str, account_id: str, environment: str = "live") -> None:
        """Watch an address (the id doubles as the address)."""
        self.execute(
            "INSERT INTO watchlist (id, account_id, environment, chain, address, label, created_at)"
            " VALUES (?, ?, ?, 'ethereum', ?, NULL, ?) ON CONFLICT DO NOTHING",
            (watch_id, account_id, environment, watch_id, T0),
        )

    def watch_descriptor(self, descriptor_id: str, account_id: str, derived: int) -> None:
        """Watch a wallet that derived ``derived`` addresses."""
        self.execute(
            "INSERT INTO watched_descriptors (id, account_id, environment, descriptor, gap_limit, derived_addresses,"
            f" created_at) VALUES (?, ?, 'live', ?, 20, {derived:d}, ?)",
            (descriptor_id, account_id, f"wpkh({descriptor_id})", T0),
        )


@pytest.fixture
def both(lite, pg) -> Both:
    """The same statements on both engines."""
    return Both(lite, pg)


def test_audit_log_pq_keys_and_destroyed_keys_refuse_changes_with_sqlites_messages(both):
    both.account("usr_1")
    both.execute(
        "INSERT INTO pq_keys (id, account_id, environment, algorithm, chain, public_key, fingerprint, origin,"
        " created_at) VALUES ('pqk_1', 'usr_1', 'live', 'ml-dsa-65', 'ethereum', ?, 'fp', 'registered', ?)",
        (b"\x01\x02", T0),
    )
    managed_key = (
        "INSERT INTO managed_keys (id, account_id, environment, algorithm, chain, public_key, fingerprint, backend,"
        " wrapping_key, key_ref, state, created_at, destroyed_at) VALUES (?, 'usr_1', 'live', 'ml-dsa-65',"
        " 'ethereum', ?, 'fp', 'softhsm', 'wk', ?, ?, ?, ?)"
    )
    both.execute(managed_key, ("mk_live", b"pk", b"ref", "active", T0, None))
    both.execute(managed_key, ("mk_dead", b"pk", None, "destroyed", T0, T1))
    both.execute(
        "INSERT INTO managed_key_events (id, key_id, account_id, environment, type, state, actor, at, details,"
        " prev_hash, hash) VALUES ('evt_1', 'mk_live', 'usr_1', 'live', 'created', 'active', 'api', ?, '{}', ?, ?)",
        (T0, b"\x00" * 32, b"\x01" * 32),
    )

    assert both.refused("UPDATE managed_key_events SET actor = 'nobody'") == "managed_key_events is append-only"
    assert both.refused("DELETE FROM managed_key_events") == "managed_key_events is append-only"
    assert both.refused("UPDATE pq_keys SET chain = 'bitcoin'") == "pq_keys rows are append-only"
    assert both.refused("DELETE FROM pq_keys") == "pq_keys rows are append-only"
    for change, value in (("state = 'active', key_ref = ?, destroyed_at = NULL", b"x"), ("fingerprint = ?", "fp2")):
        statement = f"UPDATE managed_keys SET {change} WHERE id = 'mk_dead'"
        assert both.refused(statement, (value,)) == "a destroyed managed key cannot change"
    assert both.refused("DELETE FROM managed_keys WHERE id = 'mk_live'") == "managed key rows are never deleted"

    # A key that is not destroyed changes; the refused statements left everything as it was.
    both.execute(
        "UPDATE managed_keys SET state = 'pending_deletion', deletion_scheduled_at = ? WHERE id = 'mk_live'", (T1,)
    )
    assert both.rows("SELECT id, state, key_ref FROM managed_keys ORDER BY id") == [
        ("mk_dead", "destroyed", None),
        ("mk_live", "pending_deletion", b"ref"),
    ]
    assert both.rows("SELECT seq, id, actor FROM managed_key_events") == [(1, "evt_1", "api")]
    assert both.rows("SELECT id, chain FROM pq_keys") == [("pqk_1", "ethereum")]

    for table, message in (
        ("managed_key_events", "managed_key_events is append-only"),
        ("managed_keys CASCADE", "managed key rows are never deleted"),
        ("pq_keys CASCADE", "pq_keys rows are append-only"),
    ):
        with pytest.raises(psycopg.IntegrityError, match=message):
            both.pg.execute(f"TRUNCATE {table}")


def test_auth_generation_counts_what_sqlite_counts(both):
    both.account("usr_1")
    both.account("usr_2")
    both.api_key("key_1", "usr_1")
    both.api_key("key_2", "usr_2")
    steps = [
        ("UPDATE accounts SET plan = 'pro' WHERE id = 'usr_1'", 1),
        ("UPDATE accounts SET name = 'Ada' WHERE id = 'usr_1'", 1),  # not a credential's concern
        ("UPDATE accounts SET email = 'ada@example.com' WHERE id = 'usr_1'", 2),
        ("UPDATE accounts SET plan = plan", 4),  # one per row, changed or not, as in SQLite
        (f"UPDATE api_keys SET last_used_at = '{T1}'", 4),
        (f"UPDATE api_keys SET deleted_at = '{T1}' WHERE id = 'key_1'", 5),
        (f"UPDATE api_keys SET expires_at = '{T1}', replaced_by = 'key_2' WHERE id = 'key_1'", 6),  # once per row
        ("UPDATE api_keys SET name = 'renamed', prefix = 'sk'", 6),
        ("UPDATE api_keys SET key_hash = ? WHERE id = 'key_2'", 7),
        ("UPDATE api_keys SET account_id = 'usr_1' WHERE id = 'key_2'", 8),
        ("UPDATE api_keys SET deleted_at = NULL WHERE id = 'nobody'", 8),
    ]
    assert both.rows("SELECT id, value FROM auth_generation") == [(1, 0)]
    for statement, expected in steps:
        both.execute(statement, (b"new",) if "?" in statement else ())
        assert both.rows("SELECT value FROM auth_generation") == [(expected,)], statement


def test_watch_counts_follow_the_same_statements_as_on_sqlite(both):
    for account in ("usr_1", "usr_2", "usr_3"):
        both.account(account)
    counts = "SELECT account_id, n FROM watch_counts ORDER BY account_id"
    steps: list[tuple[str, Sequence[Any]]] = [
        ("w:wat_1:usr_1", ()),
        ("w:wat_2:usr_1", ()),
        ("w:wat_2:usr_1", ()),  # idempotent add: no row, no count
        ("w:wat_3:usr_2", ()),
        ("UPDATE watchlist SET account_id = 'usr_2' WHERE id = 'wat_1'", ()),  # a move
        ("UPDATE watchlist SET account_id = account_id", ()),  # not a move
        ("UPDATE watchlist SET label = 'cold' WHERE id = 'wat_2'", ()),
        ("UPDATE watchlist SET account_id = 'usr_3' WHERE account_id = 'usr_2'", ()),  # two rows move
        ("DELETE FROM watchlist WHERE id = 'wat_2'", ()),
        ("d:wd_1:usr_1:5", ()),
        ("d:wd_2:usr_3:0", ()),
        ("UPDATE watched_descriptors SET derived_addresses = 7 WHERE id = 'wd_1'", ()),
        ("UPDATE watched_descriptors SET label = 'hot', scanned_at = ? WHERE id = 'wd_1'", (T1,)),
        ("UPDATE watched_descriptors SET derived_addresses = derived_addresses + 2", ()),  # every row
        ("DELETE FROM watched_descriptors WHERE id = 'wd_2'", ()),
        ("w:wat_4:usr_1", ()),
        ("DELETE FROM watchlist", ()),
        ("DELETE FROM watched_descriptors", ()),
    ]
    history = []
    for step, params in steps:
        if step.startswith("w:"):
            _, watch_id, account = step.split(":")
            both.watch(watch_id, account)
        elif step.startswith("d:"):
            _, descriptor_id, account, derived = step.split(":")
            both.watch_descriptor(descriptor_id, account, int(derived))
        else:
            both.execute(step, params)
        history.append(both.rows(counts))
        assert (
            both.rows(
                "SELECT a.id, (SELECT COUNT(*) FROM watchlist w WHERE w.account_id = a.id)"
                " + (SELECT COALESCE(SUM(d.derived_addresses), 0) FROM watched_descriptors d WHERE d.account_id = a.id)"
                " FROM accounts a WHERE a.id IN (SELECT account_id FROM watch_counts) ORDER BY a.id"
            )
            == history[-1]
        ), step
    assert history[:5] == [
        [("usr_1", 1)],
        [("usr_1", 2)],
        [("usr_1", 2)],
        [("usr_1", 2), ("usr_2", 1)],
        [("usr_1", 1), ("usr_2", 2)],
    ]
    assert history[-1] == [("usr_1", 0), ("usr_2", 0), ("usr_3", 0)]


def test_a_count_that_would_go_negative_refuses_the_whole_statement(both):
    both.account("usr_1")
    both.watch("wat_1", "usr_1")
    both.watch("wat_2", "usr_1")
    both.execute("UPDATE watch_counts SET n = 1")  # out of step with the watch list
    with pytest.raises(sqlite3.IntegrityError):
        both.lite.execute("DELETE FROM watchlist")
    with pytest.raises(psycopg.IntegrityError):
        both.pg.execute("DELETE FROM watchlist")
    assert both.rows("SELECT COUNT(*) FROM watchlist") == [(2,)]
    assert both.rows("SELECT n FROM watch_counts") == [(1,)]
