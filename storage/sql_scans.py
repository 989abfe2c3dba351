"""``ScanStore`` on either engine: watch lists and the latest scan result per tenant."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import datetime, timedelta
from typing import Final

from chains.environment import Environment
from storage.beacon import StampWatch
from storage.database import Database, Row, Topic, Tx
from storage.models import KeyScanResult, Keyset, ScanLease, ScanResult, WatchedAddress
from storage.row_cache import RowCache
from storage.sql import dt, insert_or_get, page_clause, ts, watch_lock
from storage.sql_descriptor_watch import SqlDescriptorWatchStore
from storage.sql_webhooks import add_event
from storage.webhook_records import EventType, ResultAlerts

_WATCH_COLUMNS = "id, account_id, environment, chain, address, label, created_at"
WATCH_EXPORT_COLUMNS: Final = ("watch_id", "account_id", "environment", "chain", "address", "label", "created_at")
"""What each row of ``SqlScanStore.export_watchlist`` holds, in order (all text;
``created_at`` as stored, ISO 8601 UTC; ``label`` may be null)."""
#: The export's order is byte order, as the pipelines merge it with Polars' sorted frames:
#: SQLite compares text that way; PostgreSQL is told to, whatever the database's collation.
_WATCH_EXPORT_SQL = {
    "sqlite": f"SELECT {_WATCH_COLUMNS} FROM watchlist WHERE chain = ? ORDER BY environment, address, account_id",
    "postgresql": f"SELECT {_WATCH_COLUMNS} FROM watchlist WHERE chain = ?"
    ' ORDER BY environment COLLATE "C", address COLLATE "C", account_id COLLATE "C"',
}
#: One tenant's watch-list entry of an address (the unique key: one index read).
_WATCHED_ENTRY_SQL = (
    f"SELECT {_WATCH_COLUMNS} FROM watchlist WHERE account_id = ? AND environment = ? AND chain = ? AND address = ?"
)
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


async def _insert_watched(tx: Tx, entry: WatchedAddress) -> WatchedAddress:
    row = await insert_or_get(
        tx,
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


async def _insert_watched_within(tx: Tx, entry: WatchedAddress, cap: int | None) -> WatchedAddress | None:
    if cap is not None:
        await tx.lock(watch_lock(entry.account_id))
        existing = await tx.fetch_one(
            _WATCHED_ENTRY_SQL, (entry.account_id, entry.environment.value, entry.chain, entry.address)
        )
        if existing is not None:
            return _watched(existing)
        row = await tx.fetch_one("SELECT n FROM watch_counts WHERE account_id = ?", (entry.account_id,))
        if row is not None and row[0] >= cap:
            return None
    return await _insert_watched(tx, entry)


class SqlScanStore:
    """Watch lists and scan results on an operational database.

    Cached scans read the latest result on every request, so results read are
    remembered until the change stamps say results changed (``save_results``
    announces it with its commit, from any process or node) or a second has passed.
    """

    _RESULT_CACHE_SIZE = 4096

    def __init__(self, db: Database) -> None:
        self._db = db
        self._results_watch = StampWatch(db.changes, Topic.SCANS)
        self._lease_calls = 0
        self._results: RowCache[tuple[str, Environment, str, str], ScanResult] = RowCache(self._RESULT_CACHE_SIZE)

    async def watch(self, entry: WatchedAddress, cap: int | None = None) -> WatchedAddress | None:
        """Add an address to a watch list; the existing entry when already watched.

        With ``cap``: None (nothing stored) when the address is new and the account
        already watches ``cap`` addresses (both environments). The count is read in the
        adding transaction, under the write lock, so concurrent adds cannot overshoot;
        an address already watched is returned whatever the count."""
        return await self._db.write(lambda tx: _insert_watched_within(tx, entry, cap))

    def descriptor_watch(self) -> SqlDescriptorWatchStore:
        """The watched wallets, on this store's database."""
        return SqlDescriptorWatchStore(self._db)

    async def unwatch(self, account_id: str, environment: Environment, entry_id: str) -> bool:
        """Remove an entry; False when it is not the account's."""

        async def delete(tx: Tx) -> bool:
            changed = await tx.execute(
                "DELETE FROM watchlist WHERE id = ? AND account_id = ? AND environment = ?",
                (entry_id, account_id, environment.value),
            )
            return changed == 1

        return await self._db.write(delete)

    async def watchlist(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[WatchedAddress]:
        """The account's watched addresses in one environment, oldest first: those after
        the (created_at, id) position ``after``, at most ``limit`` (None: all)."""
        tail, args = page_clause(after, limit)
        rows = await self._db.fetch_all(
            f"SELECT {_WATCH_COLUMNS} FROM watchlist WHERE account_id = ? AND environment = ?{tail}",
            (account_id, environment.value, *args),
        )
        return [_watched(r) for r in rows]

    async def watched_entry(
        self, account_id: str, environment: Environment, chain: str, address: str
    ) -> WatchedAddress | None:
        """The tenant's watch-list entry of the address in the environment (None: not watched there)."""
        row = await self._db.fetch_one(_WATCHED_ENTRY_SQL, (account_id, environment.value, chain, address))
        return None if row is None else _watched(row)

    async def watch_count(self, account_id: str) -> int:
        """How many addresses the account watches (both environments)."""
        row = await self._db.fetch_one("SELECT n FROM watch_counts WHERE account_id = ?", (account_id,))
        return 0 if row is None else int(row[0])

    async def all_watched(self, created_after: datetime | None = None) -> list[WatchedAddress]:
        """Every watched address of every tenant, optionally only newer ones."""
        sql = f"SELECT {_WATCH_COLUMNS} FROM watchlist"
        args: tuple[object, ...] = ()
        if created_after is not None:
            sql += " WHERE created_at > ?"
            args = (ts(created_after),)
        return [_watched(r) for r in await self._db.fetch_all(sql + " ORDER BY created_at, id", args)]

    def export_watchlist(self, chain: str, chunk: int = 10_000) -> AsyncGenerator[list[Row], None]:
        """Every tenant's entries on ``chain`` (both environments), ordered by (environment,
        address, account), as raw rows (``WATCH_EXPORT_COLUMNS``) ``chunk`` at a time.

        One read statement (one index range, no sort), so the export is a consistent
        snapshot of the watch list however long the caller takes (``Database.stream``)."""
        return self._db.stream(_WATCH_EXPORT_SQL[self._db.dialect], (chain,), chunk)

    async def latest_result(
        self, account_id: str, environment: Environment, chain: str, address: str
    ) -> ScanResult | None:
        """The latest stored result for one address, if any."""
        if self._results_watch.due():
            self._results.clear()
        key = (account_id, environment, chain, address)
        cached = self._results.get(key)
        if cached is not None:
            return cached
        row = await self._db.fetch_one(
            f"SELECT {_RESULT_COLUMNS} FROM scan_results WHERE account_id = ? AND environment = ? AND chain = ?"
            " AND address = ?",
            (account_id, environment.value, chain, address),
        )
        return None if row is None else self._results.remember(key, _result(row))

    async def save_results(self, results: list[ScanResult], alerts: ResultAlerts | None = None) -> int:
        """Insert results, replacing stored ones that are not newer (durable when
        this returns); how many were written: a stored result of newer chain data (a
        data_as_of later than the new one's) is kept and not counted. ``alerts``: the events
        each written result raises against the one it replaces, put in the webhook outbox
        in the same transaction (a key the follower saw exposed is marked so there too)."""
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
        if alerts is None:
            return await self._db.write(lambda tx: tx.execute_many(sql, rows), announce=Topic.SCANS)

        async def save_and_alert(tx: Tx) -> int:
            keys = [row[:4] for row in rows]
            before = await _stored(tx, "scan_results", "result, data_as_of", keys)
            seen = await _stored(tx, "alert_state", "exposed", keys)
            written = await tx.execute_many(sql, rows)
            for key, record in zip(keys, results, strict=True):
                old = before.get(key)
                if old is not None and old[1] > ts(record.data_as_of):
                    continue  # newer chain data is stored: this result was not written
                exposed = seen.get(key)
                events = alerts(None if old is None else old[0], None if exposed is None else bool(exposed[0]), record)
                for event in events:
                    await add_event(tx, event)
                if exposed is not None and any(e.type is EventType.KEY_EXPOSED for e in events):
                    await tx.execute(
                        "UPDATE alert_state SET exposed = 1 WHERE account_id = ? AND environment = ? AND chain = ?"
                        " AND address = ?",
                        key,
                    )
            return written

        return await self._db.write(save_and_alert, announce=Topic.SCANS)

    async def take_lease(self, key: str, holder: str, now: datetime, ttl: timedelta) -> ScanLease | None:
        """Take the scan lease ``key`` for ``holder`` unless another holder's has not expired
        (its own is renewed): None when taken now, else the lease that holds it. Leases of
        everybody that expired before ``now`` are pruned every thousand calls."""
        self._lease_calls += 1
        prune = self._lease_calls % 1000 == 0

        async def take(tx: Tx) -> Row | None:
            if prune:
                await tx.execute("DELETE FROM scan_leases WHERE expires_at <= ?", (ts(now),))
            await tx.execute(
                "INSERT INTO scan_leases (key, holder, taken_at, expires_at) VALUES (?,?,?,?)"
                " ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, taken_at = excluded.taken_at,"
                " expires_at = excluded.expires_at"
                " WHERE scan_leases.expires_at <= excluded.taken_at OR scan_leases.holder = excluded.holder",
                (key, holder, ts(now), ts(now + ttl)),
            )
            return await tx.fetch_one("SELECT key, holder, taken_at, expires_at FROM scan_leases WHERE key = ?", (key,))

        row = await self._db.write(take)
        if row is None or row[1] == holder:
            return None
        return ScanLease(row[0], row[1], dt(row[2]), dt(row[3]))

    async def lease(self, key: str) -> ScanLease | None:
        """The lease ``key`` as stored now (expired or not), if any."""
        row = await self._db.fetch_one(
            "SELECT key, holder, taken_at, expires_at FROM scan_leases WHERE key = ?", (key,)
        )
        return None if row is None else ScanLease(row[0], row[1], dt(row[2]), dt(row[3]))

    async def release_lease(self, key: str, holder: str) -> None:
        """Give the lease ``key`` back (nothing when another holder has it now)."""
        await self._db.write(
            lambda tx: tx.execute("DELETE FROM scan_leases WHERE key = ? AND holder = ?", (key, holder))
        )

    async def latest_key_result(self, account_id: str, environment: Environment, subject: str) -> KeyScanResult | None:
        """The latest stored key-scan result for one subject (key and chains), if any."""
        row = await self._db.fetch_one(
            "SELECT result, data_as_of, scanned_at FROM key_scan_results"
            " WHERE account_id = ? AND environment = ? AND subject = ?",
            (account_id, environment.value, subject),
        )
        if row is None:
            return None
        return KeyScanResult(account_id, environment, subject, row[0], dt(row[1]), dt(row[2]))

    async def key_results(
        self, account_id: str, environment: Environment, subjects: tuple[str, str], after: str | None, limit: int
    ) -> list[KeyScanResult]:
        """Stored key-scan results whose subject is in ``[low, high)`` (``subjects``), in
        subject order after the subject ``after``, at most ``limit`` (one range of the key)."""
        low, high = subjects
        rows = await self._db.fetch_all(
            "SELECT subject, result, data_as_of, scanned_at FROM key_scan_results"
            " WHERE account_id = ? AND environment = ? AND subject >= ? AND subject < ? AND subject > ?"
            " ORDER BY subject LIMIT ?",
            (account_id, environment.value, low, high, after or "", limit),
        )
        return [KeyScanResult(account_id, environment, r[0], r[1], dt(r[2]), dt(r[3])) for r in rows]

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
        await self._db.write(lambda tx: tx.execute(sql, row))


#: Keys per lookup of ``_stored`` (4 parameters each; SQLite allows 32,766 a statement).
_KEYS_PER_LOOKUP = 2000


async def _stored(tx: Tx, table: str, columns: str, keys: list[Row]) -> dict[Row, Row]:
    """The ``columns`` of ``table``'s rows with these (account, environment, chain, address)
    keys, by key, read in the transaction."""
    found: dict[Row, Row] = {}
    for start in range(0, len(keys), _KEYS_PER_LOOKUP):
        part = keys[start : start + _KEYS_PER_LOOKUP]
        values = ", ".join("(?, ?, ?, ?)" for _ in part)
        rows = await tx.fetch_all(
            f"SELECT account_id, environment, chain, address, {columns} FROM {table}"
            f" WHERE (account_id, environment, chain, address) IN (VALUES {values})",
            [v for key in part for v in key],
        )
        found.update({tuple(r[:4]): tuple(r[4:]) for r in rows})
    return found
