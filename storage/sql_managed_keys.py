"""``ManagedKeyStore`` on either engine: managed keys, their audit log, monthly usage.

* Key creation is one transaction (key row + ``created`` event + public-key
  registration), so a crash leaves either all of it or nothing.
* The audit log is append-only: no code path updates or deletes it, and
  triggers (migration 0003) abort any statement that tries. Each event's hash
  chains the account's previous one; appending takes the account's lock, so two
  nodes never chain two events to the same predecessor.
* Destruction sets ``key_ref`` to NULL. On SQLite every connection runs with
  ``PRAGMA secure_delete = ON``, so the freed bytes in the page are overwritten, and
  ``release_space`` checkpoints and truncates the WAL, which still holds older page
  images; on PostgreSQL ``release_space`` vacuums the table (``Database.reclaim``).
* The signature counter is the hot write: it goes through the group-commit
  writer and counts only if the key is still active when the batch commits
  (the service takes a count back when the signing it stood for fails).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

from chains.environment import Environment
from storage.database import Database, Row, Tx
from storage.models import Keyset, ManagedKey, ManagedKeyEvent, ManagedKeyState, ManagedKeyUsage, PqKey
from storage.sql import dt, page_clause, ts
from storage.sql_attestations import insert_pq_key

_KEY_COLUMNS = (
    "id, account_id, environment, algorithm, chain, public_key, fingerprint, backend, wrapping_key, key_ref, state,"
    " created_at, deletion_requested_at, deletion_scheduled_at, destroyed_at"
)
_EVENT_COLUMNS = "id, key_id, account_id, environment, type, state, actor, request_id, at, details, prev_hash, hash"
_GENESIS = bytes(32)


def _key(row: Row) -> ManagedKey:
    return ManagedKey(
        id=row[0],
        account_id=row[1],
        environment=Environment(row[2]),
        algorithm=row[3],
        chain=row[4],
        public_key=row[5],
        fingerprint=row[6],
        backend=row[7],
        wrapping_key=row[8],
        key_ref=row[9],
        state=ManagedKeyState(row[10]),
        created_at=dt(row[11]),
        deletion_requested_at=dt(row[12]),
        deletion_scheduled_at=dt(row[13]),
        destroyed_at=dt(row[14]),
    )


def _event(row: Row) -> ManagedKeyEvent:
    return ManagedKeyEvent(
        id=row[0],
        key_id=row[1],
        account_id=row[2],
        environment=Environment(row[3]),
        type=row[4],
        state=ManagedKeyState(row[5]),
        actor=row[6],
        request_id=row[7],
        at=dt(row[8]),
        details=row[9],
        prev_hash=row[10],
        hash=row[11],
    )


def event_hash(prev_hash: bytes, e: ManagedKeyEvent) -> bytes:
    """SHA-256 of the previous hash and the event's canonical JSON form."""
    canonical = json.dumps(
        [
            e.id,
            e.key_id,
            e.account_id,
            e.environment.value,
            e.type,
            e.state.value,
            e.actor,
            e.request_id,
            ts(e.at),
            e.details,
        ],
        separators=(",", ":"),
    )
    return hashlib.sha256(prev_hash + canonical.encode()).digest()


async def _append_event(tx: Tx, e: ManagedKeyEvent) -> None:
    await tx.lock(f"managed_key_events:{e.account_id}")
    row = await tx.fetch_one(
        "SELECT hash FROM managed_key_events WHERE account_id = ? ORDER BY seq DESC LIMIT 1", (e.account_id,)
    )
    prev = bytes(row[0]) if row else _GENESIS
    await tx.execute(
        f"INSERT INTO managed_key_events ({_EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            e.id,
            e.key_id,
            e.account_id,
            e.environment.value,
            e.type,
            e.state.value,
            e.actor,
            e.request_id,
            ts(e.at),
            e.details,
            prev,
            event_hash(prev, e),
        ),
    )


