"""``Store`` (accounts and API keys) on either engine (``storage.database``)."""

from __future__ import annotations

import logging
from datetime import datetime

from chains.environment import Environment
from core.text import email_form
from storage.beacon import StampWatch
from storage.database import Database, Row, Topic, Tx
from storage.errors import AccountNotFound, ConstraintViolation, DuplicateEmail
from storage.models import Account, ApiKey, Keyset, KeyType, Plan
from storage.row_cache import RowCache
from storage.sql import dt, page_clause, ts

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


async def _touch(tx: Tx, key_id: str, at: datetime) -> None:
    await tx.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", (ts(at), key_id))


class SqlStore:
    """``Store`` (accounts and API keys) on an operational database.

    Credential lookups run on every request, so found keys are remembered, but
    only while the ``auth_generation`` counter stays the same: triggers bump it on
    every plan change and every key deletion, expiry or replacement, from any
    connection, process or node (migration 0005). That counter is read only when the
    database's change stamps say auth rows changed (every such method announces it
    with its commit, so another worker, node or the admin CLI is seen at once) or a
    second has passed (a change made with plain SQL, or a lost notification).
    """

    _AUTH_CACHE_SIZE = 10_000

    def __init__(self, db: Database) -> None:
        self._db = db
        self._auth_watch = StampWatch(db.changes, Topic.AUTH)
        self._auth_cache: RowCache[bytes, tuple[ApiKey, Account]] = RowCache(self._AUTH_CACHE_SIZE)
        self._auth_cache_version = -1
        # Only signed, unexpired session tokens are looked up, so guessing cannot fill it.
        self._sessions: RowCache[str, bool] = RowCache(self._AUTH_CACHE_SIZE)

    async def create_account(self, account: Account, password_hash: str) -> None:
        """Insert a new account; raises ``DuplicateEmail`` if the email is taken."""

        async def insert(tx: Tx) -> None:
            await tx.execute(
                "INSERT INTO accounts (id, email, name, plan, password_hash, created_at) VALUES (?,?,?,?,?,?)",
                (account.id, account.email, account.name, account.plan.value, password_hash, ts(account.created_at)),
            )

        try:
            await self._db.write(insert)
        except ConstraintViolation:
            raise DuplicateEmail("an account with this email already exists", field="email") from None

    async def account_by_email(self, email: str) -> tuple[Account, str] | None:
        """The account with this email (compared in ``email_form``) and its password hash."""
        row = await self._db.fetch_one(
            "SELECT id, email, name, plan, created_at, password_hash FROM accounts WHERE email = ?",
            (email_form(email),),
        )
        return None if row is None else (_account(row), row[5])

    async def account_by_id(self, account_id: str) -> Account | None:
        """The account with this id."""
        row = await self._db.fetch_one(
            "SELECT id, email, name, plan, created_at FROM accounts WHERE id = ?", (account_id,)
        )
        return None if row is None else _account(row)

    async def set_plan(self, email: str, plan: Plan) -> Account:
        """Change the plan of the account with this email (compared in ``email_form``);
        raises ``AccountNotFound``."""

        async def update(tx: Tx) -> Row | None:
            return await tx.fetch_one(
                "UPDATE accounts SET plan = ? WHERE email = ? RETURNING id, email, name, plan, created_at",
                (plan.value, email_form(email)),
            )

        row = await self._db.write(update, announce=Topic.AUTH)
        if row is None:
            raise AccountNotFound(f"no account with email {email}", email=email)
        return _account(row)

    async def create_api_key(self, key: ApiKey, cap: int | None = None) -> bool:
        """Insert a new API key record; with ``cap``, only while the account has fewer
        than ``cap`` current keys (``_CURRENT_KEYS``: not deleted, not rotated out, not
        expired at ``key.created_at``), counted in the inserting transaction so that
        concurrent creations cannot overshoot. False (nothing stored) at the cap."""

        async def insert(tx: Tx) -> bool:
            if cap is not None:
                await tx.lock(f"api_keys:{key.account_id}")
                row = await tx.fetch_one(_CURRENT_KEYS, (key.account_id, ts(key.created_at)))
                if row is not None and row[0] >= cap:
                    return False
            await self._insert_key(tx, key)
            return True

        return await self._db.write(insert)

    async def current_api_key_count(self, account_id: str, at: datetime) -> int:
        """How many current keys the account holds at ``at`` (both environments), counted
        as the API-key cap counts them (``_CURRENT_KEYS``)."""
        row = await self._db.fetch_one(_CURRENT_KEYS, (account_id, ts(at)))
        return 0 if row is None else int(row[0])

    @staticmethod
    async def _insert_key(tx: Tx, key: ApiKey) -> None:
        await tx.execute(
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

    async def api_key_by_hash(self, key_hash: bytes) -> tuple[ApiKey, Account] | None:
        """The key whose keyed hash matches, with its owner (deleted keys included)."""
        await self._check_auth_generation()
        cached = self._auth_cache.get(key_hash)
        if cached is not None:
            return cached
        row = await self._db.fetch_one(_KEY_BY_HASH_SQL, (key_hash,))
        if row is None:
            return None  # unknown keys are not remembered: guessing must not fill memory
        return self._auth_cache.remember(key_hash, (_api_key(row[:12]), _account(row[12:])))

    async def _check_auth_generation(self) -> None:
        """Forget remembered credentials when ``auth_generation`` moved (read only when the
        change stamps say so, or a second has passed)."""
        if self._auth_watch.due():
            generation = await self._db.fetch_one("SELECT value FROM auth_generation WHERE id = 1")
            version = -1 if generation is None else generation[0]
            if version != self._auth_cache_version:
                self._auth_cache.clear()
                self._sessions.clear()
                self._auth_cache_version = version

    async def get_api_key(self, account_id: str, key_id: str) -> ApiKey | None:
        """One of the account's keys by id (None for another account's key)."""
        row = await self._db.fetch_one(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = ? AND account_id = ?", (key_id, account_id)
        )
        return None if row is None else _api_key(row)

    async def list_api_keys(
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
        return [_api_key(r) for r in await self._db.fetch_all(sql + tail, args + page_args)]

    async def delete_api_key(self, account_id: str, key_id: str, at: datetime) -> bool:
        """Mark the key deleted at ``at``; False when it is not the account's live key."""

        async def delete(tx: Tx) -> bool:
            changed = await tx.execute(
                "UPDATE api_keys SET deleted_at = ? WHERE id = ? AND account_id = ? AND deleted_at IS NULL",
                (ts(at), key_id, account_id),
            )
            return changed == 1

        return await self._db.write(delete, announce=Topic.AUTH)

    async def rotate_api_key(self, account_id: str, old_id: str, new: ApiKey, old_expires_at: datetime) -> bool:
        """Insert ``new`` and let the old key expire at ``old_expires_at``, atomically."""

        async def rotate(tx: Tx) -> bool:
            changed = await tx.execute(
                "UPDATE api_keys SET expires_at = ?, replaced_by = ? WHERE id = ? AND account_id = ?"
                " AND deleted_at IS NULL AND replaced_by IS NULL",
                (ts(old_expires_at), new.id, old_id, account_id),
            )
            if changed != 1:
                return False
            await self._insert_key(tx, new)
            return True

        return await self._db.write(rotate, announce=Topic.AUTH)

    async def revoke_session(self, session_id: str, account_id: str, at: datetime, expires_at: datetime) -> None:
        """End a session before its expiry, for every worker and node (idempotent); rows of
        sessions that have expired by now are dropped in the same transaction."""

        async def revoke(tx: Tx) -> None:
            await tx.execute("DELETE FROM revoked_sessions WHERE expires_at <= ?", (ts(at),))
            await tx.execute(
                "INSERT INTO revoked_sessions (session_id, account_id, revoked_at, expires_at) VALUES (?,?,?,?)"
                " ON CONFLICT (session_id) DO NOTHING",
                (session_id, account_id, ts(at), ts(expires_at)),
            )

        await self._db.write(revoke, announce=Topic.AUTH)

    async def session_revoked(self, session_id: str) -> bool:
        """True when the session was ended early (``revoke_session``). Answers are remembered
        under the same ``auth_generation`` as found keys, which a revocation bumps."""
        await self._check_auth_generation()
        known = self._sessions.get(session_id)
        if known is not None:
            return known
        row = await self._db.fetch_one("SELECT 1 FROM revoked_sessions WHERE session_id = ?", (session_id,))
        return self._sessions.remember(session_id, row is not None)

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        """Record that the key was used at ``at``, if the store can take the write.

        Best effort: this runs inside every authenticated request, reads included, and
        a last-used time is bookkeeping. It is submitted, and nobody waits for it (on
        SQLite the group-commit thread queues it, so another process holding the write
        lock never stalls a request; on PostgreSQL it is a task of the loop). A full or
        read-only store must refuse the writes the caller asked for (SRV_002), not every
        read whose key is due a touch.
        """
        self._db.submit(lambda tx: _touch(tx, key_id, at))
