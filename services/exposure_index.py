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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from chains.environment import Environment
from chains.observation import EvidenceKind, Exposure, ExposureEvidence, Observation
from chains.registry import Chain
from storage.bitcoin_index import BitcoinIndexStore, ChainState

#: The index networks each environment's scans read (test keys scan the public test networks).
NETWORKS: Mapping[Environment, tuple[str, ...]] = MappingProxyType(
    {Environment.LIVE: ("mainnet",), Environment.TEST: ("testnet3", "testnet4", "signet", "regtest")}
)

#: What a "not exposed" verdict on a key hash cannot see when no index covers the chain.
NO_INDEX_LIMIT = (
    "bitcoin-index: a key revealed only in a P2PK or bare-multisig output, under its other SEC "
    "encoding, or in another script is not visible through address lookups"
)


@dataclass(frozen=True, slots=True)
class IndexAnswer:
    """The index's evidence for some key hashes, and how far the index reaches: every
    block 0..``complete_to`` is indexed (None: no index, or one not reaching genesis)."""

    evidence: tuple[ExposureEvidence, ...]
    indexed: bool
    complete_to: int | None

    def limit(self, observed_height: int | None) -> str | None:
        """What a verdict resting on this answer cannot see, None when nothing: a key revealed
        in another form past the index's complete height (the scanned chain's own data
        reaches ``observed_height``)."""
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
    """Index lookups for scans, off the event loop (DuckDB over Parquet takes milliseconds)."""

    def __init__(self, store: BitcoinIndexStore) -> None:
        self._store = store

    def _revealed(self, env: Environment, hashes: Sequence[bytes]) -> IndexAnswer:
        networks = [n for n in NETWORKS[env] if n in self._store.networks()]
        if not networks:
            return IndexAnswer((), indexed=False, complete_to=None)
        hits = self._store.lookup(networks, hashes)
        evidence = tuple(
            dict.fromkeys(
                ExposureEvidence(Chain.BITCOIN.value, hit.pubkey.hex(), EvidenceKind.INDEX, hit.txid, hit.height)
                for hit in hits
            )
        )
        complete_to = _completeness([self._store.chain_state(n) for n in networks])
        return IndexAnswer(evidence, indexed=True, complete_to=complete_to)

    async def revealed(self, env: Environment, hashes: Sequence[bytes]) -> IndexAnswer:
        """What the index of ``env``'s networks holds for keys with these HASH160s (the
        earliest revelations of each, the key hex as ``address``)."""
        return await asyncio.to_thread(self._revealed, env, hashes)
