"""Watched wallets: descriptors and extended keys rescored daily. Free of HTTP.

Adding a wallet scans it once (the answer is returned, and each used address's result is
stored as its wallet scan): the addresses it derived are what it counts against the plan's
watch cap, with the account's watched addresses. The daily rescoring (``rescan``, run by the
pipelines) derives, scans and summarises each wallet again within what the cap leaves it:
a wallet that grew past it is scanned up to there, and its summary says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chains.bitcoin.wallet import Wallet, parse_wallet
from core.clock import Clock
from core.ids import new_id
from services.accounts import Principal, environment_of
from services.caps import DEFAULT_ENTERPRISE_WATCH_CAP, WATCHLIST, cap_reached, watch_cap
from services.descriptor_scans import DescriptorScanService
from services.errors import NotFound
from services.pagination import Page, PageRequest, keyset_after, keyset_cursor, page_of
from services.scans import clean_label
from storage.models import Plan, ScanResult, WatchedDescriptor
from storage.repository import DescriptorWatchStore

#: The tag of watched-wallet cursors (``services.pagination``).
DESCRIPTOR_PAGES = "d"


def wallet_key(text: str, wallet: Wallet) -> str:
    """What identifies a watched wallet: its descriptor, canonical with its checksum, or for a
    bare extended key the key as given (its SLIP-132 prefix names the script types)."""
    return text.strip() if wallet.bare_key else wallet.descriptors[0].canonical()


@dataclass(frozen=True, slots=True)
class Rescan:
    """One watched wallet rescored: the scan's answer (its summary is stored) and the used
    addresses' records to publish."""

    entry: WatchedDescriptor
    answer: dict[str, Any]
    records: list[ScanResult]


class DescriptorWatchService:
    """Adds, lists, removes and rescans watched wallets over the descriptor scans."""

    def __init__(
        self,
        scans: DescriptorScanService,
        store: DescriptorWatchStore,
        clock: Clock,
        enterprise_cap: int = DEFAULT_ENTERPRISE_WATCH_CAP,
    ) -> None:
        self._scans = scans
        self._store = store
        self._clock = clock
        self._enterprise_cap = enterprise_cap

    async def watch(self, principal: Principal, text: str, label: str | None, gap_limit: int) -> WatchedDescriptor:
        """Watch a wallet: scanned now (its used addresses' results stored as their wallet
        scans), stored with its derived-address count and summary if the plan's cap allows
        (``PlanCapReached`` otherwise). A wallet already watched is returned as stored, without a
        new scan. Errors as for ``DescriptorScanService.scan``."""
        label = clean_label(label)
        env, wallet = self._scans.wallet(principal, text, "bitcoin")
        account = principal.account
        key = wallet_key(text, wallet)
        existing = await self._store.find(account.id, env, key)
        if existing is not None:
            return existing
        answer, records = await self._scans.assess(env, wallet, gap_limit, account.id, "api")
        now = self._clock.now()
        summary = answer["summary"]
        entry = WatchedDescriptor(
            new_id("wdw"),
            account.id,
            env,
            key,
            label,
            gap_limit,
            summary["derivedAddresses"],
            json.dumps(summary, separators=(",", ":")),
            now,
            now,
        )
        cap = watch_cap(account.plan, self._enterprise_cap)
        stored = await self._store.add(entry, cap)
        if stored is None:
            raise cap_reached(WATCHLIST, cap, account.plan)
        await self._scans.save(records)
        return stored

    async def watched(self, principal: Principal, page: PageRequest | None = None) -> Page[WatchedDescriptor]:
        """A page of the caller's watched wallets, oldest first."""
        page = page or PageRequest()
        after = keyset_after(DESCRIPTOR_PAGES, page.cursor)
        rows = await self._store.page(principal.account.id, environment_of(principal), after, page.limit + 1)
        return page_of(rows, page.limit, lambda w: keyset_cursor(DESCRIPTOR_PAGES, w.created_at, w.id))

    async def unwatch(self, principal: Principal, entry_id: str) -> None:
        """Stop watching a wallet (REQ_005 when it is not the caller's)."""
        if not await self._store.remove(principal.account.id, environment_of(principal), entry_id):
            raise NotFound(f"no watched wallet {entry_id[:40]}", id=entry_id[:40])

    async def rescan(self, entry: WatchedDescriptor, plan: Plan) -> Rescan:
        """Rescore one watched wallet (the daily run): derived within what the plan's cap leaves
        it besides the account's other watched addresses and wallets, scanned, summarised; the
        records are made by the pipeline (``source`` ``pipeline``)."""
        wallet = parse_wallet(entry.descriptor, entry.environment.network)
        allowance = watch_cap(plan, self._enterprise_cap) - await self._store.count_besides(entry)
        answer, records = await self._scans.assess(
            entry.environment, wallet, entry.gap_limit, entry.account_id, "pipeline", max(allowance, 0)
        )
        return Rescan(entry, answer, records)

    async def record(self, rescan: Rescan) -> bool:
        """Store a rescan's derived-address count and summary; False when the wallet was
        removed meanwhile (its records should not be published either)."""
        summary = rescan.answer["summary"]
        return await self._store.rescanned(
            rescan.entry.id,
            summary["derivedAddresses"],
            json.dumps(summary, separators=(",", ":")),
            self._clock.now(),
        )
