"""The embedded operational store: SQLite in WAL mode.

WAL lets the API workers, the admin CLI and the pipelines use one file at the
same time (one writer at a time, readers never blocked). A point lookup costs
tens of microseconds, so the API calls it directly on its event loop.
"""

from __future__ import annotations

import logging
import sqlite3
from datetime import datetime

from chains.environment import Environment
from core.text import email_form
from storage.beacon import ChangeBeacon, StampWatch, Topic
from storage.errors import AccountNotFound, DuplicateEmail
from storage.models import Account, ApiKey, Keyset, KeyType, Plan
from storage.row_cache import RowCache
from storage.sqlite_db import Row, dt, page_clause, ts, write_transaction
from storage.writers import DirectWriter, Writer

log = logging.getLogger(__name__)


def _account(row: Row) -> Account:
    return Account(id=row[0], email=row[1], name=row[2], plan=Plan(row[3]), created_at=dt(row[4]))


_KEY_COLUMNS = (
    "id, account_id, name, type, environment, key_hash, prefix, created_at,"
    " last_used_at, expires_at, deleted_at, replaced_by"
)


_KEY_BY_HASH_SQL = (
    f"SELECT {', '.join('k.' + c.strip() for c in _KEY_COLUMNS.split(','))},"
    " a.id, a.email, a.name, a.plan, a.created_at"
    " FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = ?"
)


def _api_key(row: Row) -> ApiKey:
    return ApiKey(
        id=row[0],
        account_id=row[1],
        name=row[2],
        type=KeyType(row[3]),
        environment=Environment(row[4]),
        key_hash=row[5],
        prefix=row[6],
        created_at=dt(row[7]),
        last_used_at=dt(row[8]),
        expires_at=dt(row[9]),
        deleted_at=dt(row[10]),
        replaced_by=row[11],
    )


#: The account's current keys at a time: not deleted, not replaced by a rotation (the
#: replacement counts instead), not expired. What the API-key cap counts.
_CURRENT_KEYS = (
    "SELECT COUNT(*) FROM api_keys WHERE account_id = ? AND deleted_at IS NULL AND replaced_by IS NULL"
    " AND (expires_at IS NULL OR expires_at > ?)"
)


def _touch(c: sqlite3.Connection, key_id: str, at: datetime) -> None:
    c.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", (ts(at), key_id))


