"""The operational store's interfaces, implemented once for both engines by the
``storage/sql_*.py`` repositories over ``storage.database.Database`` (SQLite by default,
PostgreSQL with ``QDAY_DATABASE_URL``).

Every method is a single short transaction or read; callers never see SQL.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import datetime, timedelta
from typing import Protocol

from chains.environment import Environment
from storage.database import Row
from storage.models import (
    Account,
    ApiKey,
    Attestation,
    AttestationChallenge,
    KeyScanResult,
    Keyset,
    ManagedKey,
    ManagedKeyEvent,
    ManagedKeyUsage,
    Plan,
    PqKey,
    ScanLease,
    ScanResult,
    WatchedAddress,
    WatchedDescriptor,
)
from storage.webhook_records import ResultAlerts


class Store(Protocol):
    """Operational state of accounts and API keys."""

    async def create_account(self, account: Account, password_hash: str) -> None:
        """Insert a new account; raises ``DuplicateEmail`` if the email is taken."""

    async def account_by_email(self, email: str) -> tuple[Account, str] | None:
        """The account with this (normalised) email and its password hash."""

    async def account_by_id(self, account_id: str) -> Account | None:
        """The account with this id."""

    async def set_plan(self, email: str, plan: Plan) -> Account:
        """Change an account's plan; raises ``AccountNotFound``."""

    async def create_api_key(self, key: ApiKey, cap: int | None = None) -> bool:
        """Insert a new API key record; with ``cap``, only while the account has fewer than
        ``cap`` current keys (not deleted, rotated out or expired), counted in the same
        transaction. False (nothing stored) at the cap."""

    async def current_api_key_count(self, account_id: str, at: datetime) -> int:
        """How many current keys (not deleted, rotated out or expired at ``at``) the account
        holds in both environments: what ``create_api_key``'s cap counts."""

    async def api_key_by_hash(self, key_hash: bytes) -> tuple[ApiKey, Account] | None:
        """The key whose keyed hash matches, with its owner (deleted keys included)."""

    async def get_api_key(self, account_id: str, key_id: str) -> ApiKey | None:
        """One of the account's keys by id (None for another account's key)."""

    async def list_api_keys(
        self,
        account_id: str,
        environment: Environment | None,
        usable_at: datetime | None = None,
        after: Keyset | None = None,
        limit: int | None = None,
    ) -> list[ApiKey]:
        """The account's keys that are not deleted (nor, with ``usable_at``, expired by
        then), oldest first; after the (created_at, id) position ``after``, at most ``limit``."""

    async def delete_api_key(self, account_id: str, key_id: str, at: datetime) -> bool:
        """Mark the key deleted at ``at``; False when it is not the account's live key."""

    async def rotate_api_key(self, account_id: str, old_id: str, new: ApiKey, old_expires_at: datetime) -> bool:
        """Insert ``new`` and let the old key expire at ``old_expires_at``, atomically.

        False when the old key is not the account's, is deleted, or was rotated already.
        """

    async def revoke_session(self, session_id: str, account_id: str, at: datetime, expires_at: datetime) -> None:
        """End a session before its expiry, for every worker and node (idempotent)."""

    async def session_revoked(self, session_id: str) -> bool:
        """True when the session was ended early."""

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        """Record that the key was used at ``at``."""


