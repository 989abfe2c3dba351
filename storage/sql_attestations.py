"""``AttestationStore`` on either engine: registered PQ keys, challenges, attestations."""

from __future__ import annotations

from datetime import datetime

from chains.environment import Environment
from storage.database import Database, Row, Tx
from storage.models import Attestation, AttestationChallenge, KeyOrigin, Keyset, PqKey
from storage.row_cache import RowCache
from storage.sql import dt, insert_or_get, page_clause, ts

_PQ_COLUMNS = "id, account_id, environment, algorithm, chain, public_key, fingerprint, origin, created_at"
_CHALLENGE_COLUMNS = "id, account_id, environment, statement, statement_hash, expires_at, created_at, used_at"
_ATTESTATION_COLUMNS = (
    "id, account_id, environment, pq_key_id, message, ecdsa_public_key, ecdsa_claim, ecdsa_scheme,"
    " ecdsa_signature, ecdsa_signature_hash, pqc_public_key, algorithm, context, pqc_signature,"
    " pqc_signature_hash, chain, metadata, challenge_id, created_at"
)


def _pq_key(row: Row) -> PqKey:
    return PqKey(row[0], row[1], Environment(row[2]), row[3], row[4], row[5], row[6], KeyOrigin(row[7]), dt(row[8]))


def _challenge(row: Row) -> AttestationChallenge:
    return AttestationChallenge(
        row[0],
        row[1],
        Environment(row[2]),
        row[3],
        row[4],
        dt(row[5]),
        dt(row[6]),
        dt(row[7]),
    )


def _attestation(row: Row) -> Attestation:
    values = list(row)
    values[2] = Environment(values[2])
    values[18] = dt(values[18])
    return Attestation(*values)


