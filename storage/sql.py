"""SQL both engines run, shared by every repository: the stored form of timestamps,
keyset pages and idempotent inserts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

from storage.database import Row, Tx


@overload
def ts(value: datetime) -> str: ...
@overload
def ts(value: None) -> None: ...
def ts(value: datetime | None) -> str | None:
    """A datetime as stored: ISO 8601 UTC with microseconds (None stays NULL). Every
    stored timestamp has this one fixed-width form, so text order is time order."""
    return None if value is None else value.astimezone(UTC).isoformat(timespec="microseconds")


@overload
def dt(value: str) -> datetime: ...
@overload
def dt(value: None) -> None: ...
def dt(value: str | None) -> datetime | None:
    """A stored timestamp back as an aware datetime (NULL stays None)."""
    return None if value is None else datetime.fromisoformat(value)


async def insert_or_get(
    tx: Tx, table: str, columns: str, values: Row, unique: tuple[str, ...], unique_values: Row
) -> Row:
    """Insert a row unless one with the same ``unique`` key exists, and return the stored
    row either way: idempotent adds (registering a key twice, watching an address twice).
    On PostgreSQL a concurrent insert of the same key is waited for, then read back."""
    await tx.execute(
        f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(values))})"
        f" ON CONFLICT ({', '.join(unique)}) DO NOTHING",
        values,
    )
    where = " AND ".join(f"{name} = ?" for name in unique)
    stored = await tx.fetch_one(f"SELECT {columns} FROM {table} WHERE {where}", unique_values)
    if stored is None:  # inserted now, or by the transaction it conflicted with: never
        raise RuntimeError(f"{table}: the row just inserted or found is missing")
    return stored


def page_clause(
    after: tuple[datetime, str] | None, limit: int | None, alias: str = ""
) -> tuple[str, tuple[object, ...]]:
    """The tail of a keyset-paged list query on ``(created_at, id)``: rows after the
    position ``after`` (exclusive), oldest first, at most ``limit`` of them (None: all).
    Appended to a ``WHERE`` clause; with an index ending in ``(created_at, id)`` each page
    is one index range, and rows added meanwhile never shift a page (no OFFSET). ``alias``:
    the table's alias in a join (``"d."``)."""
    sql = ""
    args: tuple[object, ...] = ()
    if after is not None:
        sql += f" AND ({alias}created_at, {alias}id) > (?, ?)"
        args = (ts(after[0]), after[1])
    sql += f" ORDER BY {alias}created_at, {alias}id"
    if limit is not None:
        sql += " LIMIT ?"
        args += (limit,)
    return sql, args


def watch_lock(account_id: str) -> str:
    """The ``Tx.lock`` key of an account's watch cap, which watched addresses and watched
    wallets share: every transaction that checks the cap and adds takes it first."""
    return f"watch:{account_id}"
