"""The operational store's interface, so that PostgreSQL can replace SQLite.

Every method is a single short transaction; callers never see SQL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from storage.models import Account, ApiKey, Environment, Plan


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
