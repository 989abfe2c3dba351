"""Public-key exposure levels of Bitcoin outputs.

The levels and rules are those of the draft BIP "Output Public Key Exposure Classification"
(v0.6.0; bitcoin/bips PR #2294).

Two questions, two functions:

- ``output_exposure``: the level of an output type when nothing was ever disclosed
  (the draft's type table; needs no chain state).
- ``exposure_with_history``: the level once what is known about earlier spends of the same
  script is taken into account (full history, an aggregate spent count, or nothing).

Both fail closed: data that cannot separate two levels gives the more exposed one, unknown
types are ``UNDETERMINED`` and missing history is never read as "not exposed".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType

from chains.bitcoin.script import OutputType, classify_script
from chains.bitcoin.spend import InputDisclosure
from chains.observation import Exposure

#: Types whose scriptPubKey itself holds a usable public key: exposed whatever the history.
STRUCTURALLY_EXPOSED = frozenset((OutputType.P2PK, OutputType.P2MS, OutputType.P2TR))

#: Types that commit to keys by hash: exposed only once a spend (or reuse) publishes the key.
HASH_COMMITTED = frozenset((OutputType.P2PKH, OutputType.P2SH, OutputType.P2WPKH, OutputType.P2WSH, OutputType.P2MR))

_TYPE_TABLE = MappingProxyType(
    {kind: Exposure.EXPOSED_AT_REST for kind in STRUCTURALLY_EXPOSED}
    | {kind: Exposure.EXPOSED_ON_SPEND for kind in HASH_COMMITTED}
)


def output_exposure(output_type: OutputType) -> Exposure:
    """The level of an output of this type with no prior disclosure (the draft's type table).

    Everything outside the table (unknown witness versions or lengths, non-standard scripts,
    OP_RETURN, for which the draft has no row) is ``UNDETERMINED``: never ``NOT_EXPOSED``,
    which the draft reserves for future post-quantum output types.
    """
    return _TYPE_TABLE.get(output_type, Exposure.UNDETERMINED)


def script_exposure(script_pubkey: bytes) -> Exposure:
    """The level of an output paying ``script_pubkey``, with no prior disclosure."""
    return output_exposure(classify_script(script_pubkey).output_type)


@dataclass(frozen=True, slots=True)
class SpendHistory:
    """What is known about confirmed spends of the outputs paying one script.

    - ``spends``: every confirmed spend, when the complete history was retrieved; None otherwise.
    - ``spent_count``: an aggregate count of confirmed spent outputs (e.g. Esplora's
      ``chain_stats.spent_txo_count``), enough on its own; None when unavailable.
    - ``key_disclosed_elsewhere``: a key the script commits to is known to be public from
      another output or spend (key reuse; see ``script_commits_to_key``).
    """

    spends: tuple[InputDisclosure, ...] | None = None
    spent_count: int | None = None
    key_disclosed_elsewhere: bool = False

    def __post_init__(self) -> None:
        if self.spent_count is not None and self.spent_count < 0:
            raise ValueError(f"spent_count must not be negative, got {self.spent_count}")
        if self.spends is not None and self.spent_count not in (None, len(self.spends)):
            raise ValueError(
                f"spent_count {self.spent_count} contradicts a complete history of {len(self.spends)} spends"
            )

    @classmethod
    def complete(cls, spends: Iterable[InputDisclosure]) -> SpendHistory:
        """Every confirmed spend of the script was retrieved (an empty list: never spent)."""
        spends = tuple(spends)
        return cls(spends=spends, spent_count=len(spends))

    @classmethod
    def counted(cls, spent_count: int) -> SpendHistory:
        """Only an aggregate count of confirmed spent outputs is known (the history may be truncated)."""
        return cls(spent_count=spent_count)


def exposure_with_history(output_type: OutputType, history: SpendHistory) -> Exposure:
    """The level of an output of this type given what is known about spends of its script.

    The draft's rules: P2PK, bare multisig and P2TR need no history (exposed at rest); a key
    known to be public elsewhere exposes the output at rest; with the complete history the
    level is at rest as soon as one spend published key material; with only a count, a count
    above zero sets exposed-at-rest as a floor; with neither, the level is ``UNDETERMINED``.
    """
    if output_type in STRUCTURALLY_EXPOSED or history.key_disclosed_elsewhere:
        return Exposure.EXPOSED_AT_REST
    if history.spends is not None:
        if any(spend.discloses_key_material for spend in history.spends):
            return Exposure.EXPOSED_AT_REST
        return output_exposure(output_type)
    if history.spent_count is None:
        return Exposure.UNDETERMINED
    return Exposure.EXPOSED_AT_REST if history.spent_count > 0 else output_exposure(output_type)
