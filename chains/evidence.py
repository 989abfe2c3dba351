"""Exposure as a property of the key: evidence, family merge and coverage (pure).

A key revealed once is revealed for every address it controls (``chains.keys``). A scan
observes the address and its siblings; ``evidence_of`` says what each observation shows
revealed, ``with_family`` applies the siblings' evidence to the scanned address (the draft
BIP's rule: a key known to be public elsewhere exposes the output at rest), and
``Coverage`` records which chains were seen and what could not be.

One exception to sharing: a P2TR output shows the *tweaked* output key Q = P + tG, not
the internal key P, and P cannot be computed from Q (the tweak t hashes P). Breaking Q
spends that output only, so a P2TR observation's evidence stays with its own address.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from chains.codecs.base58 import b58decode, b58encode
from chains.observation import AccountType, EvidenceKind, Exposure, ExposureEvidence, Observation
from chains.registry import CHAINS, Chain, Family

#: Address types whose evidence reveals a key other than the family's (see the module docstring).
_OWN_KEY_ONLY = frozenset({"p2tr"})

#: Bitcoin output types whose key sits in the output script itself.
_KEY_IN_OUTPUT = frozenset({"p2pk", "p2ms", "p2tr"})

_COUNTED_SIGNATURES = frozenset({Family.EVM, Family.TRON})
"""Families whose account state counts signed transactions (a nonce or its equivalent)."""


def evidence_of(observation: Observation) -> tuple[ExposureEvidence, ...]:
    """What ``observation`` shows revealed its key: the client's own evidence (with
    transaction ids) when it gave any, else what its fields imply. A key-controlled
    account that signed (a nonce, or a key the chain stored) gives ``nonce`` or
    ``signature``; an address that is its key, or an output showing its key, ``output``;
    a Bitcoin script known exposed by a spend, ``spend``. Empty when nothing revealed it
    (an ``UNDETERMINED`` level is not evidence: it is reported as exposed, failing closed,
    but nothing was seen)."""
    if observation.evidence:
        return observation.evidence
    if not observation.has_activity or observation.account_type in (AccountType.CONTRACT, AccountType.PDA):
        return ()
    family = CHAINS[Chain(observation.chain)].family

    def one(kind: EvidenceKind) -> tuple[ExposureEvidence, ...]:
        return (ExposureEvidence(observation.chain, observation.address, kind),)

    if family is Family.BITCOIN:
        if observation.exposure is not Exposure.EXPOSED_AT_REST:
            return ()
        return one(EvidenceKind.OUTPUT if observation.address_type in _KEY_IN_OUTPUT else EvidenceKind.SPEND)
    if family is Family.SOLANA:
        if observation.public_key is not None and observation.public_key != b58decode(observation.address):
            # a token account: its owner's key controls it, and that key is the owner's address
            owner = b58encode(observation.public_key)
            return (ExposureEvidence(observation.chain, owner, EvidenceKind.OUTPUT),)
        return one(EvidenceKind.OUTPUT)  # the address is the key
    if observation.outbound_tx_count > 0:
        return one(EvidenceKind.NONCE if family in _COUNTED_SIGNATURES else EvidenceKind.SIGNATURE)
    if observation.public_key is not None:
        return one(EvidenceKind.SIGNATURE)  # the chain stored the key (a Cosmos account's pub_key)
    return ()


def shared_evidence(observations: Iterable[Observation]) -> tuple[ExposureEvidence, ...]:
    """The evidence of ``observations`` that reveals their common key (P2TR output keys
    excluded, see the module docstring), without repeats, in order."""
    found: dict[ExposureEvidence, None] = {}
    for observation in observations:
        if observation.address_type not in _OWN_KEY_ONLY:
            found.update(dict.fromkeys(evidence_of(observation)))
    return tuple(found)


def with_family(target: Observation, siblings: Sequence[Observation]) -> Observation:
    """``target`` with its evidence filled in and its siblings' added; a key revealed by a
    sibling raises the level to ``EXPOSED_AT_REST`` (the draft BIP's "key disclosed
    elsewhere"). The level is only ever raised: no sibling makes an address safer."""
    own = evidence_of(target)
    shared = tuple(e for e in shared_evidence(siblings) if e not in own)
    exposure = Exposure.EXPOSED_AT_REST if shared else target.exposure
    return dataclasses.replace(target, exposure=exposure, evidence=own + shared)


@dataclass(frozen=True, slots=True)
class Coverage:
    """What a verdict saw: the chains ``checked``, the chains of the key's family that
    were ``unavailable`` (down, too slow, or not configured), and ``limits``: revelations
    no configured source can show (e.g. a Bitcoin key revealed only in a P2PK output,
    which needs the chain-wide index). ``index_height``: the height up to which the Bitcoin
    exposure index that answered holds every block (None when none was consulted, or it does
    not reach genesis). ``complete`` only when nothing was missed."""

    checked: tuple[str, ...]
    unavailable: tuple[str, ...] = ()
    limits: tuple[str, ...] = ()
    index_height: int | None = None

    @property
    def complete(self) -> bool:
        """True when a "not exposed" verdict saw every place the key could have shown."""
        return not self.unavailable and not self.limits

    def to_dict(self) -> dict[str, Any]:
        """The API's ``coverage`` object (``bitcoinIndexHeight`` only when an index answered
        that holds every block from genesis up to it)."""
        found = {"checked": list(self.checked), "unavailable": list(self.unavailable), "limits": list(self.limits)}
        return found if self.index_height is None else {**found, "bitcoinIndexHeight": self.index_height}
