"""Wallet scans: serve the latest stored result, or observe, score and store a
fresh one, through the same scoring code the pipelines use. Free of HTTP.

Identical scans arriving together share one upstream fetch (``services.observer``). Stored results are
kept per tenant and environment (see docs/security.md for why not shared).
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from chains.codecs.address import Address
from chains.codecs.detect import detect_chains, parse_address
from chains.environment import Environment
from chains.errors import AddressNotFound
from chains.registry import Chain, parse_chain
from core.clock import Clock
from core.ids import new_id
from core.text import UNSAFE_DESCRIPTION, nfc, unsafe_character
from scoring import load_readiness, score_observation
from scoring.model import SCORING_VERSION
from scoring.readiness import ReadinessData
from services.accounts import Principal, environment_of
from services.caps import DEFAULT_ENTERPRISE_WATCH_CAP, WATCHLIST, cap_reached, watch_cap
from services.errors import InvalidRequest, NotFound
from services.observer import ChainObserver
from services.pagination import Page, PageRequest, keyset_after, keyset_cursor, page_of
from services.pricing import ScanPrices
from storage.models import Plan, ScanLease, ScanResult, WatchedAddress
from storage.repository import ScanStore
from storage.scan_records import scan_record
from storage.webhook_records import ResultAlerts


@dataclass(frozen=True, slots=True)
class ScanOutcome:
    """A stored scan result and whether it came from the cache."""

    record: ScanResult
    cached: bool


#: Longest label a watch-list entry may carry (the API model says the same).
MAX_LABEL_LENGTH = 200
#: The tag of watch-list cursors (``services.pagination``).
WATCHLIST_PAGES = "w"
#: How long a scan's lease holds if its holder never releases it (a node died mid-scan):
#: longer than a scan's chain budget, so a live holder never loses it.
LEASE_TTL = timedelta(seconds=30)
#: How often a request waiting for another's scan of the same address looks for its result.
LEASE_POLL_SECONDS = 0.05


@functools.lru_cache(maxsize=4096)
def resolve_address(address: str, chain: str | None, environment: Environment) -> Address:
    """The typed address to scan: the given chain, or auto-detected (an EVM address
    means ``ethereum`` unless a chain is named). SCAN_001 / SCAN_002 otherwise.
    Remembered (addresses are immutable values): checksum validation is a sizeable
    share of a cached scan, and the same addresses are scanned again and again."""
    chain_id = parse_chain(chain) if chain is not None else None
    return parse_address(address, chain_id, environment.network)


@functools.lru_cache(maxsize=4096)
def _scan_target(address: str, chain: str | None, environment: Environment) -> tuple[Address, str]:
    """``resolve_address`` with the canonical text of the result (an EIP-55 checksum
    costs a keccak), both remembered for the cached-scan path."""
    target = resolve_address(address, chain, environment)
    return target, str(target)


def clean_label(label: str | None) -> str | None:
    """A watch-list label in NFC; ``InvalidRequest`` when it is longer than
    ``MAX_LABEL_LENGTH`` or holds control or bidirectional-override characters."""
    if label is None:
        return None
    char = unsafe_character(label)
    if char is not None:
        raise InvalidRequest(f"label holds {char}; refused: {UNSAFE_DESCRIPTION}", field="label")
    label = nfc(label)
    if len(label) > MAX_LABEL_LENGTH:
        raise InvalidRequest(f"label is longer than {MAX_LABEL_LENGTH} characters", field="label")
    return label


def watch_entry(
    account_id: str, environment: Environment, address: str, chain: str | None, label: str | None, at: datetime
) -> WatchedAddress:
    """A new watch-list entry for an address in its canonical form: the one rule the
    API and ``qday watch import`` share. ``InvalidAddress`` / ``UnsupportedChain`` for
    addresses and chains, ``InvalidRequest`` for an over-long label or one holding control
    or bidirectional-override characters (stored in NFC)."""
    label = clean_label(label)
    target = resolve_address(address, chain, environment)
    return WatchedAddress(new_id("wat"), account_id, environment, target.chain.value, str(target), label, at)


async def watch_within_cap(
    store: ScanStore, entry: WatchedAddress, plan: Plan, enterprise_cap: int = DEFAULT_ENTERPRISE_WATCH_CAP
) -> WatchedAddress:
    """Store a watch-list entry (``watch_entry``) unless its account's plan cap is reached
    (``PlanCapReached``); an address already watched is returned and never counts. The
    store counts and inserts in one transaction. The API and ``qday watch import`` share it."""
    cap = watch_cap(plan, enterprise_cap)
    stored = await store.watch(entry, cap)
    if stored is None:
        raise cap_reached(WATCHLIST, cap, plan)
    return stored


def candidate_chains(address: str, environment: Environment) -> list[Chain]:
    """Every chain the address could belong to (all 15 for an EVM address)."""
    return detect_chains(address, environment.network)


class ScanService:
    """Scans for the API, over injected chain clients and price sources."""

    def __init__(
        self,
        store: ScanStore,
        observer: ChainObserver,
        prices: ScanPrices,
        clock: Clock,
        ttl_seconds: int,
        pipeline_ttl_seconds: int,
        readiness: ReadinessData | None = None,
    ) -> None:
        self._store = store
        self._observer = observer
        self._prices = prices
        self._clock = clock
        self._ttl = {"api": timedelta(seconds=ttl_seconds), "pipeline": timedelta(seconds=pipeline_ttl_seconds)}
        self._readiness = readiness or load_readiness()

    async def scan(self, principal: Principal, address: str, chain: str | None, refresh: bool) -> ScanOutcome:
        """The caller's latest result for the address, refreshed when missing, older
        than its TTL (longer for results of the daily pipeline run), scored by older
        rules (``SCORING_VERSION``), or when asked.

        A fresh scan observes the address with the other addresses of its key family
        (``ChainObserver.family``): a key revealed anywhere makes it exposed, with the
        evidence and the chains seen in the result. SCAN_003 when neither the address nor
        its key has left a trace. The same scan (tenant and address) asked of several
        workers or nodes at once asks the chains once: the first takes a lease in the store,
        the others wait for the result it stores (``ScanStore.take_lease``)."""
        env = environment_of(principal)
        target, text = _scan_target(address, chain, env)
        chain_id = target.chain
        stored = await self._store.latest_result(principal.account.id, env, chain_id.value, text)
        now = self._clock.now()
        if (
            stored is not None
            and not refresh
            and now - stored.scanned_at < self._ttl[stored.source]
            and stored.scoring_version == SCORING_VERSION  # older rules, older fields: rescore
        ):
            return ScanOutcome(stored, cached=True)
        key = f"{principal.account.id}/{env.value}/{chain_id.value}/{text}"
        holder = new_id("lease")
        while (held := await self._store.take_lease(key, holder, now, LEASE_TTL)) is not None:
            # Another worker or node is scanning this address for this tenant: take its result.
            result = await self._result_of(held, principal.account.id, env, chain_id.value, text)
            if result is not None:
                return ScanOutcome(result, cached=True)
            now = self._clock.now()  # it ended without one (the chain failed it): scan ourselves
        try:
            record = await self._fresh(principal.account.id, env, target, text, now)
            await self._store.save_results([record])
        finally:
            await self._store.release_lease(key, holder)
        return ScanOutcome(record, cached=False)

    async def rescore(
        self, account_id: str, environment: Environment, chain: str, address: str, alerts: ResultAlerts
    ) -> ScanResult:
        """A fresh scan of a watched address for its tenant, stored with the events ``alerts``
        raises against the result it replaces: what the chain-head follower asks when it saw
        the address change, so ``risk.changed`` leaves at the block rather than the next day."""
        target, text = _scan_target(address, chain, environment)
        record = await self._fresh(account_id, environment, target, text, self._clock.now())
        await self._store.save_results([record], alerts)
        return record

    async def _fresh(
        self, account_id: str, environment: Environment, target: Address, text: str, now: datetime
    ) -> ScanResult:
        """The address observed with its key family and scored now (SCAN_003 when neither
        the address nor its key has left a trace)."""
        chain = target.chain.value
        observation, coverage = await self._observer.family(environment, target)
        if not observation.has_activity and not observation.evidence:
            raise AddressNotFound(f"{text} has no activity on {chain}", chain=chain, address=text)
        price = await self._prices.price(environment, target.chain)
        risk = score_observation(observation, price, self._readiness)
        return scan_record(observation, risk, account_id, environment, now, "api", coverage)

    async def _result_of(
        self, held: ScanLease, account_id: str, env: Environment, chain: str, address: str
    ) -> ScanResult | None:
        """The result the holder of ``held`` stores, once it does (None when its lease ends
        first: released without a result, or expired). Polled, bounded by the lease."""
        deadline = time.monotonic() + (held.expires_at - held.taken_at).total_seconds()
        while time.monotonic() < deadline:
            stored = await self._store.latest_result(account_id, env, chain, address)
            if stored is not None and stored.scanned_at >= held.taken_at:
                return stored
            if await self._store.lease(held.key) != held:
                stored = await self._store.latest_result(account_id, env, chain, address)
                return stored if stored is not None and stored.scanned_at >= held.taken_at else None
            await asyncio.sleep(LEASE_POLL_SECONDS)
        return None

    # --- watch list ---------------------------------------------------------------------

    async def watch(
        self,
        principal: Principal,
        address: str,
        chain: str | None,
        label: str | None,
        enterprise_cap: int = DEFAULT_ENTERPRISE_WATCH_CAP,
    ) -> WatchedAddress:
        """Add an address (validated, canonical form) to the caller's watch list, within
        the plan's cap (``PlanCapReached``; an address already watched never counts)."""
        account = principal.account
        entry = watch_entry(account.id, environment_of(principal), address, chain, label, self._clock.now())
        return await watch_within_cap(self._store, entry, account.plan, enterprise_cap)

    async def watchlist(self, principal: Principal, page: PageRequest | None = None) -> Page[WatchedAddress]:
        """A page of the caller's watched addresses, oldest first."""
        page = page or PageRequest()
        after = keyset_after(WATCHLIST_PAGES, page.cursor)
        rows = await self._store.watchlist(principal.account.id, environment_of(principal), after, page.limit + 1)
        return page_of(rows, page.limit, lambda w: keyset_cursor(WATCHLIST_PAGES, w.created_at, w.id))

    async def unwatch(self, principal: Principal, entry_id: str) -> None:
        """Stop watching an address (REQ_005 when it is not the caller's)."""
        if not await self._store.unwatch(principal.account.id, environment_of(principal), entry_id):
            raise NotFound(f"no watch-list entry {entry_id[:40]}", id=entry_id[:40])
