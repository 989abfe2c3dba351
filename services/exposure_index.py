"""What scans learn from the chain-wide Bitcoin exposure index (``storage.bitcoin_index``).

A P2PKH, P2WPKH or Cosmos address commits to the HASH160 of one key; the index holds every
key Bitcoin ever revealed under both of its encodings' hashes (and, for x-only keys, both
parities), so one lookup answers "was this key shown anywhere: in a P2PK or multisig output,
by a spend of another form, under its other encoding?". A hit is evidence of kind ``index``
naming the revealing transaction; ``complete_to`` says up to which height the index has
every block, so a verdict states what it could not see after it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from chains.environment import Environment
from chains.observation import EvidenceKind, Exposure, ExposureEvidence, Observation
from chains.registry import Chain
from storage.bitcoin_index import BitcoinIndexStore, ChainState
from storage.errors import IndexUnreadable

#: The index networks each environment's scans read (test keys scan the public test networks).
NETWORKS: Mapping[Environment, tuple[str, ...]] = MappingProxyType(
    {Environment.LIVE: ("mainnet",), Environment.TEST: ("testnet3", "testnet4", "signet", "regtest")}
)

#: What a "not exposed" verdict on a key hash cannot see when no index covers the chain.
NO_INDEX_LIMIT = (
    "bitcoin-index: a key revealed only in a P2PK or bare-multisig output, under its other SEC "
    "encoding, or in another script is not visible through address lookups"
)


UNREADABLE_LIMIT = (
    "bitcoin-index: the index could not be read; a key revealed only in a P2PK or bare-multisig "
    "output, under its other SEC encoding, or in another script is not visible"
)
_log = logging.getLogger("qday.exposure_index")


@dataclass(frozen=True, slots=True)
class IndexAnswer:
    """The index's evidence for some key hashes, and how far the index reaches: every
    block 0..``complete_to`` is indexed (None: no index, or one not reaching genesis)."""

    evidence: tuple[ExposureEvidence, ...]
    indexed: bool
    complete_to: int | None
    unreadable: bool = False

    def with_evidence(
        self, found: Mapping[bytes, tuple[ExposureEvidence, ...]], hashes: Sequence[bytes]
    ) -> IndexAnswer:
        """This state with the evidence ``found`` holds for ``hashes`` (one key's hashes), each
        revelation once."""
        evidence = tuple(dict.fromkeys(e for h in hashes for e in found.get(h, ())))
        return dataclasses.replace(self, evidence=evidence)

    def limit(self, observed_height: int | None) -> str | None:
        """What a verdict resting on this answer cannot see, None when nothing: a key revealed
        in another form past the index's complete height (the scanned chain's own data
        reaches ``observed_height``), or anywhere when the index could not be read."""
        if self.unreadable:
            return UNREADABLE_LIMIT
        if not self.indexed:
            return NO_INDEX_LIMIT
        if self.complete_to is None:
            return (
                "bitcoin-index: the index does not reach back to the genesis block; a key revealed in "
                "another form in a block it lacks is not visible"
            )
        if observed_height is None or observed_height > self.complete_to:
            return (
                f"bitcoin-index: complete to height {self.complete_to}; a key revealed in another form "
                "in a later block is not visible"
            )
        return None


def with_index(observation: Observation, answer: IndexAnswer) -> Observation:
    """``observation`` with the index's evidence added (revelations it already cites by
    transaction are not repeated); any hit makes the key exposed at rest (the draft BIP's
    "key disclosed elsewhere"). Never lowers the level."""
    cited = {e.txid for e in observation.evidence if e.txid is not None}
    new = tuple(e for e in answer.evidence if e.txid not in cited)
    if not answer.evidence:
        return observation
    return dataclasses.replace(observation, exposure=Exposure.EXPOSED_AT_REST, evidence=observation.evidence + new)


def _completeness(states: Sequence[ChainState | None]) -> int | None:
    heights = [s.complete_to for s in states if s is not None]
    if not heights or None in heights or len(heights) < len(states):
        return None
    return min(h for h in heights if h is not None)


class ExposureIndex:
    """Index lookups for scans and pipelines (DuckDB over Parquet: milliseconds per lookup)."""

    def __init__(self, store: BitcoinIndexStore) -> None:
        self._store = store

    def _networks(self, env: Environment) -> list[str]:
        present = self._store.networks()
        return [n for n in NETWORKS[env] if n in present]

    def state(self, env: Environment) -> IndexAnswer:
        """How far ``env``'s index reaches, without evidence (what a verdict needs to say
        what it could not see when nothing was found)."""
        return self._state(self._networks(env))

    def _state(self, networks: Sequence[str]) -> IndexAnswer:
        if not networks:
            return IndexAnswer((), indexed=False, complete_to=None)
        return IndexAnswer((), indexed=True, complete_to=_completeness([self._store.chain_state(n) for n in networks]))

    def evidence_by_hash(self, env: Environment, hashes: Sequence[bytes]) -> dict[bytes, tuple[ExposureEvidence, ...]]:
        """The index's evidence for each of ``hashes`` that it holds (the earliest
        revelations; the key, hex, as ``address``). Blocking: one DuckDB query."""
        return self._evidence(self._networks(env), hashes)

    def _evidence(self, networks: Sequence[str], hashes: Sequence[bytes]) -> dict[bytes, tuple[ExposureEvidence, ...]]:
        found: dict[bytes, dict[ExposureEvidence, None]] = {}
        for hit in self._store.lookup(networks, hashes) if networks else ():
            evidence = ExposureEvidence(Chain.BITCOIN.value, hit.pubkey.hex(), EvidenceKind.INDEX, hit.txid, hit.height)
            found.setdefault(hit.hash, {})[evidence] = None
        return {h: tuple(e) for h, e in found.items()}

    def _lookup(
        self, env: Environment, hashes: Sequence[bytes]
    ) -> tuple[IndexAnswer, dict[bytes, tuple[ExposureEvidence, ...]]]:
        networks = self._networks(env)  # one listing of the index for the state and the lookup
        state = self._state(networks)
        if not state.indexed:
            return state, {}
        try:
            return state, self._evidence(networks, hashes)
        except IndexUnreadable:
            _log.exception("Bitcoin exposure index lookup failed; the verdict states the index was not read")
            return dataclasses.replace(state, unreadable=True), {}

    def _revealed(self, env: Environment, hashes: Sequence[bytes]) -> IndexAnswer:
        state, found = self._lookup(env, hashes)
        return state.with_evidence(found, hashes)

    async def revealed(self, env: Environment, hashes: Sequence[bytes]) -> IndexAnswer:
        """What the index of ``env``'s networks holds for keys with these HASH160s (off the
        event loop). An index that cannot be read never fails the scan: the answer says so
        (``unreadable``), and its limit is listed."""
        return await asyncio.to_thread(self._revealed, env, hashes)

    async def revealed_by_hash(
        self, env: Environment, hashes: Sequence[bytes]
    ) -> tuple[IndexAnswer, dict[bytes, tuple[ExposureEvidence, ...]]]:
        """One lookup for many keys (a wallet's): the index's state, and its evidence per hash
        found (``IndexAnswer.with_evidence`` makes each key's answer). Off the event loop; an
        unreadable index is stated as in ``revealed``."""
        return await asyncio.to_thread(self._lookup, env, hashes)
