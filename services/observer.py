"""Reading chains for scans: single-flight fetches, and the key family of an address.

``ChainObserver`` is shared by the wallet scan and the key scan. Identical fetches arriving
together share one upstream call; the chain of the scanned address must answer (its
failure is the scan's SCAN_004), while the other chains of the key's family are waited for
at most ``wait_seconds`` each, concurrently, and reported unavailable when they fail or are
late: a sibling chain that is down never fails a scan, it makes the verdict incomplete.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from chains.clients import ChainClient
from chains.clients.transport import shared_deadline
from chains.codecs.address import Address
from chains.environment import Environment
from chains.errors import ChainError
from chains.evidence import Coverage, with_family
from chains.keys import key_hash, siblings
from chains.observation import Exposure, Observation
from chains.registry import CHAINS, Chain, Family
from services.exposure_index import NO_INDEX_LIMIT, ExposureIndex, IndexAnswer, with_index

_KEY_HASH_FAMILIES = frozenset({Family.BITCOIN, Family.COSMOS})

_Fetch = Callable[[], Awaitable[list[Observation]]]


@runtime_checkable
class ScriptClient(Protocol):
    """A chain client that can also observe raw output scripts (Esplora's script hashes)."""

    async def observe_scripts(self, scripts: Sequence[bytes]) -> list[Observation]:
        """One observation per script, same order; ``ChainUnavailable`` on upstream failure."""
        ...


def limits_of(
    observation: Observation, index: IndexAnswer | None = None, bitcoin_height: int | None = None
) -> tuple[str, ...]:
    """What the verdict on ``observation`` cannot see: for a Bitcoin or Cosmos key hash not
    known exposed, revelations only the chain-wide Bitcoin index shows, past what ``index``
    (None: no index consulted) covers; Bitcoin's own data reaches ``bitcoin_height``."""
    family = CHAINS[Chain(observation.chain)].family
    if family not in _KEY_HASH_FAMILIES or observation.exposure is Exposure.EXPOSED_AT_REST:
        return ()
    limit = NO_INDEX_LIMIT if index is None else index.limit(bitcoin_height)
    return () if limit is None else (limit,)


class ChainObserver:
    """Observations of addresses and scripts through one environment's chain clients."""

    def __init__(
        self,
        clients: Mapping[Environment, Mapping[Chain, ChainClient]],
        family_chains: Collection[str],
        wait_seconds: float,
        index: ExposureIndex | None = None,
    ) -> None:
        """``family_chains`` are the chain names sibling lookups may use; ``wait_seconds``
        bounds each sibling chain's answer; ``index`` is the Bitcoin exposure index, if any."""
        self._clients = clients
        self._family_chains = frozenset(family_chains)
        self._wait = wait_seconds
        self.index = index
        self._inflight: dict[Hashable, asyncio.Task[list[Observation]]] = {}

    def client(self, env: Environment, chain: Chain) -> ChainClient:
        """The environment's client of ``chain`` (for what only one client type offers, such
        as a wallet's unspent outputs)."""
        return self._clients[env][chain]

    def allowed(self, chain: Chain) -> bool:
        """True when scans may look up ``chain`` for the siblings of a key."""
        return chain.value in self._family_chains

    async def observe(self, env: Environment, chain: Chain, addresses: Sequence[Address]) -> list[Observation]:
        """The chain's observations of ``addresses`` (same order); raises ``ChainError``."""
        key = (env, chain.value, "address", tuple(str(a) for a in addresses))
        return await self._shared(key, lambda: self._clients[env][chain].observe(addresses))

    async def observe_scripts(self, env: Environment, scripts: Sequence[bytes]) -> list[Observation] | None:
        """Bitcoin observations of raw output scripts, or None when the environment's
        Bitcoin source cannot look scripts up; raises ``ChainError``."""
        client = self._clients[env][Chain.BITCOIN]
        if not isinstance(client, ScriptClient):
            return None
        key = (env, Chain.BITCOIN.value, "script", tuple(scripts))
        return await self._shared(key, lambda: client.observe_scripts(scripts))

    async def bounded(self, fetch: Awaitable[list[Observation] | None]) -> list[Observation] | None:
        """``fetch``'s answer, or None when it fails with a ``ChainError`` or takes longer
        than the sibling wait (the shared fetch itself goes on for its other waiters)."""
        try:
            return await asyncio.wait_for(fetch, self._wait)
        except (ChainError, TimeoutError):
            return None

    async def family(self, env: Environment, target: Address) -> tuple[Observation, Coverage]:
        """``target`` observed with the siblings of its key family (``chains.keys.siblings``)
        on the allowed chains, concurrently, merged by ``chains.evidence.with_family``, and
        what the verdict saw. The target's own chain failing raises ``ChainError``."""
        groups: dict[Chain, list[Address]] = {}
        for sibling in siblings(target):
            groups.setdefault(sibling.chain, []).append(sibling)
        same_chain = groups.pop(target.chain, [])
        skipped = [chain for chain in groups if not self.allowed(chain)]
        pending = {
            chain: asyncio.ensure_future(self.bounded(self.observe(env, chain, addresses)))
            for chain, addresses in groups.items()
            if self.allowed(chain)
        }
        try:
            own, *same = await self.observe(env, target.chain, [target, *same_chain])
        except BaseException:
            for task in pending.values():
                task.cancel()
            raise
        answers = dict(zip(pending, await asyncio.gather(*pending.values()), strict=True))
        found = [*same, *(o for answer in answers.values() if answer is not None for o in answer)]
        merged = with_family(own, found)
        hashed = key_hash(target)
        index = None if self.index is None or hashed is None else await self.index.revealed(env, [hashed])
        if index is not None:
            merged = with_index(merged, index)
        heights = [o.height for o in (own, *found) if o.chain == Chain.BITCOIN.value and o.height is not None]
        unavailable = {*skipped, *(chain for chain, answer in answers.items() if answer is None)}
        coverage = Coverage(
            checked=tuple(c.value for c in CHAINS if c is target.chain or (c in answers and c not in unavailable)),
            unavailable=tuple(c.value for c in CHAINS if c in unavailable),
            limits=limits_of(merged, index, min(heights, default=None)),
            index_height=None if index is None else index.complete_to,
        )
        return merged, coverage

    async def _shared(self, key: Hashable, start: _Fetch) -> list[Observation]:
        """Run ``start()`` once for identical requests arriving together. The fetch runs in
        its own task, so a caller that goes away (its client disconnected, or a sibling wait
        ran out) does not cancel it for the others; the whole fetch shares one retry budget."""
        fetch = self._inflight.get(key)
        if fetch is None:
            fetch = asyncio.create_task(self._run(start))
            self._inflight[key] = fetch
            fetch.add_done_callback(lambda done: self._fetched(key, done))
        return await asyncio.shield(fetch)

    @staticmethod
    async def _run(start: _Fetch) -> list[Observation]:
        with shared_deadline():
            return await start()

    def _fetched(self, key: Hashable, done: asyncio.Task[list[Observation]]) -> None:
        del self._inflight[key]
        if not done.cancelled():
            done.exception()  # retrieved: each waiter re-raises it, and nobody may be left waiting