class AttestationStore(Protocol):
    """Registered post-quantum keys, attestation challenges and attestations,
    always scoped by account and environment."""

    async def add_pq_key(self, key: PqKey) -> PqKey:
        """Register a public key; when the account already has it in this
        environment, return the existing record instead (idempotent)."""

    async def pq_key_by_fingerprint(
        self, account_id: str, environment: Environment, algorithm: str, fingerprint: str
    ) -> PqKey | None:
        """The account's registered key with this algorithm and fingerprint."""

    async def list_pq_keys(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[PqKey]:
        """The account's registered keys in one environment, oldest first; after the
        (created_at, id) position ``after``, at most ``limit`` (None: all)."""

    async def add_challenge(self, challenge: AttestationChallenge) -> None:
        """Store a newly issued challenge."""

    async def challenge_by_statement(
        self, account_id: str, environment: Environment, statement_hash: bytes
    ) -> AttestationChallenge | None:
        """The account's challenge whose statement has this SHA-256."""

    async def add_attestation(self, attestation: Attestation, now: datetime) -> bool:
        """Store an attestation; when it names a challenge, consume that challenge in
        the same transaction. False (nothing stored) when the challenge is already
        used or expired. Returns only once the write is durable."""

    async def get_attestation(
        self, account_id: str, environment: Environment, attestation_id: str
    ) -> Attestation | None:
        """One of the account's attestations in this environment."""

    async def list_attestations(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[Attestation]:
        """The account's attestations in one environment, oldest first; after the
        (created_at, id) position ``after``, at most ``limit`` (None: all)."""


class ScanStore(Protocol):
    """Watch lists and latest scan results, scoped by account and environment."""

    async def watch(self, entry: WatchedAddress, cap: int | None = None) -> WatchedAddress | None:
        """Add an address to a watch list; the existing entry when already watched. With
        ``cap``: None (nothing stored) when the address is new and the account already
        watches ``cap`` addresses, counted in the adding transaction."""

    async def unwatch(self, account_id: str, environment: Environment, entry_id: str) -> bool:
        """Remove an entry; False when it is not the account's."""

    async def watchlist(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[WatchedAddress]:
        """The account's watched addresses in one environment, oldest first; after the
        (created_at, id) position ``after``, at most ``limit`` (None: all)."""

    async def watch_count(self, account_id: str) -> int:
        """How many addresses the account watches (both environments)."""

    async def all_watched(self, created_after: datetime | None = None) -> list[WatchedAddress]:
        """Every watched address of every tenant (for the pipelines), optionally only
        those added after a time (the new-address sensor)."""

    def export_watchlist(self, chain: str, chunk: int = 10_000) -> AsyncGenerator[list[Row], None]:
        """Every tenant's entries on one chain in (environment, address, account) order,
        as raw rows ``chunk`` at a time, read as one consistent snapshot (the daily export)."""

    async def latest_result(
        self, account_id: str, environment: Environment, chain: str, address: str
    ) -> ScanResult | None:
        """The latest stored result for one address, if any."""

    async def save_results(self, results: list[ScanResult], alerts: ResultAlerts | None = None) -> int:
        """Insert results, replacing stored ones that are not newer (durable when
        this returns); how many were written (the others were superseded). ``alerts``: the
        events each replacement raises, put in the webhook outbox in the same transaction."""

    async def take_lease(self, key: str, holder: str, now: datetime, ttl: timedelta) -> ScanLease | None:
        """Take the scan lease ``key`` for ``holder`` unless another holder's has not expired:
        None when taken now, else the lease that holds it."""

    async def lease(self, key: str) -> ScanLease | None:
        """The lease ``key`` as stored now, if any."""

    async def release_lease(self, key: str, holder: str) -> None:
        """Give the lease ``key`` back (nothing when another holder has it now)."""

    async def watched_entry(
        self, account_id: str, environment: Environment, chain: str, address: str
    ) -> WatchedAddress | None:
        """The tenant's watch-list entry of the address in the environment (None: not watched there)."""

    async def latest_key_result(self, account_id: str, environment: Environment, subject: str) -> KeyScanResult | None:
        """The latest stored key-scan result for one subject (key and chains), if any."""

    async def key_results(
        self, account_id: str, environment: Environment, subjects: tuple[str, str], after: str | None, limit: int
    ) -> list[KeyScanResult]:
        """Stored key-scan results whose subject is in ``[low, high)`` (``subjects``), in
        subject order after the subject ``after``, at most ``limit``."""

    async def save_key_result(self, result: KeyScanResult) -> None:
        """Insert or replace a key-scan result (durable when this returns)."""


class ManagedKeyStore(Protocol):
    """Managed-custody keys, their append-only audit log and their monthly
    signature counts, scoped by account and environment. Key material is only
    the backend's opaque ``key_ref`` and is erased on destruction."""

    async def create(self, key: ManagedKey, event: ManagedKeyEvent, registration: PqKey | None) -> None:
        """Insert the key, its ``created`` event and (optionally) the registration
        of its public key in one transaction: all of it or nothing."""

    async def get(self, account_id: str, environment: Environment, key_id: str) -> ManagedKey | None:
        """One of the account's managed keys in this environment (None otherwise)."""

    async def list_keys(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[ManagedKey]:
        """The account's managed keys in one environment, in every state, oldest first;
        after the (created_at, id) position ``after``, at most ``limit`` (None: all)."""

    async def schedule_deletion(
        self,
        account_id: str,
        environment: Environment,
        key_id: str,
        requested_at: datetime,
        scheduled_at: datetime,
        event: ManagedKeyEvent,
    ) -> ManagedKey | None:
        """active → pending_deletion, with its event; None when the key is not active."""

    async def cancel_deletion(
        self, account_id: str, environment: Environment, key_id: str, event: ManagedKeyEvent
    ) -> ManagedKey | None:
        """pending_deletion → active, with its event; None when not pending deletion."""

    async def due_for_destruction(self, now: datetime, limit: int) -> list[ManagedKey]:
        """Keys of every tenant whose deletion date has passed."""

    async def destroy(self, key_id: str, now: datetime, event: ManagedKeyEvent) -> bool:
        """Erase the key's material and mark it destroyed, with its event; False
        when it is not (or no longer) due."""

    async def events(
        self,
        account_id: str,
        environment: Environment,
        key_id: str,
        after_id: str | None = None,
        limit: int | None = None,
    ) -> list[ManagedKeyEvent]:
        """The key's audit log, oldest first: the events after its event ``after_id``
        (none when that is not one of them), at most ``limit`` (None: all)."""

    async def verify_event_chain(self, account_id: str) -> bool:
        """True when the account's audit log hashes chain up unbroken."""

    async def count_signature(self, key_id: str, month: str) -> bool:
        """Count one signature for the key in ``month`` (YYYY-MM), durably, only if
        the key is still active at commit; False (nothing counted) otherwise."""

    async def uncount_signature(self, key_id: str, month: str) -> None:
        """Take back one counted signature that was never made (its signing failed)."""

    async def usage(
        self, account_id: str, environment: Environment, month: str, start: datetime, end: datetime
    ) -> list[ManagedKeyUsage]:
        """Every key that held material at some time in [start, end) or was used
        in ``month``, with its signature count for ``month``."""

    async def release_space(self) -> None:
        """Give back the space destroyed keys' material held (``Database.reclaim``)."""


class WindowCounters(Protocol):
    """Rate-limit counters several API workers share (exact across processes)."""

    async def admit(self, buckets: tuple[str, ...], start: int, limit: int, prune_before: int) -> list[int]:
        """Each bucket's count in the window starting at ``start`` before this request; one
        is added to every bucket when all of them were below ``limit``, to none otherwise,
        atomically (a refused request uses up no bucket). Windows before ``prune_before``
        may be forgotten."""
        ...


class DescriptorWatchStore(Protocol):
    """Watched wallets (descriptors or extended keys), scoped by account and environment;
    each counts against the watch cap by the addresses its latest scan derived."""

    async def add(self, entry: WatchedDescriptor, cap: int) -> WatchedDescriptor | None:
        """Store a wallet unless the account would then watch more than ``cap`` addresses
        (None); a wallet already watched is returned as stored."""
        ...

    async def remove(self, account_id: str, environment: Environment, entry_id: str) -> bool:
        """Stop watching a wallet; False when it is not the account's."""
        ...

    async def page(
        self, account_id: str, environment: Environment, after: Keyset | None = None, limit: int | None = None
    ) -> list[WatchedDescriptor]:
        """The account's watched wallets in one environment, oldest first (keyset pages)."""
        ...

    async def find(self, account_id: str, environment: Environment, descriptor: str) -> WatchedDescriptor | None:
        """The account's watched wallet ``descriptor`` in one environment, if watched."""
        ...

    async def everyone(self) -> list[tuple[WatchedDescriptor, Plan]]:
        """Every tenant's watched wallets with their account's plan."""
        ...

    async def count_besides(self, entry: WatchedDescriptor) -> int:
        """What the account of ``entry`` watches besides it (addresses and other wallets' derived addresses)."""
        ...

    async def rescanned(self, entry_id: str, derived_addresses: int, summary: str, scanned_at: datetime) -> bool:
        """Record a rescan; False when the wallet is no longer watched."""
        ...
