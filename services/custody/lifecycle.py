"""Managed custody: keys whose private half the service holds, behind ``KeyCustody``.

Free of Sanic; raises ``ApiError`` (or storage/custody errors carrying a code).
Life of a key::

    create ──▶ active ──DELETE──▶ pending_deletion ──(wait ≥ 7 days, purge)──▶ destroyed
                 ▲                       │
                 └────cancel-deletion────┘

Signing needs a Pro or Enterprise plan and an active key; every state change
appends an event to the account's audit log in the same transaction; each
signature is counted per key and calendar month (UTC) before it is returned.
``purge_due`` runs periodically in the server, and ``purge_due_keys`` runs it from
``qday admin purge-keys`` (or a scheduler): concurrent runs are safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import re
import sqlite3
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pqc
from api.errors import ApiError
from chains.environment import Environment
from core.clock import Clock, SystemClock, iso
from core.ids import new_id
from services.accounts import Principal
from services.attestations import KEYGEN_CHAINS, environment_of
from services.custody import CustodyUnavailable, KeyCustody, binding_for
from services.custody.backend import MANAGED_ALGORITHMS
from services.offload import run_blocking
from storage.models import KeyOrigin, ManagedKey, ManagedKeyEvent, ManagedKeyState, ManagedKeyUsage, Plan, PqKey
from storage.repository import ManagedKeyStore

log = logging.getLogger("qday.custody")
T = TypeVar("T")

#: Plans that may create and use managed keys (spec: "Pro plan or above").
MANAGED_PLANS = (Plan.PRO, Plan.ENTERPRISE)
#: The spec's minimum waiting period between a deletion request and destruction.
MIN_DELETION_WAIT_DAYS = 7
#: Signatures per billing block (spec: billed "per 10,000 signing operations").
SIGNATURES_PER_BLOCK = 10_000
PURGE_ACTOR = "system:purge"
_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")


def month_of(at: datetime) -> str:
    """The calendar month (UTC) of a time, as ``YYYY-MM``."""
    return at.astimezone(UTC).strftime("%Y-%m")


def month_bounds(month: str) -> tuple[datetime, datetime]:
    """[start, end) of a ``YYYY-MM`` month in UTC; REQ_001 when malformed."""
    match = _MONTH.match(month)
    if match is None:
        raise ApiError("REQ_001", "invalid request: month must be YYYY-MM (field 'month')", field="month")
    year, number = int(match.group(1)), int(match.group(2))
    start = datetime(year, number, 1, tzinfo=UTC)
    end = datetime(year + (number == 12), number % 12 + 1, 1, tzinfo=UTC)
    return start, end


@dataclass(frozen=True, slots=True)
class Signed:
    """A signature made in custody, with what the response reports about it."""

    key: ManagedKey
    signature: bytes
    context: bytes
    message_sha256: str
    signed_at: datetime


@dataclass(frozen=True, slots=True)
class Usage:
    """Managed-custody counts of one account, environment and month."""

    month: str
    environment: Environment
    active_keys: int
    key_months: int
    signatures: int
    signature_blocks: int
    billable_units: int
    keys: list[ManagedKeyUsage]


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
        self._purge_task: asyncio.Task[None] | None = None

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
            raise ApiError(
                "CUS_001",
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
            raise ApiError(
                "CUS_003",
                f"managed keys are ML-DSA only; {algorithm.value} keys can only be generated "
                "in self custody (custody: self) and cannot be moved into managed custody",
                field="algorithm",
                algorithm=algorithm.value,
                supported=[a.value for a in MANAGED_ALGORITHMS],
            )
        return algorithm

    def _key(self, principal: Principal, key_id: str) -> ManagedKey:
        key = self._store.get(principal.account.id, environment_of(principal), key_id)
        if key is None:
            # Another account's or environment's key looks exactly like a missing one.
            raise ApiError("REQ_005", f"no managed key {key_id[:40]} in this account and environment", field="id")
        return key

    @staticmethod
    def _state_error(key: ManagedKey, action: str) -> ApiError:
        if key.state is ManagedKeyState.DESTROYED:
            return ApiError(
                "CUS_005",
                f"managed key {key.id} was destroyed at {iso(key.destroyed_at)}; its private key no longer exists",
                state=key.state.value,
                destroyedAt=iso(key.destroyed_at),
            )  # type: ignore[arg-type]
        if key.state is ManagedKeyState.PENDING_DELETION and action == "sign":
            return ApiError(
                "CUS_002",
                f"managed key {key.id} is pending deletion (scheduled for "
                f"{iso(key.deletion_scheduled_at)}); cancel the deletion to sign with it",  # type: ignore[arg-type]
                state=key.state.value,
                deletionScheduledAt=iso(key.deletion_scheduled_at),
            )  # type: ignore[arg-type]
        scheduled = iso(key.deletion_scheduled_at) if key.deletion_scheduled_at else None
        return ApiError(
            "CUS_006",
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
        if chain.lower() not in KEYGEN_CHAINS:
            raise ApiError(
                "GEN_001",
                f"keys can be generated for {', '.join(KEYGEN_CHAINS)}; not for {chain[:40]!r}",
                field="chain",
                supported=list(KEYGEN_CHAINS),
            )
        custody = self._backend()
        env = environment_of(principal)
        key_id = new_id("key")
        binding = binding_for(key_id, principal.account.id, env.value, algorithm.value)
        try:
            made = await self._off_loop(custody.create, algorithm, binding)
        except CustodyUnavailable:
            raise
        except Exception as exc:
            raise ApiError("GEN_002", "managed key generation failed; nothing was stored") from exc
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
            raise ApiError(
                "REQ_001",
                f"invalid request: context must be at most {pqc.MAX_CONTEXT_BYTES} bytes (field 'context')",
                field="context",
            )
        key = self._key(principal, key_id)
        if key.algorithm != algorithm.value:
            raise ApiError(
                "REQ_001",
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
            raise self._state_error(self._key(principal, key_id), "sign")
        return Signed(key, signature, context, hashlib.sha256(message).hexdigest(), signed_at)

    async def _take_back(self, counting: asyncio.Future[bool], key_id: str, month: str) -> None:
        """Undo the count of a signature that was not made (best effort)."""
        try:
            if await counting:
                await self._store.uncount_signature(key_id, month)
        except Exception as exc:  # noqa: BLE001 - the signing error is the one to report
            log.warning("could not take back the usage count of %s: %s", key_id, type(exc).__name__)

    def get(self, principal: Principal, key_id: str) -> ManagedKey:
        """One of the caller's managed keys (any state)."""
        return self._key(principal, key_id)

    async def schedule_deletion(self, principal: Principal, key_id: str, request_id: str | None = None) -> ManagedKey:
        """active → pending_deletion; destruction no earlier than the waiting period."""
        key = self._key(principal, key_id)
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
            raise self._state_error(self._key(principal, key_id), "schedule the deletion of")
        return updated

    async def cancel_deletion(self, principal: Principal, key_id: str, request_id: str | None = None) -> ManagedKey:
        """pending_deletion → active (before the purge has destroyed it)."""
        key = self._key(principal, key_id)
        event = self._event(key, principal, "deletion_cancelled", ManagedKeyState.ACTIVE, self._clock.now(), request_id)
        updated = await self._store.cancel_deletion(key.account_id, key.environment, key.id, event)
        if updated is None:
            raise self._state_error(self._key(principal, key_id), "cancel the deletion of")
        return updated

    def events(self, principal: Principal, key_id: str) -> list[ManagedKeyEvent]:
        """The key's audit log, oldest first."""
        key = self._key(principal, key_id)
        return self._store.events(key.account_id, key.environment, key.id)

    def usage(self, principal: Principal, month: str | None = None) -> Usage:
        """Counts of the caller's account and environment for a month (default: now)."""
        month = month or month_of(self._clock.now())
        start, end = month_bounds(month)
        env = environment_of(principal)
        keys = self._store.usage(principal.account.id, env, month, start, end)
        signatures = sum(k.signatures for k in keys)
        key_months = len(keys)
        blocks = math.ceil(signatures / SIGNATURES_PER_BLOCK)
        active = sum(1 for k in keys if k.state is ManagedKeyState.ACTIVE)
        return Usage(month, env, active, key_months, signatures, blocks, key_months + blocks, keys)

    # --- destruction ------------------------------------------------------------------------

    async def purge_due(self, limit: int = 500) -> list[str]:
        """Destroy every key whose waiting period is over: erase its material in the
        store (then, for backends holding per-key objects, on the backend), append
        its ``destroyed`` event. Returns the ids destroyed by this call."""
        now = self._clock.now()
        destroyed: list[str] = []
        for key in self._store.due_for_destruction(now, limit):
            event = self._event(
                key,
                None,
                "destroyed",
                ManagedKeyState.DESTROYED,
                now,
                None,
                deletionRequestedAt=iso(key.deletion_requested_at),  # type: ignore[arg-type]
                deletionScheduledAt=iso(key.deletion_scheduled_at),
            )  # type: ignore[arg-type]
            if not await self._store.destroy(key.id, now, event):
                continue  # cancelled meanwhile, or another process destroyed it first
            destroyed.append(key.id)
            if self._custody is not None and key.key_ref is not None:
                try:
                    self._custody.destroy(key.key_ref, _binding(key))
                except Exception as exc:  # noqa: BLE001 - the store no longer references it
                    log.warning("custody backend could not destroy %s: %s", key.id, type(exc).__name__)
        if destroyed:
            with contextlib.suppress(sqlite3.Error):
                self._store.release_space()
            log.info("destroyed %d managed key(s): %s", len(destroyed), ", ".join(destroyed))
        return destroyed

    def start_purge_loop(self, interval_seconds: float) -> None:
        """Run ``purge_due`` now and then every ``interval_seconds`` on the running loop."""
        if interval_seconds > 0 and self._purge_task is None:
            self._purge_task = asyncio.get_running_loop().create_task(self._purge_forever(interval_seconds))

    async def _purge_forever(self, interval_seconds: float) -> None:
        while True:
            try:
                await self.purge_due()
            except Exception as exc:  # noqa: BLE001 - retried at the next tick
                log.warning("managed-key purge failed: %s", type(exc).__name__)
            await asyncio.sleep(interval_seconds)

    def close(self) -> None:
        """Stop the purge loop and release the custody backend."""
        if self._purge_task is not None:
            self._purge_task.cancel()
            self._purge_task = None
        if self._custody is not None:
            self._custody.close()


