"""``DescriptorWatchStore`` on either engine: the wallets tenants watch (migration 0010).

A wallet counts against the account's watch cap by the addresses its latest scan
derived; triggers keep that in ``watch_counts`` beside the watched addresses, so adding
a wallet and rescoring one check the cap with one point lookup in their transaction.
"""

from __future__ import annotations

from datetime import datetime

from chains.environment import Environment
from storage.database import Database, Row, Tx
from storage.models import Keyset, Plan, WatchedDescriptor
from storage.sql import dt, page_clause, ts, watch_lock

_COLUMNS = (
    "id, account_id, environment, descriptor, label, gap_limit, derived_addresses, summary, scanned_at, created_at"
)


def _entry(row: Row) -> WatchedDescriptor:
    return WatchedDescriptor(
        row[0],
        row[1],
        Environment(row[2]),
        row[3],
        row[4],
        row[5],
        row[6],
        row[7],
        None if row[8] is None else dt(row[8]),
        dt(row[9]),
    )


async def _watched_count(tx: Tx, account_id: str) -> int:
    row = await tx.fetch_one("SELECT n FROM watch_counts WHERE account_id = ?", (account_id,))
    return 0 if row is None else int(row[0])


class SqlDescriptorWatchStore:
    """Watched wallets on an operational database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, entry: WatchedDescriptor, cap: int) -> WatchedDescriptor | None:
        """Store ``entry`` unless the account would then watch more than ``cap`` addresses
        (its watched addresses plus every watched wallet's derived addresses): None. A
        wallet already watched is returned as stored and never counts again."""

        async def add(tx: Tx) -> WatchedDescriptor | None:
            await tx.lock(watch_lock(entry.account_id))
            existing = await tx.fetch_one(
                f"SELECT {_COLUMNS} FROM watched_descriptors WHERE account_id = ? AND environment = ?"
                " AND descriptor = ?",
                (entry.account_id, entry.environment.value, entry.descriptor),
            )
            if existing is not None:
                return _entry(existing)
            if await _watched_count(tx, entry.account_id) + entry.derived_addresses > cap:
                return None
            await tx.execute(
                f"INSERT INTO watched_descriptors ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.id,
                    entry.account_id,
                    entry.environment.value,
                    entry.descriptor,
                    entry.label,
                    entry.gap_limit,
                    entry.derived_addresses,
                    entry.summary,
                    None if entry.scanned_at is None else ts(entry.scanned_at),
                    ts(entry.created_at),
                ),
            )
            return entry

        return await self._db.write(add)

    async def remove(self, account_id: str, environment: Environment, entry_id: str) -> bool:
        """Stop watching a wallet; False when the entry is not the account's."""

        async def delete(tx: Tx) -> bool:
            changed = await tx.execute(
                "DELETE FROM watched_descriptors WHERE id = ? AND account_id = ? AND environment = ?",
                (entry_id, account_id, environment.value),
            )
            return changed == 1

        return await self._db.write(delete)

    async def page(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[WatchedDescriptor]:
        """The account's watched wallets in one environment, oldest first, after the
        (created_at, id) position ``after``, at most ``limit``."""
        tail, args = page_clause(after, limit)
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM watched_descriptors WHERE account_id = ? AND environment = ?{tail}",
            (account_id, environment.value, *args),
        )
        return [_entry(r) for r in rows]

    async def find(self, account_id: str, environment: Environment, descriptor: str) -> WatchedDescriptor | None:
        """The account's watched wallet ``descriptor`` in one environment, if watched."""
        row = await self._db.fetch_one(
            f"SELECT {_COLUMNS} FROM watched_descriptors WHERE account_id = ? AND environment = ? AND descriptor = ?",
            (account_id, environment.value, descriptor),
        )
        return None if row is None else _entry(row)

    async def everyone(self) -> list[tuple[WatchedDescriptor, Plan]]:
        """Every tenant's watched wallets with their account's plan (the daily rescoring's
        list, and the cap each rescan stays within), oldest first."""
        columns = ", ".join(f"w.{name.strip()}" for name in _COLUMNS.split(","))
        rows = await self._db.fetch_all(
            f"SELECT {columns}, a.plan FROM watched_descriptors w JOIN accounts a ON a.id = w.account_id"
            " ORDER BY w.created_at, w.id"
        )
        return [(_entry(r), Plan(r[-1])) for r in rows]

    async def count_besides(self, entry: WatchedDescriptor) -> int:
        """What the account of ``entry`` watches besides it: its watched addresses and the
        other wallets' derived addresses (a rescan of ``entry`` may derive up to the cap
        less this)."""
        row = await self._db.fetch_one(
            "SELECT n - coalesce((SELECT derived_addresses FROM watched_descriptors WHERE id = ?), 0)"
            " FROM watch_counts WHERE account_id = ?",
            (entry.id, entry.account_id),
        )
        return 0 if row is None else int(row[0])

    async def rescanned(self, entry_id: str, derived_addresses: int, summary: str, scanned_at: datetime) -> bool:
        """Record a rescan's derived-address count and summary; False when the wallet is no
        longer watched (removed meanwhile)."""

        async def update(tx: Tx) -> bool:
            changed = await tx.execute(
                "UPDATE watched_descriptors SET derived_addresses = ?, summary = ?, scanned_at = ? WHERE id = ?",
                (derived_addresses, summary, ts(scanned_at), entry_id),
            )
            return changed == 1

        return await self._db.write(update)