class SqlAttestationStore:
    """Attestation state on an operational database (on SQLite every write goes through
    the group-commit writer: attestations are the hot path).

    Registered keys are looked up on every attestation. Their rows are never
    updated or deleted, so a key once found is remembered (a bounded cache) and
    later attestations with it cost no SQL read.
    """

    _KEY_CACHE_SIZE = 10_000

    def __init__(self, db: Database) -> None:
        self._db = db
        self._keys: RowCache[tuple[str, Environment, str, str], PqKey] = RowCache(self._KEY_CACHE_SIZE)

    async def add_pq_key(self, key: PqKey) -> PqKey:
        """Register a public key; when the account already has it in this
        environment, return the existing record instead (idempotent)."""
        return await self._db.write(lambda tx: insert_pq_key(tx, key))

    async def pq_key_by_fingerprint(
        self, account_id: str, environment: Environment, algorithm: str, fingerprint: str
    ) -> PqKey | None:
        """The account's registered key with this algorithm and fingerprint."""
        lookup = (account_id, environment, algorithm, fingerprint)
        found = self._keys.get(lookup)
        if found is not None:
            return found
        row = await self._db.fetch_one(
            f"SELECT {_PQ_COLUMNS} FROM pq_keys WHERE account_id = ? AND environment = ? AND algorithm = ?"
            " AND fingerprint = ?",
            (account_id, environment.value, algorithm, fingerprint),
        )
        return None if row is None else self._keys.remember(lookup, _pq_key(row))

    async def list_pq_keys(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[PqKey]:
        """The account's registered keys in one environment, oldest first: those after
        the (created_at, id) position ``after``, at most ``limit`` (None: all)."""
        tail, args = page_clause(after, limit)
        rows = await self._db.fetch_all(
            f"SELECT {_PQ_COLUMNS} FROM pq_keys WHERE account_id = ? AND environment = ?{tail}",
            (account_id, environment.value, *args),
        )
        return [_pq_key(r) for r in rows]

    async def add_challenge(self, challenge: AttestationChallenge) -> None:
        """Store a newly issued challenge (durable when this returns)."""
        await self._db.write(lambda tx: _insert_challenge(tx, challenge))

    async def challenge_by_statement(
        self, account_id: str, environment: Environment, statement_hash: bytes
    ) -> AttestationChallenge | None:
        """The account's challenge whose statement has this SHA-256."""
        row = await self._db.fetch_one(
            f"SELECT {_CHALLENGE_COLUMNS} FROM attestation_challenges WHERE statement_hash = ? AND account_id = ?"
            " AND environment = ?",
            (statement_hash, account_id, environment.value),
        )
        return None if row is None else _challenge(row)

    async def add_attestation(self, attestation: Attestation, now: datetime) -> bool:
        """Store an attestation; when it names a challenge, consume that challenge in
        the same transaction. False (nothing stored) when the challenge is already
        used or expired. Returns once the commit is durable."""
        return await self._db.write(lambda tx: _insert_attestation(tx, attestation, now))

    async def get_attestation(
        self, account_id: str, environment: Environment, attestation_id: str
    ) -> Attestation | None:
        """One of the account's attestations in this environment."""
        row = await self._db.fetch_one(
            f"SELECT {_ATTESTATION_COLUMNS} FROM attestations WHERE id = ? AND account_id = ? AND environment = ?",
            (attestation_id, account_id, environment.value),
        )
        return None if row is None else _attestation(row)

    async def list_attestations(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[Attestation]:
        """The account's attestations in one environment, oldest first: those after the
        (created_at, id) position ``after``, at most ``limit`` (None: all)."""
        tail, args = page_clause(after, limit)
        rows = await self._db.fetch_all(
            f"SELECT {_ATTESTATION_COLUMNS} FROM attestations WHERE account_id = ? AND environment = ?{tail}",
            (account_id, environment.value, *args),
        )
        return [_attestation(r) for r in rows]


async def insert_pq_key(tx: Tx, key: PqKey) -> PqKey:
    """Add a registered post-quantum key unless the account already has it in that
    environment (same algorithm and fingerprint); the stored row either way. The one
    writer of ``pq_keys``: generated, registered and managed keys all come through here."""
    row = await insert_or_get(
        tx,
        "pq_keys",
        _PQ_COLUMNS,
        (
            key.id,
            key.account_id,
            key.environment.value,
            key.algorithm,
            key.chain,
            key.public_key,
            key.fingerprint,
            key.origin.value,
            ts(key.created_at),
        ),
        ("account_id", "environment", "algorithm", "fingerprint"),
        (key.account_id, key.environment.value, key.algorithm, key.fingerprint),
    )
    return _pq_key(row)


async def _insert_challenge(tx: Tx, challenge: AttestationChallenge) -> None:
    await tx.execute(
        f"INSERT INTO attestation_challenges ({_CHALLENGE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)",
        (
            challenge.id,
            challenge.account_id,
            challenge.environment.value,
            challenge.statement,
            challenge.statement_hash,
            ts(challenge.expires_at),
            ts(challenge.created_at),
            ts(challenge.used_at),
        ),
    )


async def _insert_attestation(tx: Tx, a: Attestation, now: datetime) -> bool:
    if a.challenge_id is not None:
        consumed = await tx.execute(
            "UPDATE attestation_challenges SET used_at = ? WHERE id = ? AND used_at IS NULL AND expires_at > ?",
            (ts(now), a.challenge_id, ts(now)),
        )
        if consumed != 1:
            return False
    await tx.execute(
        f"INSERT INTO attestations ({_ATTESTATION_COLUMNS}) VALUES ({', '.join('?' * 19)})",
        (
            a.id,
            a.account_id,
            a.environment.value,
            a.pq_key_id,
            a.message,
            a.ecdsa_public_key,
            a.ecdsa_claim,
            a.ecdsa_scheme,
            a.ecdsa_signature,
            a.ecdsa_signature_hash,
            a.pqc_public_key,
            a.algorithm,
            a.context,
            a.pqc_signature,
            a.pqc_signature_hash,
            a.chain,
            a.metadata,
            a.challenge_id,
            ts(a.created_at),
        ),
    )
    return True
