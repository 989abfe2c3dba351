"""Records kept in the operational store, as immutable values."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime

from chains.environment import Environment

#: A position in a list ordered by (created_at, id): the last row of a page.
Keyset = tuple[datetime, str]


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


@dataclass(frozen=True, slots=True)
class WatchedAddress:
    """An address a tenant asked to have rescored on schedule."""

    id: str
    account_id: str
    environment: Environment
    chain: str
    address: str
    label: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class WatchedDescriptor:
    """A wallet a tenant asked to have rescored daily: its descriptor (canonical with its
    checksum, or a bare extended key), the gap limit of its scans, how many addresses the
    latest scan derived (what it counts against the watch cap), and that scan's summary
    (JSON text, None before the first)."""

    id: str
    account_id: str
    environment: Environment
    descriptor: str
    label: str | None
    gap_limit: int
    derived_addresses: int
    summary: str | None
    scanned_at: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ScanLease:
    """Who is scanning an address for a tenant now (``ScanStore.take_lease``), since when,
    and until when the lease holds if its holder never releases it."""

    key: str
    holder: str
    taken_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ScanResult:
    """The latest wallet-scan result of one address for one tenant.

    ``result`` is the spec's wallet-scan object as JSON text; ``data_as_of`` is when
    the chain data was observed, ``scanned_at`` when it was scored.
    """

    account_id: str
    environment: Environment
    chain: str
    address: str
    result: str
    risk_value: int
    risk_score: str
    scoring_version: str
    data_as_of: datetime
    scanned_at: datetime
    source: str  # "api" or "pipeline"


@dataclass(frozen=True, slots=True)
class KeyScanResult:
    """The latest key-scan result (``POST /v1/scan/key``) of one key for one tenant.

    ``subject`` names the key and the chains asked for; ``result`` is the answer as JSON
    text; ``data_as_of`` is when the oldest chain data in it was observed.
    """

    account_id: str
    environment: Environment
    subject: str
    result: str
    data_as_of: datetime
    scanned_at: datetime


class ManagedKeyState(enum.StrEnum):
    """Life of a managed (custody) key: active → pending_deletion (≥ 7 days,
    cancellable) → destroyed (material erased; final)."""

    ACTIVE = "active"
    PENDING_DELETION = "pending_deletion"
    DESTROYED = "destroyed"


@dataclass(frozen=True, slots=True)
class ManagedKey:
    """A key held in managed custody. ``key_ref`` is the custody backend's
    reference (the wrapped seed for the embedded backend), None once destroyed;
    it is left out of ``repr`` so logging a record shows nothing of it."""

    id: str
    account_id: str
    environment: Environment
    algorithm: str
    chain: str
    public_key: bytes = field(repr=False)
    fingerprint: str
    backend: str
    wrapping_key: str
    key_ref: bytes | None = field(repr=False)
    state: ManagedKeyState
    created_at: datetime
    deletion_requested_at: datetime | None = None
    deletion_scheduled_at: datetime | None = None
    destroyed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ManagedKeyEvent:
    """One entry of a managed key's append-only audit log. ``hash`` chains the
    account's events: SHA-256 of the previous hash and this event's canonical form."""

    id: str
    key_id: str
    account_id: str
    environment: Environment
    type: str  # created | deletion_scheduled | deletion_cancelled | destroyed
    state: ManagedKeyState  # the state after the event
    actor: str  # "api_key:<id>" or "system:purge"
    request_id: str | None
    at: datetime
    details: str  # JSON text
    prev_hash: bytes = b""
    hash: bytes = b""


@dataclass(frozen=True, slots=True)
class ManagedKeyUsage:
    """Signing operations of one managed key in one calendar month (UTC)."""

    key_id: str
    algorithm: str
    state: ManagedKeyState
    signatures: int
