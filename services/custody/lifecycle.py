"""Managed custody: keys whose private half the service holds, behind ``KeyCustody``.

Free of HTTP; raises domain errors (``services.custody.errors``, ``services.errors``).
Life of a key::

    create ──▶ active ──DELETE──▶ pending_deletion ──(wait ≥ 7 days, purge)──▶ destroyed
                 ▲                       │
                 └────cancel-deletion────┘

Signing needs a Pro or Enterprise plan and an active key; every state change
appends an event to the account's audit log in the same transaction; each
signature is counted per key and calendar month (UTC) before it is returned.
``purge_due`` runs periodically in the server (``services.custody.purge``) and from
``qday admin purge-keys`` (or a scheduler): concurrent runs are safe. Metering is
``services.custody.billing``; the backend the settings name, ``services.custody.factory``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pqc
from core.clock import Clock, iso
from core.errors import DomainError
from core.ids import new_id
from services.accounts import Principal, environment_of
from services.custody.backend import MANAGED_ALGORITHMS, KeyCustody, binding_for
from services.custody.billing import Usage, month_bounds, month_of, usage_of
from services.custody.errors import (
    AlgorithmNotManaged,
    CustodyUnavailable,
    InvalidKeyState,
    KeyDestroyed,
    KeyPendingDeletion,
    PlanRequired,
)
from services.errors import InvalidRequest, KeyGenerationFailed, NotFound
from services.offload import run_blocking
from services.pagination import Page, PageRequest, id_after, id_cursor, keyset_after, keyset_cursor, page_of
from services.pq_keys import keygen_chain
from storage.errors import StorageError
from storage.models import KeyOrigin, ManagedKey, ManagedKeyEvent, ManagedKeyState, Plan, PqKey
from storage.repository import ManagedKeyStore

log = logging.getLogger("qday.custody")
T = TypeVar("T")

#: Plans that may create and use managed keys (spec: "Pro plan or above").
MANAGED_PLANS = (Plan.PRO, Plan.ENTERPRISE)
#: The spec's minimum waiting period between a deletion request and destruction.
MIN_DELETION_WAIT_DAYS = 7
PURGE_ACTOR = "system:purge"
#: The tag of audit-log cursors (``services.pagination``).
EVENT_PAGES = "e"
#: The tag of managed-key list cursors (``services.pagination``).
MANAGED_KEY_PAGES = "m"


@dataclass(frozen=True, slots=True)
class Signed:
    """A signature made in custody, with what the response reports about it."""

    key: ManagedKey
    signature: bytes
    context: bytes
    message_sha256: str
    signed_at: datetime


def _binding(key: ManagedKey) -> bytes:
    return binding_for(key.id, key.account_id, key.environment.value, key.algorithm)


class ManagedCustodyService:
    """Managed keys of one store and one custody backend (None: unavailable,
    every operation needing private material answers CUS_004)."""

    def __init__(
        self,
        store: ManagedKeyStore,
        custody: KeyCustody | None,
        clock: Clock,
        executor: Executor | None = None,
        deletion_wait_days: int = MIN_DELETION_WAIT_DAYS,
        unavailable_reason: str = "",
    ) -> None:
        if deletion_wait_days < MIN_DELETION_WAIT_DAYS:
            raise ValueError(f"the deletion waiting period is at least {MIN_DELETION_WAIT_DAYS} days")
        self._store = store
        self._custody = custody
        self._clock = clock
        self._executor = executor
        self._wait = timedelta(days=deletion_wait_days)
        self._unavailable_reason = unavailable_reason or "no custody backend is configured"

    @property
    def custody(self) -> KeyCustody | None:
        """The backend in use (None when unavailable)."""
        return self._custody

    # --- checks -----------------------------------------------------------------------------

    def _backend(self) -> KeyCustody:
        if self._custody is None:
            raise CustodyUnavailable("managed custody is unavailable on this server; try again later")
        return self._custody

    @staticmethod
    def require_plan(principal: Principal) -> None:
        """CUS_001 unless the account's plan includes managed custody."""
        if principal.account.plan not in MANAGED_PLANS:
            raise PlanRequired(
                f"managed custody requires the Pro or Enterprise plan; this account is on "
                f"{principal.account.plan.value}",
                plan=principal.account.plan.value,
                requiredPlans=[p.value for p in MANAGED_PLANS],
            )

    @staticmethod
    def managed_algorithm(name: str) -> pqc.Algorithm:
        """An ML-DSA algorithm; PQC_001 for unknown names, CUS_003 for SLH-DSA."""
        algorithm = pqc.parse_algorithm(name)
        if algorithm not in MANAGED_ALGORITHMS:
            raise AlgorithmNotManaged(
                f"managed keys are ML-DSA only; {algorithm.value} keys can only be generated "
                "in self custody (custody: self) and cannot be moved into managed custody",
                field="algorithm",
                algorithm=algorithm.value,
                supported=[a.value for a in MANAGED_ALGORITHMS],
            )
        return algorithm

    async def _key(self, principal: Principal, key_id: str) -> ManagedKey:
        key = await self._store.get(principal.account.id, environment_of(principal), key_id)
        if key is None:
            # Another account's or environment's key looks exactly like a missing one.
            raise NotFound(f"no managed key {key_id[:40]} in this account and environment", field="id")
        return key

    @staticmethod
    def _state_error(key: ManagedKey, action: str) -> DomainError:
        if key.state is ManagedKeyState.DESTROYED and key.destroyed_at is not None:
            destroyed = iso(key.destroyed_at)
            return KeyDestroyed(
                f"managed key {key.id} was destroyed at {destroyed}; its private key no longer exists",
                state=key.state.value,
                destroyedAt=destroyed,
            )
        if key.state is ManagedKeyState.PENDING_DELETION and key.deletion_scheduled_at is not None and action == "sign":
            due = iso(key.deletion_scheduled_at)
            return KeyPendingDeletion(
                f"managed key {key.id} is pending deletion (scheduled for {due}); cancel the deletion to sign with it",
                state=key.state.value,
                deletionScheduledAt=due,
            )
        scheduled = iso(key.deletion_scheduled_at) if key.deletion_scheduled_at else None
        return InvalidKeyState(
            f"cannot {action} managed key {key.id} in state {key.state.value}",
            state=key.state.value,
            deletionScheduledAt=scheduled,
        )

    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            return fn(*args)
        return await run_blocking(self._executor, fn, *args)

    def _event(
        self,
        key: ManagedKey,
        principal: Principal | None,
        kind: str,
        state: ManagedKeyState,
        at: datetime,
        request_id: str | None,
        **details: str,
    ) -> ManagedKeyEvent:
        actor = PURGE_ACTOR if principal is None else f"api_key:{principal.credential_id}"
        return ManagedKeyEvent(
            new_id("evt"),
            key.id,
            key.account_id,
            key.environment,
            kind,
            state,
            actor,
            request_id,
            at,
            json.dumps(details, separators=(",", ":"), sort_keys=True),
        )

    # --- operations -----------------------------------------------------------------------

    async def create(
        self, principal: Principal, algorithm_name: str, chain: str, request_id: str | None = None
    ) -> ManagedKey:
        """A new managed key: generated and wrapped in custody, then the key row, its
        ``created`` event and its public-key registration in one transaction."""
        self.require_plan(principal)
        algorithm = self.managed_algorithm(algorithm_name)
        chain = keygen_chain(chain)
        custody = self._backend()
        env = environment_of(principal)
        key_id = new_id("key")
        binding = binding_for(key_id, principal.account.id, env.value, algorithm.value)
        try:
            made = await self._off_loop(custody.create, algorithm, binding)
        except CustodyUnavailable:
            raise
        except Exception as exc:
            raise KeyGenerationFailed("managed key generation failed; nothing was stored") from exc
        now = self._clock.now()
        fingerprint = pqc.public_key_fingerprint(made.public_key)
        key = ManagedKey(
            key_id,
            principal.account.id,
            env,
            algorithm.value,
            chain.lower(),
            made.public_key,
            fingerprint,
            made.backend,
            made.wrapping_key,
            made.key_ref,
            ManagedKeyState.ACTIVE,
            now,
        )
        event = self._event(
            key,
            principal,
            "created",
            ManagedKeyState.ACTIVE,
            now,
            request_id,
            algorithm=algorithm.value,
            chain=key.chain,
            backend=made.backend,
        )
        registration = PqKey(
            key_id,
            principal.account.id,
            env,
            algorithm.value,
            key.chain,
            made.public_key,
            fingerprint,
            KeyOrigin.GENERATED,
            now,
        )
        try:
            await self._store.create(key, event, registration)
        except BaseException:
            # Nothing was stored; a backend holding per-key objects gives them up now.
            with contextlib.suppress(Exception):
                custody.destroy(made.key_ref, binding)
            raise
        return key

    async def sign(
        self,
        principal: Principal,
        key_id: str,
        algorithm_name: str,
        message: bytes,
        context: bytes,
        request_id: str | None = None,
    ) -> Signed:
        """A signature with an active managed key, counted before it is returned."""
        self.require_plan(principal)
        algorithm = self.managed_algorithm(algorithm_name)
        if len(context) > pqc.MAX_CONTEXT_BYTES:
            raise InvalidRequest(
                f"invalid request: context must be at most {pqc.MAX_CONTEXT_BYTES} bytes (field 'context')",
                field="context",
            )
        key = await self._key(principal, key_id)
        if key.algorithm != algorithm.value:
            raise InvalidRequest(
                f"invalid request: managed key {key.id} is {key.algorithm}, not {algorithm.value} (field 'algorithm')",
                field="algorithm",
                keyAlgorithm=key.algorithm,
            )
        if key.state is not ManagedKeyState.ACTIVE or key.key_ref is None:
            raise self._state_error(key, "sign")
        custody = self._backend()
        signed_at = self._clock.now()
        month = month_of(signed_at)
        # The durable count (committed only while the key is still active: the gate
        # against a concurrent deletion) runs in the writer thread while the pool
        # signs, so a caller waits for max(fsync, signing), not their sum. The
        # signature is returned only once both are done; a failed signing takes
        # its count back.
        counting = asyncio.ensure_future(self._store.count_signature(key.id, month))
        try:
            signature = await self._off_loop(custody.sign, algorithm, key.key_ref, _binding(key), message, context)
        except BaseException:
            await self._take_back(counting, key.id, month)
            raise
        if not await counting:
            # Deleted or destroyed meanwhile: the signature is discarded.
            raise self._state_error(await self._key(principal, key_id), "sign")
        return Signed(key, signature, context, hashlib.sha256(message).hexdigest(), signed_at)

    async def _take_back(self, counting: asyncio.Future[bool], key_id: str, month: str) -> None:
        """Undo the count of a signature that was not made (best effort)."""
        try:
            if await counting:
                await self._store.uncount_signature(key_id, month)
        except Exception as exc:  # noqa: BLE001 - the signing error is the one to report
            log.warning("could not take back the usage count of %s: %s", key_id, type(exc).__name__)

    async def get(self, principal: Principal, key_id: str) -> ManagedKey:
        """One of the caller's managed keys (any state)."""
        return await self._key(principal, key_id)

    async def list_keys(self, principal: Principal, page: PageRequest | None = None) -> Page[ManagedKey]:
        """A page of the caller's managed keys in its environment, in every state, oldest first."""
        page = page or PageRequest()
        after = keyset_after(MANAGED_KEY_PAGES, page.cursor)
        rows = await self._store.list_keys(principal.account.id, environment_of(principal), after, page.limit + 1)
        return page_of(rows, page.limit, lambda k: keyset_cursor(MANAGED_KEY_PAGES, k.created_at, k.id))

    async def schedule_deletion(self, principal: Principal, key_id: str, request_id: str | None = None) -> ManagedKey:
        """active → pending_deletion; destruction no earlier than the waiting period."""
        key = await self._key(principal, key_id)
        now = self._clock.now()
        due = now + self._wait
        event = self._event(
            key,
            principal,
            "deletion_scheduled",
            ManagedKeyState.PENDING_DELETION,
            now,
            request_id,
            deletionScheduledAt=iso(due),
        )
        updated = await self._store.schedule_deletion(key.account_id, key.environment, key.id, now, due, event)
        if updated is None:
            raise self._state_error(await self._key(principal, key_id), "schedule the deletion of")
        return updated

    async def cancel_deletion(self, principal: Principal, key_id: str, request_id: str | None = None) -> ManagedKey:
        """pending_deletion → active (before the purge has destroyed it)."""
        key = await self._key(principal, key_id)
        event = self._event(key, principal, "deletion_cancelled", ManagedKeyState.ACTIVE, self._clock.now(), request_id)
        updated = await self._store.cancel_deletion(key.account_id, key.environment, key.id, event)
        if updated is None:
            raise self._state_error(await self._key(principal, key_id), "cancel the deletion of")
        return updated

    async def events(self, principal: Principal, key_id: str, page: PageRequest | None = None) -> Page[ManagedKeyEvent]:
        """A page of the key's audit log, oldest first (in the order it was written)."""
        key = await self._key(principal, key_id)
        page = page or PageRequest()
        after = id_after(EVENT_PAGES, page.cursor)
        rows = await self._store.events(key.account_id, key.environment, key.id, after, page.limit + 1)
        return page_of(rows, page.limit, lambda e: id_cursor(EVENT_PAGES, e.id))

    async def usage(self, principal: Principal, month: str | None = None) -> Usage:
        """Counts of the caller's account and environment for a month (default: now)."""
        month = month or month_of(self._clock.now())
        start, end = month_bounds(month)
        env = environment_of(principal)
        return usage_of(month, env, await self._store.usage(principal.account.id, env, month, start, end))

    # --- destruction ------------------------------------------------------------------------

    async def purge_due(self, limit: int = 500) -> list[str]:
        """Destroy every key whose waiting period is over: erase its material in the
        store (then, for backends holding per-key objects, on the backend), append
        its ``destroyed`` event. Returns the ids destroyed by this call."""
        now = self._clock.now()
        destroyed: list[str] = []
        for key in await self._store.due_for_destruction(now, limit):
            # A key due for destruction was asked to be deleted and has a due time.
            assert key.deletion_requested_at is not None and key.deletion_scheduled_at is not None
            event = self._event(
                key,
                None,
                "destroyed",
                ManagedKeyState.DESTROYED,
                now,
                None,
                deletionRequestedAt=iso(key.deletion_requested_at),
                deletionScheduledAt=iso(key.deletion_scheduled_at),
            )
            if not await self._store.destroy(key.id, now, event):
                continue  # cancelled meanwhile, or another process destroyed it first
            destroyed.append(key.id)
            if self._custody is not None and key.key_ref is not None:
                try:
                    self._custody.destroy(key.key_ref, _binding(key))
                except Exception as exc:  # noqa: BLE001 - the store no longer references it
                    log.warning("custody backend could not destroy %s: %s", key.id, type(exc).__name__)
        if destroyed:
            with contextlib.suppress(StorageError):  # best effort; the engine reclaims it later anyway
                await self._store.release_space()
            log.info("destroyed %d managed key(s): %s", len(destroyed), ", ".join(destroyed))
        return destroyed

    def close(self) -> None:
        """Release the custody backend."""
        if self._custody is not None:
            self._custody.close()
