"""``ScanStore`` on SQLite: watch lists and the latest scan result per tenant."""

from __future__ import annotations

import sqlite3
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Final

from chains.environment import Environment
from storage.beacon import ChangeBeacon, StampWatch, Topic
from storage.descriptor_watch_sqlite import SqliteDescriptorWatchStore
from storage.group_commit import GroupCommitWriter
from storage.models import KeyScanResult, Keyset, ScanResult, WatchedAddress
from storage.row_cache import RowCache
from storage.sqlite_db import Row, dt, insert_or_get, open_database, page_clause, ts
from storage.writers import DirectWriter, Writer

_WATCH_COLUMNS = "id, account_id, environment, chain, address, label, created_at"
WATCH_EXPORT_COLUMNS: Final = ("watch_id", "account_id", "environment", "chain", "address", "label", "created_at")
"""What each row of ``SqliteScanStore.export_watchlist`` holds, in order (all text;
``created_at`` as stored, ISO 8601 UTC; ``label`` may be null)."""
_WATCH_EXPORT_SQL = f"SELECT {_WATCH_COLUMNS} FROM watchlist WHERE chain = ? ORDER BY environment, address, account_id"
_RESULT_COLUMNS = (
    "account_id, environment, chain, address, result, risk_value, risk_score, scoring_version, data_as_of,"
    " scanned_at, source"
)


def _watched(row: Row) -> WatchedAddress:
    return WatchedAddress(row[0], row[1], Environment(row[2]), row[3], row[4], row[5], dt(row[6]))


def _result(row: Row) -> ScanResult:
    return ScanResult(
        row[0], Environment(row[1]), row[2], row[3], row[4], row[5], row[6], row[7], dt(row[8]), dt(row[9]), row[10]
    )


def _insert_watched(c: sqlite3.Connection, entry: WatchedAddress) -> WatchedAddress:
    row = insert_or_get(
        c,
        "watchlist",
        _WATCH_COLUMNS,
        (
            entry.id,
            entry.account_id,
            entry.environment.value,
            entry.chain,
            entry.address,
            entry.label,
            ts(entry.created_at),
        ),
        ("account_id", "environment", "chain", "address"),
        (entry.account_id, entry.environment.value, entry.chain, entry.address),
    )
    return _watched(row)


def _insert_watched_within(c: sqlite3.Connection, entry: WatchedAddress, cap: int | None) -> WatchedAddress | None:
    if cap is not None:
        existing = c.execute(
            f"SELECT {_WATCH_COLUMNS} FROM watchlist WHERE account_id = ? AND environment = ? AND chain = ?"
            " AND address = ?",
            (entry.account_id, entry.environment.value, entry.chain, entry.address),
        ).fetchone()
        if existing is not None:
            return _watched(existing)
        row = c.execute("SELECT n FROM watch_counts WHERE account_id = ?", (entry.account_id,)).fetchone()
        if row is not None and row[0] >= cap:
            return None
    return _insert_watched(c, entry)