async def _count(tx: Tx, key_id: str, month: str) -> bool:
    changed = await tx.execute(
        "INSERT INTO managed_key_usage (key_id, month, account_id, environment, signatures)"
        " SELECT id, ?, account_id, environment, 1 FROM managed_keys WHERE id = ? AND state = 'active'"
        " ON CONFLICT (key_id, month) DO UPDATE SET signatures = managed_key_usage.signatures + 1",
        (month, key_id),
    )
    return changed == 1


class SqlManagedKeyStore:
    """Managed keys on an operational database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, key: ManagedKey, event: ManagedKeyEvent, registration: PqKey | None) -> None:
        """Insert the key, its ``created`` event and the public-key registration atomically."""

        async def insert(tx: Tx) -> None:
            await tx.execute(
                f"INSERT INTO managed_keys ({_KEY_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    key.id,
                    key.account_id,
                    key.environment.value,
                    key.algorithm,
                    key.chain,
                    key.public_key,
                    key.fingerprint,
                    key.backend,
                    key.wrapping_key,
                    key.key_ref,
                    key.state.value,
                    ts(key.created_at),
                    ts(key.deletion_requested_at),
                    ts(key.deletion_scheduled_at),
                    ts(key.destroyed_at),
                ),
            )
            await _append_event(tx, event)
            if registration is not None:
                await insert_pq_key(tx, registration)

        await self._db.write(insert)

    async def get(self, account_id: str, environment: Environment, key_id: str) -> ManagedKey | None:
        """One of the account's managed keys in this environment."""
        row = await self._db.fetch_one(
            f"SELECT {_KEY_COLUMNS} FROM managed_keys WHERE id = ? AND account_id = ? AND environment = ?",
            (key_id, account_id, environment.value),
        )
        return None if row is None else _key(row)

    async def list_keys(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[ManagedKey]:
        """The account's managed keys in one environment, in every state, oldest first: those
        after the (created_at, id) position ``after``, at most ``limit`` (None: all)."""
        tail, args = page_clause(after, limit)
        rows = await self._db.fetch_all(
            f"SELECT {_KEY_COLUMNS} FROM managed_keys WHERE account_id = ? AND environment = ?{tail}",
            (account_id, environment.value, *args),
        )
        return [_key(r) for r in rows]

    async def _transition(self, sql: str, args: tuple[object, ...], event: ManagedKeyEvent) -> ManagedKey | None:
        async def transition(tx: Tx) -> ManagedKey | None:
            row = await tx.fetch_one(sql + f" RETURNING {_KEY_COLUMNS}", args)
            if row is None:
                return None
            await _append_event(tx, event)
            return _key(row)

        return await self._db.write(transition)

    async def schedule_deletion(
        self,
        account_id: str,
        environment: Environment,
        key_id: str,
        requested_at: datetime,
        scheduled_at: datetime,
        event: ManagedKeyEvent,
    ) -> ManagedKey | None:
        """active → pending_deletion with its event; None when the key is not active."""
        return await self._transition(
            "UPDATE managed_keys SET state = 'pending_deletion', deletion_requested_at = ?, deletion_scheduled_at = ?"
            " WHERE id = ? AND account_id = ? AND environment = ? AND state = 'active'",
            (ts(requested_at), ts(scheduled_at), key_id, account_id, environment.value),
            event,
        )

    async def cancel_deletion(
        self, account_id: str, environment: Environment, key_id: str, event: ManagedKeyEvent
    ) -> ManagedKey | None:
        """pending_deletion → active with its event; None when not pending deletion."""
        return await self._transition(
            "UPDATE managed_keys SET state = 'active', deletion_requested_at = NULL, deletion_scheduled_at = NULL"
            " WHERE id = ? AND account_id = ? AND environment = ? AND state = 'pending_deletion'",
            (key_id, account_id, environment.value),
            event,
        )

    async def due_for_destruction(self, now: datetime, limit: int) -> list[ManagedKey]:
        """Keys of every tenant whose deletion date has passed, earliest first."""
        rows = await self._db.fetch_all(
            f"SELECT {_KEY_COLUMNS} FROM managed_keys WHERE state = 'pending_deletion' AND deletion_scheduled_at <= ?"
            " ORDER BY deletion_scheduled_at LIMIT ?",
            (ts(now), limit),
        )
        return [_key(r) for r in rows]

    async def destroy(self, key_id: str, now: datetime, event: ManagedKeyEvent) -> bool:
        """Erase the key's material and mark it destroyed, with its event; False
        when it is not due (cancelled meanwhile, or destroyed by another process)."""

        async def erase(tx: Tx) -> bool:
            changed = await tx.execute(
                "UPDATE managed_keys SET state = 'destroyed', key_ref = NULL, destroyed_at = ?,"
                " deletion_scheduled_at = NULL WHERE id = ? AND state = 'pending_deletion'"
                " AND deletion_scheduled_at <= ?",
                (ts(now), key_id, ts(now)),
            )
            if changed != 1:
                return False
            await _append_event(tx, event)
            return True

        return await self._db.write(erase)

    async def events(
        self,
        account_id: str,
        environment: Environment,
        key_id: str,
        after_id: str | None = None,
        limit: int | None = None,
    ) -> list[ManagedKeyEvent]:
        """The key's audit log, oldest first (in the order the log was written): the
        events after the event ``after_id`` of this key (none when it is not one of
        them), at most ``limit`` (None: all)."""
        sql = f"SELECT {_EVENT_COLUMNS} FROM managed_key_events WHERE key_id = ? AND account_id = ? AND environment = ?"
        args: tuple[object, ...] = (key_id, account_id, environment.value)
        if after_id is not None:
            sql += " AND seq > (SELECT seq FROM managed_key_events WHERE id = ? AND key_id = ?)"
            args += (after_id, key_id)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        return [_event(r) for r in await self._db.fetch_all(sql, args)]

    async def verify_event_chain(self, account_id: str) -> bool:
        """True when every event of the account chains to the one before it."""
        prev = _GENESIS
        for row in await self._db.fetch_all(
            f"SELECT {_EVENT_COLUMNS} FROM managed_key_events WHERE account_id = ? ORDER BY seq", (account_id,)
        ):
            e = _event(row)
            if e.prev_hash != prev or e.hash != event_hash(prev, e):
                return False
            prev = e.hash
        return True

    async def count_signature(self, key_id: str, month: str) -> bool:
        """Count one signature, durably, only if the key is still active at commit."""
        return await self._db.write(lambda tx: _count(tx, key_id, month))

    async def uncount_signature(self, key_id: str, month: str) -> None:
        """Take back one counted signature that was never made (its signing failed)."""

        async def uncount(tx: Tx) -> None:
            await tx.execute(
                "UPDATE managed_key_usage SET signatures = signatures - 1 WHERE key_id = ? AND month = ?"
                " AND signatures > 0",
                (key_id, month),
            )

        await self._db.write(uncount)

    async def usage(
        self, account_id: str, environment: Environment, month: str, start: datetime, end: datetime
    ) -> list[ManagedKeyUsage]:
        """Keys that held material during [start, end) or signed in ``month``, with counts."""
        rows = await self._db.fetch_all(
            "SELECT k.id, k.algorithm, k.state, COALESCE(u.signatures, 0) FROM managed_keys k"
            " LEFT JOIN managed_key_usage u ON u.key_id = k.id AND u.month = ?"
            " WHERE k.account_id = ? AND k.environment = ?"
            " AND ((k.created_at < ? AND (k.destroyed_at IS NULL OR k.destroyed_at >= ?)) OR u.signatures > 0)"
            " ORDER BY k.created_at, k.id",
            (month, account_id, environment.value, ts(end), ts(start)),
        )
        return [ManagedKeyUsage(r[0], r[1], ManagedKeyState(r[2]), r[3]) for r in rows]

    async def release_space(self) -> None:
        """Give back the space erased key material held (``Database.reclaim``: SQLite's
        WAL checkpointed and truncated, PostgreSQL's table vacuumed); ``StoreUnavailable``
        when the engine refuses."""
        await self._db.reclaim("managed_keys")
