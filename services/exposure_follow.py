"""Following chain heads so that a watched key revealed in block N is alerted within one
block interval plus delivery (issue 19, detection).

One node at a time follows (a lease in the store, renewed each pass; another node takes
over within ``LEASE_TTL`` when it dies). Each pass, for each environment with watched EVM
addresses, it asks each followed EVM chain for its head (one call); on a new head it
observes every watched EVM address on that chain in batches (balance, nonce, code: the
client's JSON-RPC batch). An EVM key is one key on every EVM chain, so a nonce above zero
on any followed chain exposes the address wherever it is watched (its key family); a
balance is its watched chain's own. What changed since the tenant's last seen state is
stored with its events (``key.exposed``, ``balance.changed``) in one transaction.

The first sight of a watched address records it without an event: alerts report changes
after an address is watched (a scan reports its state then). Bitcoin tips are not followed
here yet: Bitcoin addresses are alerted by the daily rescoring's diff
(``services.daily_alerts``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chains.clients.base import ChainClient
from chains.clients.evm import EvmClient
from chains.codecs.address import Address
from chains.environment import Environment
from chains.errors import ChainError
from chains.observation import Observation
from chains.registry import CHAINS, Chain
from core.clock import Clock
from core.ids import new_id
from scoring.result import format_amount
from services.offload import stop_task
from services.scans import resolve_address
from services.webhooks import new_event
from storage.sql_alert_state import AlertState, SqlAlertStateStore, Watcher
from storage.sql_scans import SqlScanStore
from storage.webhook_records import EventType, OutboxEvent

log = logging.getLogger("qday.alerts")

#: The store lease only its holder follows heads under.
LEASE_KEY = "alerts:chain-follower"
#: How long the lease lasts unless renewed: another node takes over within this.
LEASE_TTL = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class Seen:
    """An address as one chain showed it at one height."""

    chain: str
    height: int
    exposed: bool
    balance: int


def _side(state: AlertState) -> dict[str, Any]:
    """``before`` or ``after`` of an event: the key on chain or not, the balance with its unit."""
    info = CHAINS[Chain(state.chain)]
    return {"publicKeyExposed": state.exposed, "balance": format_amount(state.balance, info.decimals, info.symbol)}


def changes(
    environment: Environment,
    watchers: Sequence[Watcher],
    last: Mapping[tuple[str, str, str], AlertState],
    seen: Mapping[str, Mapping[str, Seen]],
    now: datetime,
) -> tuple[list[AlertState], list[OutboxEvent]]:
    """The new states of watched addresses and the events their changes raise: ``seen`` is
    chain → lower-cased address → what that chain showed. A key on chain on any chain of
    the family exposes the address everywhere; balances are the watched chain's."""
    states: list[AlertState] = []
    events: list[OutboxEvent] = []
    for watcher in watchers:
        key = watcher.address.lower()
        sightings = [chain_seen[key] for chain_seen in seen.values() if key in chain_seen]
        own = seen.get(watcher.chain, {}).get(key)
        before = last.get((watcher.account_id, watcher.chain, watcher.address))
        if not sightings or (before is None and own is None):
            continue
        revealing = [s for s in sightings if s.exposed]
        if before is not None and before.exposed:  # a key once on chain stays there
            exposed, evidence = True, before.evidence
        else:
            exposed = bool(revealing)
            evidence = tuple(
                {"chain": s.chain, "address": watcher.address, "kind": "nonce", "txid": None, "blockHeight": s.height}
                for s in revealing
            )
        if own is not None:
            balance, height = own.balance, own.height
        else:  # the watched chain did not answer this pass: its last balance stands
            assert before is not None
            balance, height = before.balance, before.block_height
        after = AlertState(watcher.account_id, watcher.chain, watcher.address, exposed, balance, evidence, height, now)
        if before is not None and (before.exposed, before.balance) == (after.exposed, after.balance):
            continue
        states.append(after)
        if before is None:
            continue  # first sight: the baseline
        data: dict[str, Any] = {
            "address": watcher.address,
            "chain": watcher.chain,
            "before": _side(before),
            "after": _side(after),
            "exposureEvidence": list(after.evidence),
        }
        if after.exposed and not before.exposed:
            events.append(new_event(watcher.account_id, environment, EventType.KEY_EXPOSED, now, data))
        if after.balance != before.balance:
            events.append(new_event(watcher.account_id, environment, EventType.BALANCE_CHANGED, now, data))
    return states, events


