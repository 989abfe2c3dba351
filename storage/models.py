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


class KeyOrigin(enum.StrEnum):
    """How a post-quantum public key came to be registered."""

    GENERATED = "generated"  # by POST /v1/keys/generate (private key returned once, not kept)
    REGISTERED = "registered"  # brought by the client with proof of possession


@dataclass(frozen=True, slots=True)
class PqKey:
    """A post-quantum public key registered to an account and environment."""

    id: str
    account_id: str
    environment: Environment
    algorithm: str
    chain: str
    public_key: bytes
    fingerprint: str
    origin: KeyOrigin
    created_at: datetime


@dataclass(frozen=True, slots=True)
class AttestationChallenge:
    """A server-issued statement for strict-mode attestations, usable once."""

    id: str
    account_id: str
    environment: Environment
    statement: str
    statement_hash: bytes
    expires_at: datetime
    created_at: datetime
    used_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Attestation:
    """A stored hybrid attestation: both signatures verified before it was kept.

    The signatures are kept (they are public data) so the attestation can be
    re-verified later; their SHA-256 digests identify them.
    """

    id: str
    account_id: str
    environment: Environment
    pq_key_id: str
    message: bytes
    ecdsa_public_key: bytes  # the recovered signer, compressed
    ecdsa_claim: str  # what the client named: a public key (hex) or an address
    ecdsa_scheme: str
    ecdsa_signature: bytes
    ecdsa_signature_hash: bytes
    pqc_public_key: bytes
    algorithm: str
    context: bytes
    pqc_signature: bytes
    pqc_signature_hash: bytes
    chain: str
    metadata: str  # JSON text, echoed back
    challenge_id: str | None
    created_at: datetime
