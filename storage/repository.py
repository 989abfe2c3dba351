"""The operational store's interface, so that PostgreSQL can replace SQLite.

Every method is a single short transaction; callers never see SQL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from storage.models import Account, ApiKey, Attestation, AttestationChallenge, Environment, Plan, PqKey


class Store(Protocol):
    """Operational state of accounts and API keys."""

    def create_account(self, account: Account, password_hash: str) -> None:
        """Insert a new account; raises ``DuplicateEmail`` if the email is taken."""

    def account_by_email(self, email: str) -> tuple[Account, str] | None:
        """The account with this (normalised) email and its password hash."""

    def account_by_id(self, account_id: str) -> Account | None:
        """The account with this id."""

    def set_plan(self, email: str, plan: Plan) -> Account:
        """Change an account's plan; raises ``AccountNotFound``."""

    def create_api_key(self, key: ApiKey) -> None:
        """Insert a new API key record."""

    def api_key_by_hash(self, key_hash: bytes) -> tuple[ApiKey, Account] | None:
        """The key whose keyed hash matches, with its owner (deleted keys included)."""

    def get_api_key(self, account_id: str, key_id: str) -> ApiKey | None:
        """One of the account's keys by id (None for another account's key)."""

    def list_api_keys(self, account_id: str, environment: Environment | None) -> list[ApiKey]:
        """The account's keys that are not deleted, oldest first."""

    def delete_api_key(self, account_id: str, key_id: str, at: datetime) -> bool:
        """Mark the key deleted at ``at``; False when it is not the account's live key."""

    def rotate_api_key(self, account_id: str, old_id: str, new: ApiKey, old_expires_at: datetime) -> bool:
        """Insert ``new`` and let the old key expire at ``old_expires_at``, atomically.

        False when the old key is not the account's, is deleted, or was rotated already.
        """

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        """Record that the key was used at ``at``."""

    def close(self) -> None:
        """Release the connection."""


class AttestationStore(Protocol):
    """Registered post-quantum keys, attestation challenges and attestations,
    always scoped by account and environment."""

    def add_pq_key(self, key: PqKey) -> PqKey:
        """Register a public key; when the account already has it in this
        environment, return the existing record instead (idempotent)."""

    def pq_key_by_fingerprint(self, account_id: str, environment: Environment, algorithm: str,
                              fingerprint: str) -> PqKey | None:
        """The account's registered key with this algorithm and fingerprint."""

    def list_pq_keys(self, account_id: str, environment: Environment) -> list[PqKey]:
        """The account's registered keys in one environment, oldest first."""

    def add_challenge(self, challenge: AttestationChallenge) -> None:
        """Store a newly issued challenge."""

    def challenge_by_statement(self, account_id: str, environment: Environment,
                               statement_hash: bytes) -> AttestationChallenge | None:
        """The account's challenge whose statement has this SHA-256."""

    async def add_attestation(self, attestation: Attestation, now: datetime) -> bool:
        """Store an attestation; when it names a challenge, consume that challenge in
        the same transaction. False (nothing stored) when the challenge is already
        used or expired. Returns only once the write is durable."""

    def get_attestation(self, account_id: str, environment: Environment, attestation_id: str) -> Attestation | None:
        """One of the account's attestations in this environment."""