class SqliteStore:
    """``Store`` (accounts and API keys) on a connection from ``open_database``.

    Credential lookups run on every request, so found keys are remembered, but
    only while the ``auth_generation`` counter stays the same: triggers bump it on
    every plan change and every key deletion, expiry or replacement, from any
    connection or process (migration 0005). That counter is read only when the
    store's change beacon says auth rows changed (every such method announces it
    after its commit, so another worker or the admin CLI is seen at once) or a
    second has passed (a change made with plain SQL).
    """

    _AUTH_CACHE_SIZE = 10_000

    def __init__(self, conn: sqlite3.Connection, writer: Writer | None = None) -> None:
        """``writer``: the API's group-commit writer, which account and key writes go
        through, so the event loop never waits for SQLite's write lock itself (another
        process may hold it up to the busy timeout); without one (tools, tests) they
        commit on ``conn`` (``DirectWriter``)."""
        self._conn = conn
        self._writer: Writer = writer or DirectWriter(conn)
        self._beacon = ChangeBeacon.beside(conn)
        self._auth_watch = StampWatch(self._beacon, Topic.AUTH)
        self._auth_cache: RowCache[bytes, tuple[ApiKey, Account]] = RowCache(self._AUTH_CACHE_SIZE)
        self._auth_cache_version = -1

    async def create_account(self, account: Account, password_hash: str) -> None:
        """Insert a new account; raises ``DuplicateEmail`` if the email is taken."""

        def insert(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO accounts (id, email, name, plan, password_hash, created_at) VALUES (?,?,?,?,?,?)",
                (account.id, account.email, account.name, account.plan.value, password_hash, ts(account.created_at)),
            )

        try:
            await self._writer.write(insert)
        except sqlite3.IntegrityError:
            raise DuplicateEmail("an account with this email already exists", field="email") from None

    def account_by_email(self, email: str) -> tuple[Account, str] | None:
        """The account with this email (compared in ``email_form``) and its password hash."""
        row = self._conn.execute(
            "SELECT id, email, name, plan, created_at, password_hash FROM accounts WHERE email = ?",
            (email_form(email),),
        ).fetchone()
        return None if row is None else (_account(row), row[5])

    def account_by_id(self, account_id: str) -> Account | None:
        """The account with this id."""
        row = self._conn.execute(
            "SELECT id, email, name, plan, created_at FROM accounts WHERE id = ?", (account_id,)
        ).fetchone()
        return None if row is None else _account(row)

    def set_plan(self, email: str, plan: Plan) -> Account:
        """Change the plan of the account with this email (compared in ``email_form``);
        raises ``AccountNotFound``."""
        with write_transaction(self._conn) as c:
            row = c.execute(
                "UPDATE accounts SET plan = ? WHERE email = ? RETURNING id, email, name, plan, created_at",
                (plan.value, email_form(email)),
            ).fetchone()
        if row is None:
            raise AccountNotFound(f"no account with email {email}", email=email)
        self._beacon.announce(Topic.AUTH)
        return _account(row)

    async def create_api_key(self, key: ApiKey, cap: int | None = None) -> bool:
        """Insert a new API key record; with ``cap``, only while the account has fewer
        than ``cap`` current keys (``_CURRENT_KEYS``: not deleted, not rotated out, not
        expired at ``key.created_at``), counted in the inserting transaction so that
        concurrent creations cannot overshoot. False (nothing stored) at the cap."""

        def insert(c: sqlite3.Connection) -> bool:
            if cap is not None:
                (count,) = c.execute(_CURRENT_KEYS, (key.account_id, ts(key.created_at))).fetchone()
                if count >= cap:
                    return False
            self._insert_key(c, key)
            return True

        return await self._writer.write(insert)

    @staticmethod
    def _insert_key(c: sqlite3.Connection, key: ApiKey) -> None:
        c.execute(
            f"INSERT INTO api_keys ({_KEY_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                key.id,
                key.account_id,
                key.name,
                key.type.value,
                key.environment.value,
                key.key_hash,
                key.prefix,
                ts(key.created_at),
                ts(key.last_used_at),
                ts(key.expires_at),
                ts(key.deleted_at),
                key.replaced_by,
            ),
        )

    def api_key_by_hash(self, key_hash: bytes) -> tuple[ApiKey, Account] | None:
        """The key whose keyed hash matches, with its owner (deleted keys included)."""
        if self._auth_watch.due():
            (version,) = self._conn.execute("SELECT value FROM auth_generation WHERE id = 1").fetchone()
            if version != self._auth_cache_version:
                self._auth_cache.clear()
                self._auth_cache_version = version
        cached = self._auth_cache.get(key_hash)
        if cached is not None:
            return cached
        row = self._conn.execute(_KEY_BY_HASH_SQL, (key_hash,)).fetchone()
        if row is None:
            return None  # unknown keys are not remembered: guessing must not fill memory
        return self._auth_cache.remember(key_hash, (_api_key(row[:12]), _account(row[12:])))

    def get_api_key(self, account_id: str, key_id: str) -> ApiKey | None:
        """One of the account's keys by id (None for another account's key)."""
        row = self._conn.execute(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = ? AND account_id = ?", (key_id, account_id)
        ).fetchone()
        return None if row is None else _api_key(row)

    def list_api_keys(
        self,
        account_id: str,
        environment: Environment | None,
        usable_at: datetime | None = None,
        after: Keyset | None = None,
        limit: int | None = None,
    ) -> list[ApiKey]:
        """The account's keys that are not deleted (nor, with ``usable_at``, expired by
        then), oldest first: those after the (created_at, id) position ``after``, at most
        ``limit`` (None: all)."""
        sql = f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE account_id = ? AND deleted_at IS NULL"
        args: tuple[object, ...] = (account_id,)
        if environment is not None:
            sql += " AND environment = ?"
            args += (environment.value,)
        if usable_at is not None:
            sql += " AND (expires_at IS NULL OR expires_at > ?)"
            args += (ts(usable_at),)
        tail, page_args = page_clause(after, limit)
        return [_api_key(r) for r in self._conn.execute(sql + tail, args + page_args)]

    async def delete_api_key(self, account_id: str, key_id: str, at: datetime) -> bool:
        """Mark the key deleted at ``at``; False when it is not the account's live key."""

        def delete(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "UPDATE api_keys SET deleted_at = ? WHERE id = ? AND account_id = ? AND deleted_at IS NULL",
                (ts(at), key_id, account_id),
            )
            return cur.rowcount == 1

        deleted = await self._writer.write(delete)
        self._beacon.announce(Topic.AUTH)
        return deleted

    async def rotate_api_key(self, account_id: str, old_id: str, new: ApiKey, old_expires_at: datetime) -> bool:
        """Insert ``new`` and let the old key expire at ``old_expires_at``, atomically."""

        def rotate(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "UPDATE api_keys SET expires_at = ?, replaced_by = ? WHERE id = ? AND account_id = ?"
                " AND deleted_at IS NULL AND replaced_by IS NULL",
                (ts(old_expires_at), new.id, old_id, account_id),
            )
            if cur.rowcount != 1:
                return False
            self._insert_key(c, new)
            return True

        if not await self._writer.write(rotate):
            return False
        self._beacon.announce(Topic.AUTH)
        return True

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        """Record that the key was used at ``at``, if the store can take the write.

        Best effort: this runs inside every authenticated request, reads included, and
        a last-used time is bookkeeping. It is submitted to the writer, which nobody
        waits for (the group-commit thread queues it, so another process holding the
        write lock, a pipeline publishing or an analyst's transaction, never stalls a
        request; a ``DirectWriter`` logs a failure). A full or read-only store must refuse
        the writes the caller asked for (SRV_002), not every read whose key is due a touch.
        """
        self._writer.submit(lambda c: _touch(c, key_id, at))

    def close(self) -> None:
        """Release the connection and the beacon."""
        self._conn.close()
        self._beacon.close()
