"""The Bitcoin supply exposed to a quantum attacker, for one environment: the supply tables
(``storage.bitcoin_supply``, written by ``qday bitcoin ingest-utxo-snapshot``) of the
networks the environment scans (``services.exposure_index.NETWORKS``: mainnet in live, the
test networks in test), each row with the level of the draft BIP "Output Public Key Exposure
Classification", the totals, and how far the environment's exposure index reaches.

Public data, the same for every account. Blocking (small Parquet reads): callers run it off
the event loop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from chains.bitcoin.exposure import output_exposure
from chains.bitcoin.script import OutputType
from chains.environment import Environment
from chains.observation import Exposure
from services.exposure_index import NETWORKS, ExposureIndex, IndexAnswer
from storage.bitcoin_index import BitcoinIndexStore
from storage.bitcoin_supply import SupplyCount, SupplyUnreadable, read_supply

_log = logging.getLogger("qday.supply_exposure")

#: The supply table's ``cause`` of outputs whose key no indexed block shows.
NOT_REVEALED = "none"


def exposure_level(script_type: str, cause: str) -> Exposure:
    """The draft BIP's level of outputs of ``script_type`` with ``cause``: a key in the script
    or revealed elsewhere is exposed at rest; otherwise the type's level
    (``chains.bitcoin.exposure.output_exposure``), undetermined for types it does not know."""
    if cause != NOT_REVEALED:
        return Exposure.EXPOSED_AT_REST
    try:
        kind = OutputType("p2ms" if script_type == "multisig" else script_type)
    except ValueError:
        return Exposure.UNDETERMINED
    return output_exposure(kind)


@dataclass(frozen=True, slots=True)
class SupplyRow:
    """One row of the supply table: coins of one script type and exposure cause, and the
    draft BIP's exposure level they have."""

    script_type: str
    cause: str
    outputs: int
    value_sat: int
    level: Exposure

    @classmethod
    def of(cls, count: SupplyCount) -> SupplyRow:
        """A stored row with its level (``exposure_level``)."""
        level = exposure_level(count.script_type, count.cause)
        return cls(count.script_type, count.cause, count.outputs, count.value_sat, level)

    @property
    def exposed(self) -> bool:
        """Whether a quantum attacker can read these coins' key now (any cause but ``none``)."""
        return self.cause != NOT_REVEALED


@dataclass(frozen=True, slots=True)
class Supply:
    """One network's supply table at its snapshot's height."""

    network: str
    height: int
    rows: tuple[SupplyRow, ...]

    @property
    def total_sat(self) -> int:
        """Every coin of the snapshot, in satoshis."""
        return sum(r.value_sat for r in self.rows)

    @property
    def exposed_sat(self) -> int:
        """The coins whose key a quantum attacker can read now, in satoshis."""
        return sum(r.value_sat for r in self.rows if r.exposed)

    @property
    def exposed_share(self) -> float:
        """``exposed_sat`` as a percentage of the supply."""
        return 100 * self.exposed_sat / self.total_sat if self.total_sat else 0.0

    def share(self, row: SupplyRow) -> float:
        """A row's value as a percentage of the supply."""
        return 100 * row.value_sat / self.total_sat if self.total_sat else 0.0


@dataclass(frozen=True, slots=True)
class BitcoinSupply:
    """An environment's supply: the supply tables of its networks, the networks whose table
    could not be read, and how far its exposure index reaches."""

    supplies: list[Supply]
    unreadable: list[str]
    index: IndexAnswer


def bitcoin_supply(root: Path, environment: Environment) -> BitcoinSupply:
    """The supply tables of ``environment``'s networks under the analytics folder ``root`` and
    the state of its exposure index (the scans' ``ExposureIndex.state``). A file that cannot be
    read is logged and named, so one damaged table never hides the others. Blocking."""
    supplies, unreadable = [], []
    for network in NETWORKS[environment]:
        try:
            table = read_supply(root, network)
        except SupplyUnreadable:
            _log.exception("Bitcoin supply table of %s unreadable; shown as unreadable", network)
            unreadable.append(network)
            continue
        if table is not None:
            supplies.append(Supply(table.network, table.height, tuple(SupplyRow.of(c) for c in table.rows)))
    return BitcoinSupply(supplies, unreadable, ExposureIndex(BitcoinIndexStore(root)).state(environment))