class ExposureFollower:
    """Follows EVM chain heads for watched addresses and raises alerts (see module doc)."""

    def __init__(
        self,
        alerts: SqlAlertStateStore,
        leases: SqlScanStore,
        clients: Mapping[Environment, Mapping[Chain, ChainClient]],
        family_chains: Collection[str],
        clock: Clock,
        on_events: Callable[[], None],
        poll_seconds: float,
    ) -> None:
        self._alerts = alerts
        self._leases = leases
        self._clients = clients
        self._family = frozenset(family_chains)
        self._clock = clock
        self._on_events = on_events
        self._poll = poll_seconds
        self._holder = new_id("follower")
        self._heads: dict[tuple[Environment, Chain], int] = {}
        self._task: asyncio.Task[None] | None = None

    async def poll_once(self) -> int:
        """One pass over every environment (nothing unless this node holds the lease); the
        events raised."""
        now = self._clock.now()
        if await self._leases.take_lease(LEASE_KEY, self._holder, now, LEASE_TTL) is not None:
            return 0  # another node follows
        raised = 0
        for environment in Environment:
            raised += await self._follow(environment, now)
        if raised:
            self._on_events()
        return raised

    async def _follow(self, environment: Environment, now: datetime) -> int:
        clients = {c: client for c, client in self._clients[environment].items() if isinstance(client, EvmClient)}
        watchers = await self._alerts.watchers(environment, [c.value for c in clients])
        if not watchers:
            return 0
        watched_chains = {w.chain for w in watchers}
        followed = [c for c in clients if c.value in self._family or c.value in watched_chains]
        addresses = sorted({w.address for w in watchers})
        seen: dict[str, dict[str, Seen]] = {}
        for chain in followed:
            found = await self._look(environment, chain, clients[chain], addresses)
            if found is not None:
                seen[chain.value] = found
        if not seen:
            return 0
        last = await self._alerts.states(environment)
        states, events = changes(environment, watchers, last, seen, now)
        if states or events:
            await self._alerts.record(environment, states, events)
        return len(events)

    async def _look(
        self, environment: Environment, chain: Chain, client: EvmClient, addresses: Sequence[str]
    ) -> dict[str, Seen] | None:
        """What ``chain`` shows of ``addresses`` at a head newer than the last looked at
        (None: no new head, or the chain did not answer; looked at again next pass)."""
        try:
            head = await client.head()
            if self._heads.get((environment, chain)) == head:
                return None
            typed: list[Address] = [resolve_address(a, chain.value, environment) for a in addresses]
            observations: list[Observation] = await client.observe(typed, with_keys=False)  # nonces suffice
        except ChainError as exc:
            log.warning("%s %s not followed this pass: %s", environment.value, chain.value, type(exc).__name__)
            return None
        self._heads[(environment, chain)] = head
        return {
            o.address.lower(): Seen(chain.value, o.height or head, o.exposure.key_on_chain, o.balance or 0)
            for o in observations
        }

    def start(self) -> None:
        """Follow on the running event loop every ``poll_seconds`` (once; 0: never)."""
        if self._poll > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._forever())

    async def _forever(self) -> None:
        while True:
            try:
                await self.poll_once()
            except Exception as exc:  # noqa: BLE001 - the store or a chain is down: next pass
                log.warning("chain-head follower pass failed: %s", type(exc).__name__)
            await asyncio.sleep(self._poll)

    async def aclose(self) -> None:
        """Stop following and give the lease back (another node takes over at once)."""
        if self._task is not None:
            await stop_task(self._task)
            self._task = None
            try:
                await self._leases.release_lease(LEASE_KEY, self._holder)
            except Exception as exc:  # noqa: BLE001 - it expires on its own
                log.warning("chain-follower lease not released: %s", type(exc).__name__)