def open_custody_backend(settings: Any) -> KeyCustody:
    """The custody backend the settings name; raises ``CustodyUnavailable``."""
    from services.custody.pkcs11 import Pkcs11WrappedSeedCustody, open_softhsm, resolve_softhsm_conf

    if settings.custody_backend == "disabled":
        raise CustodyUnavailable("managed custody is disabled (custody_backend = disabled)")
    if settings.custody_backend == "softhsm":
        conf = resolve_softhsm_conf(settings.softhsm_conf, settings.data_dir)
        return open_softhsm(
            conf,
            settings.custody_token_label,
            settings.custody_pin,
            settings.custody_wrap_key_label,
            settings.custody_module,
        )
    return Pkcs11WrappedSeedCustody(
        settings.custody_module, settings.custody_token_label, settings.custody_pin, settings.custody_wrap_key_label
    )


def open_managed_custody(
    settings: Any, store: ManagedKeyStore, clock: Clock, executor: Executor | None
) -> ManagedCustodyService:
    """The service for a server: the configured backend, or none (CUS_004 on use)
    when it cannot be opened, so the rest of the API still starts."""
    custody: KeyCustody | None = None
    reason = ""
    try:
        custody = open_custody_backend(settings)
        log.info("managed custody: %s", custody.describe())
    except Exception as exc:  # noqa: BLE001 - the rest of the API must still start
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("managed custody unavailable (%s); managed-custody calls answer CUS_004", reason)
    return ManagedCustodyService(store, custody, clock, executor, settings.deletion_wait_days, reason)


def purge_due_keys(settings: Any, clock: Clock | None = None) -> list[str]:
    """Destroy the managed keys whose waiting period is over, from outside the
    server (``qday admin purge-keys``, a Dagster schedule). The embedded
    backend keeps nothing per key on the token, so this needs only the store."""
    from storage.managed_keys_sqlite import SqliteManagedKeyStore
    from storage.sqlite import open_database

    conn = open_database(settings.operational_db, settings.sqlite_synchronous)
    try:
        service = ManagedCustodyService(
            SqliteManagedKeyStore(conn), None, clock or SystemClock(), None, settings.deletion_wait_days
        )
        return asyncio.run(service.purge_due(limit=100_000))
    finally:
        conn.close()


__all__ = [
    "MANAGED_PLANS",
    "ManagedCustodyService",
    "Signed",
    "Usage",
    "month_bounds",
    "month_of",
    "open_custody_backend",
    "open_managed_custody",
    "purge_due_keys",
]
