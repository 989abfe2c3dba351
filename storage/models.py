"""Records kept in the operational store, as immutable values."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


class Plan(enum.StrEnum):
    """Subscription plans, as stored and reported in the ``plan`` field."""

    FREE = "free"
    BUILDER = "builder"
    PRO = "pro"
    ENTERPRISE = "enterprise"


class KeyType(enum.StrEnum):
    """API key types: publishable keys may only scan; secret keys may do everything."""

    PUBLISHABLE = "publishable"
    SECRET = "secret"


class Environment(enum.StrEnum):
    """Data environments; test and live resources never see each other."""

    TEST = "test"
    LIVE = "live"


@dataclass(frozen=True, slots=True)
class Account:
    """A user account (the password hash is kept apart from it)."""

    id: str
    email: str
    name: str | None
    plan: Plan
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored API key: only its keyed hash and a short display prefix are kept.

    ``expires_at`` is set when the key was rotated out (it stays valid until then);
    ``deleted_at`` when it was deleted (refused at once, with AUTH_002).
    """

    id: str
    account_id: str
    name: str
    type: KeyType
    environment: Environment
    key_hash: bytes
    prefix: str
    created_at: datetime
    last_used_at: datetime | None = None
    expires_at: datetime | None = None
    deleted_at: datetime | None = None
    replaced_by: str | None = None

    def is_usable(self, now: datetime) -> bool:
        """True when the key may authenticate a request at ``now``."""
        if self.deleted_at is not None:
            return False
        return self.expires_at is None or now < self.expires_at