class SqliteScanStore:
    """Watch lists and scan results; writes go through the group-commit writer when
    there is one (the API's; the pipelines publish thousands of results at once),
    else straight to the connection.

    Cached scans read the latest result on every request, so results read are
    remembered until the change beacon says results changed (``save_results``
    announces it after its commit, from any process) or a second has passed.
    """

    _RESULT_CACHE_SIZE = 4096

    def __init__(self, conn: sqlite3.Connection, writer: Writer | None = None) -> None:
        self._conn = conn
        self._writer: Writer = writer or DirectWriter(conn)
        self._beacon = ChangeBeacon.beside(conn)
        self._results_watch = StampWatch(self._beacon, Topic.SCANS)
        self._results: RowCache[tuple[str, Environment, str, str], ScanResult] = RowCache(self._RESULT_CACHE_SIZE)

    async def watch(self, entry: WatchedAddress, cap: int | None = None) -> WatchedAddress | None:
        """Add an address to a watch list; the existing entry when already watched.

        With ``cap``: None (nothing stored) when the address is new and the account
        already watches ``cap`` addresses (both environments). The count is read in the
        adding transaction, under the write lock, so concurrent adds cannot overshoot;
        an address already watched is returned whatever the count."""
        return await self._writer.write(lambda c: _insert_watched_within(c, entry, cap))

    def descriptor_watch(self) -> SqliteDescriptorWatchStore:
        """The watched wallets, on this store's connection and writer."""
        return SqliteDescriptorWatchStore(self._conn, self._writer)

    async def unwatch(self, account_id: str, environment: Environment, entry_id: str) -> bool:
        """Remove an entry; False when it is not the account's."""

        def delete(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "DELETE FROM watchlist WHERE id = ? AND account_id = ? AND environment = ?",
                (entry_id, account_id, environment.value),
            )
            return cur.rowcount == 1

        return await self._writer.write(delete)

    def watchlist(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[WatchedAddress]:
        """The account's watched addresses in one environment, oldest first: those after
        the (created_at, id) position ``after``, at most ``limit`` (None: all)."""
        tail, args = page_clause(after, limit)
        rows = self._conn.execute(
            f"SELECT {_WATCH_COLUMNS} FROM watchlist WHERE account_id = ? AND environment = ?{tail}",
            (account_id, environment.value, *args),
        )
        return [_watched(r) for r in rows]

    def watch_count(self, account_id: str) -> int:
        """How many addresses the account watches (both environments)."""
        row = self._conn.execute("SELECT n FROM watch_counts WHERE account_id = ?", (account_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def all_watched(self, created_after: datetime | None = None) -> list[WatchedAddress]:
        """Every watched address of every tenant, optionally only newer ones."""
        sql = f"SELECT {_WATCH_COLUMNS} FROM watchlist"
        args: tuple[object, ...] = ()
        if created_after is not None:
            sql += " WHERE created_at > ?"
            args = (ts(created_after),)
        return [_watched(r) for r in self._conn.execute(sql + " ORDER BY created_at, id", args)]

    def export_watchlist(self, chain: str, chunk: int = 10_000) -> Generator[list[tuple[str | None, ...]], None, None]:
        """Every tenant's entries on ``chain`` (both environments), ordered by (environment,
        address, account), as raw rows (``WATCH_EXPORT_COLUMNS``) ``chunk`` at a time.

        One read statement (one index range, no sort), so the export is a consistent
        snapshot of the watch list however long the caller takes; its cursor is closed
        when the generator is exhausted or closed."""
        cursor = self._conn.execute(_WATCH_EXPORT_SQL, (chain,))
        try:
            while rows := cursor.fetchmany(chunk):
                yield rows
        finally:
            cursor.close()

    def latest_result(self, account_id: str, environment: Environment, chain: str, address: str) -> ScanResult | None:
        """The latest stored result for one address, if any."""
        if self._results_watch.due():
            self._results.clear()
        key = (account_id, environment, chain, address)
        cached = self._results.get(key)
        if cached is not None:
            return cached
        row = self._conn.execute(
            f"SELECT {_RESULT_COLUMNS} FROM scan_results WHERE account_id = ? AND environment = ? AND chain = ?"
            " AND address = ?",
            (account_id, environment.value, chain, address),
        ).fetchone()
        return None if row is None else self._results.remember(key, _result(row))

    async def save_results(self, results: list[ScanResult]) -> None:
        """Insert results, replacing stored ones that are not newer (durable when
        this returns)."""
        rows = [
            (
                r.account_id,
                r.environment.value,
                r.chain,
                r.address,
                r.result,
                r.risk_value,
                r.risk_score,
                r.scoring_version,
                ts(r.data_as_of),
                ts(r.scanned_at),
                r.source,
            )
            for r in results
        ]
        # Never let an older observation (a slow pipeline run) replace a newer one.
        sql = (
            f"INSERT INTO scan_results ({_RESULT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT (account_id, environment, chain, address) DO UPDATE SET"
            " result = excluded.result, risk_value = excluded.risk_value, risk_score = excluded.risk_score,"
            " scoring_version = excluded.scoring_version, data_as_of = excluded.data_as_of,"
            " scanned_at = excluded.scanned_at, source = excluded.source"
            " WHERE excluded.data_as_of >= scan_results.data_as_of"
        )
        await self._writer.write(lambda c: c.executemany(sql, rows))
        self._beacon.announce(Topic.SCANS)

    def latest_key_result(self, account_id: str, environment: Environment, subject: str) -> KeyScanResult | None:
        """The latest stored key-scan result for one subject (key and chains), if any."""
        row = self._conn.execute(
            "SELECT result, data_as_of, scanned_at FROM key_scan_results"
            " WHERE account_id = ? AND environment = ? AND subject = ?",
            (account_id, environment.value, subject),
        ).fetchone()
        if row is None:
            return None
        return KeyScanResult(account_id, environment, subject, row[0], dt(row[1]), dt(row[2]))

    async def save_key_result(self, result: KeyScanResult) -> None:
        """Insert or replace a key-scan result (durable when this returns)."""
        row = (
            result.account_id,
            result.environment.value,
            result.subject,
            result.result,
            ts(result.data_as_of),
            ts(result.scanned_at),
        )
        sql = (
            "INSERT INTO key_scan_results (account_id, environment, subject, result, data_as_of, scanned_at)"
            " VALUES (?,?,?,?,?,?) ON CONFLICT (account_id, environment, subject) DO UPDATE SET"
            " result = excluded.result, data_as_of = excluded.data_as_of, scanned_at = excluded.scanned_at"
        )
        await self._writer.write(lambda c: c.execute(sql, row))


@contextmanager
def open_scan_store(path: Path, synchronous: str = "FULL", *, writer: bool = True) -> Iterator[SqliteScanStore]:
    """A scan store on its own connection to the operational file (migrations applied),
    saving results through its own group-commit writer (``writer=False``: read-only use,
    no writer thread); both are closed on exit (the pipelines' runs and sensor)."""
    conn = open_database(path, synchronous)
    group = GroupCommitWriter(path, synchronous) if writer else None
    try:
        yield SqliteScanStore(conn, group)
    finally:
        if group is not None:
            group.close()
        conn.close()
