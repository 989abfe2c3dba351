"""Following chain heads so that a watched key revealed in block N is alerted within one
block interval plus delivery (issue 19, detection).

One node at a time follows (a lease in the store, renewed each pass; another node takes
over within ``LEASE_TTL`` when it dies); a node with nothing followable watched only reads.
Each pass, for each environment with watched addresses, it asks each followed chain for its
head (one call: ``eth_blockNumber``, Esplora's ``/blocks/tip/height``); on a new head it
observes the watched addresses of that chain:

- EVM: every watched EVM address on every followed EVM chain, in JSON-RPC batches (balance,
  nonce, code). An EVM key is one key on every EVM chain, so a nonce above zero on any of
  them exposes the address wherever it is watched (its key family).
- Bitcoin: each watched Bitcoin address (Esplora's stats and history): a spend that showed
  its key, an output type that holds it (P2PK, P2TR), or a history the server would not
  serve in full (``UNDETERMINED``: reported exposed, failing closed).

A balance is always its watched chain's own. What changed since the tenant's last seen state
is stored with its events (``key.exposed``, ``balance.changed``) in one transaction, with the
evidence the chain gave (transaction ids where it knows them).

An address seen changed is then rescanned in the background (``Rescore``: its key family,
price and score) for tenants with a webhook subscribed to ``risk.changed``, stored with the
result-over-result events of ``services.daily_alerts``: ``risk.changed`` when its W-level
moved. The first sight of a watched address records it
without an event: alerts report changes after an address is watched (a scan reports its
state then). The daily rescoring alerts what no follower follows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from chains.clients.base import ChainClient
from chains.clients.esplora import EsploraClient
from chains.clients.evm import EvmClient
from chains.codecs.address import Address
from chains.environment import Environment
from chains.errors import ChainError
from chains.evidence import evidence_of
from chains.observation import Observation
from chains.registry import CHAINS, Chain, Family
from core.clock import Clock
from core.ids import new_id
from scoring.result import format_amount
from services.daily_alerts import daily_alerts
from services.offload import stop_task
from services.scans import resolve_address
from services.webhooks import new_event
from storage.sql_alert_state import AlertState, SqlAlertStateStore, Watcher
from storage.sql_scans import SqlScanStore
from storage.webhook_records import EventType, OutboxEvent, ResultAlerts

log = logging.getLogger("qday.alerts")

#: The clients whose chains are followed (a head to ask, addresses to observe).
Followable = EvmClient | EsploraClient

#: Rescoring scans of changed addresses at once (each observes the key family and a price).
RESCORE_CONCURRENCY = 4


class Rescore(Protocol):
    """A fresh scan of one watched address, stored with ``alerts``' events
    (``services.scans.ScanService.rescore``)."""

    async def __call__(
        self, account_id: str, environment: Environment, chain: str, address: str, alerts: ResultAlerts
    ) -> object:
        """Scan and store; raises what a scan raises."""
        ...


#: The store lease only its holder follows heads under.
LEASE_KEY = "alerts:chain-follower"
#: How long the lease lasts unless renewed: another node takes over within this.
LEASE_TTL = timedelta(seconds=10)
#: How long stopping waits to give the lease back before leaving it to expire.
RELEASE_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Seen:
    """An address as one chain showed it at one height, with what showed its key (the
    chain is the key it is filed under in ``changes``' ``seen``)."""

    height: int
    exposed: bool
    balance: int
    evidence: tuple[dict[str, Any], ...] = ()


def seen_of(observation: Observation, head: int) -> Seen:
    """What follows from one observation: key on chain (failing closed on ``UNDETERMINED``),
    balance, and the evidence, each item at its block height or else the height seen at."""
    height = observation.height or head
    evidence = tuple(e.to_dict() | {"blockHeight": e.block_height or height} for e in evidence_of(observation))
    return Seen(height, observation.exposure.key_on_chain, observation.balance or 0, evidence)


def shares_key(seen_on: str, watched_on: str) -> bool:
    """Whether a key seen on chain ``seen_on`` is the key of an address watched on
    ``watched_on``: on the same chain, or on two EVM chains (one key for all of them)."""
    if seen_on == watched_on:
        return True
    return CHAINS[Chain(seen_on)].family is Family.EVM and CHAINS[Chain(watched_on)].family is Family.EVM


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
    chain → watched address → what that chain showed. A key on chain on any chain of the
    key family exposes the address everywhere; balances are the watched chain's."""
    states: list[AlertState] = []
    events: list[OutboxEvent] = []
    for watcher in watchers:
        address = watcher.address
        sightings = [
            by_address[address]
            for chain, by_address in seen.items()
            if address in by_address and shares_key(chain, watcher.chain)
        ]
        own = seen.get(watcher.chain, {}).get(address)
        before = last.get((watcher.account_id, watcher.chain, watcher.address))
        if own is not None:
            balance, height = own.balance, own.height
        elif before is not None and sightings:  # the watched chain did not answer: its last balance stands
            balance, height = before.balance, before.block_height
        else:
            continue  # nothing seen, or a first sight without the watched chain's own balance
        revealing = [s for s in sightings if s.exposed]
        if before is not None and before.exposed:  # a key once on chain stays there
            exposed, evidence = True, before.evidence
        else:
            exposed = bool(revealing)
            evidence = tuple(item for s in revealing for item in s.evidence)
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
    """Follows EVM and Bitcoin chain heads for watched addresses and raises alerts (see
    module doc)."""

    def __init__(
        self,
        alerts: SqlAlertStateStore,
        leases: SqlScanStore,
        clients: Mapping[Environment, Mapping[Chain, ChainClient]],
        family_chains: Collection[str],
        clock: Clock,
        on_events: Callable[[], None],
        poll_seconds: float,
        rescore: Rescore | None = None,
    ) -> None:
        """``rescore`` (``ScanService.rescore``): a fresh scan of an address the follower saw
        change, stored with the result-over-result events (``risk.changed`` at the block);
        None: W-level changes are left to the daily rescoring."""
        self._alerts = alerts
        self._leases = leases
        self._clients = clients
        self._family = frozenset(family_chains)
        self._clock = clock
        self._on_events = on_events
        self._poll = poll_seconds
        self._holder = new_id("follower")
        self._holding = False
        self._heads: dict[tuple[Environment, Chain], int] = {}
        self._task: asyncio.Task[None] | None = None
        self._rescore = rescore
        self._rescoring: dict[tuple[Environment, str, str, str], asyncio.Task[None]] = {}
        self._rescore_slots = asyncio.Semaphore(RESCORE_CONCURRENCY)

    def _followed(self, environment: Environment) -> dict[Chain, Followable]:
        return {c: client for c, client in self._clients[environment].items() if isinstance(client, Followable)}

    async def poll_once(self) -> int:
        """One pass over every environment; the events raised. Nothing when no address of a
        followed chain is watched (read only: an idle node writes nothing) or another node holds the lease."""
        now = self._clock.now()
        chains = {e: [c.value for c in self._followed(e)] for e in Environment}
        for environment, names in chains.items():
            if await self._alerts.any_watched(environment, names):
                break
        else:
            return 0
        if await self._leases.take_lease(LEASE_KEY, self._holder, now, LEASE_TTL) is not None:
            return 0  # another node follows
        self._holding = True
        raised = 0
        for environment, names in chains.items():
            if watchers := await self._alerts.watchers(environment, names):
                raised += await self._follow(environment, watchers, now)
        if raised:
            self._on_events()
        return raised

    async def _follow(self, environment: Environment, watchers: Sequence[Watcher], now: datetime) -> int:
        watched_chains = {w.chain for w in watchers}
        evm_addresses = sorted({w.address for w in watchers if CHAINS[Chain(w.chain)].family is Family.EVM})
        seen: dict[str, dict[str, Seen]] = {}
        for chain, client in self._followed(environment).items():
            if isinstance(client, EvmClient):  # every EVM address: a nonce here exposes it everywhere
                addresses = evm_addresses if chain.value in self._family or chain.value in watched_chains else []
            else:
                addresses = sorted({w.address for w in watchers if w.chain == chain.value})
            if addresses and (found := await self._look(environment, chain, client, addresses)) is not None:
                seen[chain.value] = found
        if not seen:
            return 0
        last = await self._alerts.states(environment)
        states, events = changes(environment, watchers, last, seen, now)
        if states or events:
            await self._alerts.record(environment, states, events)
        changed = [s for s in states if (s.account_id, s.chain, s.address) in last]  # not first sights
        if changed and self._rescore is not None:
            listening = await self._alerts.listening(environment, EventType.RISK_CHANGED)
            for state in changed:
                if state.account_id in listening:
                    self._rescore_later(self._rescore, environment, state)
        return len(events)

    def _rescore_later(self, rescore: Rescore, environment: Environment, state: AlertState) -> None:
        """Rescore the changed address in the background (a scan with key recovery and
        prices: never on the pass that follows the heads); once per address at a time."""
        key = (environment, state.account_id, state.chain, state.address)
        if key in self._rescoring:
            return
        task = asyncio.get_running_loop().create_task(self._rescore_one(rescore, environment, state))
        self._rescoring[key] = task
        task.add_done_callback(lambda _: self._rescoring.pop(key, None))

    async def _rescore_one(self, rescore: Rescore, environment: Environment, state: AlertState) -> None:
        async with self._rescore_slots:
            try:
                alerts = daily_alerts(self._clock.now)
                await rescore(state.account_id, environment, state.chain, state.address, alerts)
            except Exception as exc:  # noqa: BLE001 - the daily rescoring diffs it instead
                log.warning("%s %s not rescored after a change: %s", environment.value, state.chain, type(exc).__name__)
                return
        self._on_events()

    async def _look(
        self, environment: Environment, chain: Chain, client: Followable, addresses: Sequence[str]
    ) -> dict[str, Seen] | None:
        """What ``chain`` shows of ``addresses`` at a head newer than the last looked at
        (None: no new head, or the chain did not answer; looked at again next pass)."""
        try:
            if isinstance(client, EvmClient):
                head = await client.head()
            else:
                head = await client.tip_height()
            if self._heads.get((environment, chain)) == head:
                return None
            typed: list[Address] = [resolve_address(a, chain.value, environment) for a in addresses]
            if isinstance(client, EvmClient):
                observations = await client.observe(typed, with_keys=False)  # nonces suffice
            else:
                observations = await client.observe(typed)
        except ChainError as exc:
            log.warning("%s %s not followed this pass: %s", environment.value, chain.value, type(exc).__name__)
            return None
        self._heads[(environment, chain)] = head
        return {address: seen_of(o, head) for address, o in zip(addresses, observations, strict=True)}

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
        await stop_task(self._task)
        self._task = None
        for task in list(self._rescoring.values()):
            await stop_task(task)
        if not self._holding:
            return
        self._holding = False
        try:  # bounded: with the store down, shutdown must not wait for its connection timeout
            await asyncio.wait_for(self._leases.release_lease(LEASE_KEY, self._holder), RELEASE_SECONDS)
        except Exception as exc:  # noqa: BLE001 - it expires on its own within LEASE_TTL
            log.warning("chain-follower lease not released: %s", type(exc).__name__)
