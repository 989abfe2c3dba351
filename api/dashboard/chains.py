"""The chains page: the post-quantum readiness of the 19 chains qday scores (grade, factors
and the source of each), and the Bitcoin supply exposed to a quantum attacker once this node
has built the exposure index and loaded a UTXO snapshot.

Public data, the same for every account: readiness is what scans grade chains with
(``scoring.load_readiness``, the packaged ``chain_readiness.toml``); the supply is the
``bitcoin_supply_exposure`` table of the analytics folder (``storage.bitcoin_supply``,
written by ``qday bitcoin ingest-utxo-snapshot``) for the networks the page's environment
scans (``services.exposure_index.NETWORKS``: mainnet in live, the test networks in test).
Source links are plain links; the page loads nothing from them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from markupsafe import Markup
from sanic import HTTPResponse

from api.context import QdayRequest
from api.dashboard.charts import Bar, Segment, bar_chart
from api.dashboard.frame import dashboard, frame, render, signed_in
from chains.bitcoin.exposure import output_exposure
from chains.bitcoin.script import OutputType
from chains.environment import Environment
from chains.observation import Exposure
from chains.registry import Chain
from scoring import ChainReadiness, ReadinessData, format_amount, load_readiness
from scoring.model import CHAIN_GRADES, MAX_STATUS_POINTS, STATUS_POINTS
from services.accounts import Principal
from services.exposure_index import NETWORKS, ExposureIndex, IndexAnswer
from storage.bitcoin_index import BitcoinIndexStore
from storage.bitcoin_supply import supply_path

#: The readiness the scans grade with, read once per process on first use (the file is packaged).
_readiness = functools.cache(load_readiness)

_BTC = Chain.BITCOIN.info
_log = logging.getLogger("qday.dashboard.chains")
#: How each ``cause`` of the supply table reads on the page, in the order the charts stack them.
CAUSES = {"type": "key in the script", "revealed_key": "key revealed elsewhere", "none": "key not revealed"}
#: What each cause means, for the charts' legend.
CAUSE_MEANINGS = {
    "type": "P2PK, bare multisig and P2TR outputs show the key itself",
    "revealed_key": "the exposure index holds the key the output commits to, shown by an earlier spend or output"
    " (either encoding) at or below the snapshot's height",
    "none": "hash-committed outputs whose key no indexed block shows; spending them reveals it",
}
#: Names of the supply table's script types (the others are shown in capitals).
_TYPE_NAMES = {"multisig": "bare multisig", "other": "other (non-standard, unknown witness)"}


@dataclass(frozen=True, slots=True)
class ChainView:
    """One chain's readiness as the page shows it: the graded facts, the status points its
    factors earn and the most they could."""

    readiness: ChainReadiness
    points: int
    possible: int

    @property
    def share(self) -> float:
        """Points earned as a percentage of the possible (what the grade thresholds apply to)."""
        return 100 * self.points / self.possible


def chain_views(data: ReadinessData) -> list[ChainView]:
    """Every graded chain, readiest first (ties by name)."""
    views = [
        ChainView(r, sum(STATUS_POINTS[f.status] for f in r.factors), MAX_STATUS_POINTS * len(r.factors))
        for r in data.chains.values()
    ]
    return sorted(views, key=lambda v: (-v.share, v.readiness.chain))


def readiness_chart(views: list[ChainView]) -> Markup:
    """One bar per chain: its share of readiness points, coloured by its grade."""
    bars = [
        Bar(
            v.readiness.chain,
            [Segment(f"grade {v.readiness.grade.letter}", v.share, f"grade-{v.readiness.grade.letter}")],
        )
        for v in views
    ]
    return bar_chart("chart-readiness", "Post-quantum readiness by chain (% of readiness points)", bars, "count")


def btc(value_sat: int) -> str:
    """An amount in satoshis as exact BTC (``27620.45140199 BTC``)."""
    return format_amount(value_sat, _BTC.decimals, _BTC.symbol)


@dataclass(frozen=True, slots=True)
class SupplyRow:
    """One row of the supply table: coins of one script type and exposure cause, and the
    draft BIP's exposure level they have."""

    script_type: str
    cause: str
    outputs: int
    value_sat: int

    @property
    def type_name(self) -> str:
        """The script type as the page names it."""
        return _TYPE_NAMES.get(self.script_type, self.script_type.upper())

    @property
    def cause_text(self) -> str:
        """What the cause means."""
        return CAUSES.get(self.cause, self.cause)

    @property
    def level(self) -> Exposure:
        """The level of the draft BIP "Output Public Key Exposure Classification": a key in
        the script or revealed elsewhere is exposed at rest; otherwise the type's level
        (``chains.bitcoin.exposure.output_exposure``), undetermined for unknown types."""
        if self.cause != "none":
            return Exposure.EXPOSED_AT_REST
        try:
            kind = OutputType("p2ms" if self.script_type == "multisig" else self.script_type)
        except ValueError:
            return Exposure.UNDETERMINED
        return output_exposure(kind)


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
        """The coins whose key a quantum attacker can read now (any cause but ``none``)."""
        return sum(r.value_sat for r in self.rows if r.cause != "none")

    @property
    def exposed_share(self) -> float:
        """``exposed_sat`` as a percentage of the supply."""
        return 100 * self.exposed_sat / self.total_sat if self.total_sat else 0.0

    def share(self, row: SupplyRow) -> float:
        """A row's value as a percentage of the supply."""
        return 100 * row.value_sat / self.total_sat if self.total_sat else 0.0


def _stacking(row: SupplyRow) -> int:
    """Where a row's segment goes in its bar: the order of ``CAUSES``, unknown causes last."""
    order = list(CAUSES)
    return order.index(row.cause) if row.cause in order else len(order)


def supply_charts(supply: Supply) -> tuple[Markup, Markup]:
    """BTC and outputs by script type (most BTC first), each bar stacked by exposure cause."""
    by_type: dict[str, list[SupplyRow]] = {}
    for row in sorted(supply.rows, key=_stacking):
        by_type.setdefault(row.script_type, []).append(row)
    ordered = sorted(by_type.values(), key=lambda rows: -sum(r.value_sat for r in rows))
    coin = 10**_BTC.decimals
    btc = [
        Bar(rows[0].type_name, [Segment(r.cause_text, r.value_sat / coin, f"cause-{r.cause}") for r in rows])
        for rows in ordered
    ]
    outputs = [
        Bar(rows[0].type_name, [Segment(r.cause_text, r.outputs, f"cause-{r.cause}") for r in rows]) for rows in ordered
    ]
    at = f"{supply.network} at height {supply.height:,}"
    return (
        bar_chart(f"chart-supply-btc-{supply.network}", f"BTC by output type and exposure, {at}", btc, "count"),
        bar_chart(
            f"chart-supply-outputs-{supply.network}", f"Outputs by output type and exposure, {at}", outputs, "count"
        ),
    )


class SupplyUnreadable(Exception):
    """A network's supply file exists but cannot be read as the supply table."""


def read_supply(root: Path, network: str) -> Supply | None:
    """``network``'s supply table under the analytics folder ``root`` (None: not built);
    ``SupplyUnreadable`` when its file cannot be read. Blocking: reads one small Parquet file."""
    path = supply_path(root, network)
    if not path.exists():
        return None
    try:
        frame = pl.read_parquet(path, columns=["height", "script_type", "cause", "outputs", "value_sat"])
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise SupplyUnreadable(f"{path}: {exc}") from exc
    if frame.is_empty():
        return None
    rows = tuple(
        SupplyRow(r["script_type"], r["cause"], r["outputs"], r["value_sat"]) for r in frame.iter_rows(named=True)
    )
    return Supply(network, int(frame["height"][0]), rows)


@dataclass(frozen=True, slots=True)
class BitcoinSupply:
    """What the page shows of the environment's networks: their supply tables, the networks
    whose table could not be read, and how far the exposure index reaches."""

    supplies: list[Supply]
    unreadable: list[str]
    index: IndexAnswer


def bitcoin_supply(root: Path, environment: Environment) -> BitcoinSupply:
    """The supply tables of ``environment``'s networks under ``root`` and the state of its
    exposure index (the scans' ``ExposureIndex.state``). A file that cannot be read is logged
    and named, never an error page. Blocking."""
    supplies, unreadable = [], []
    for network in NETWORKS[environment]:
        try:
            supply = read_supply(root, network)
        except SupplyUnreadable:
            _log.exception("Bitcoin supply table unreadable; the chains page says so")
            unreadable.append(network)
            continue
        if supply is not None:
            supplies.append(supply)
    return BitcoinSupply(supplies, unreadable, ExposureIndex(BitcoinIndexStore(root)).state(environment))


@dashboard.get("/chains")
@signed_in
async def chains_page(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Readiness of every chain (chart, table, factors with sources) and the Bitcoin supply
    exposure of the environment's networks, or what builds it when this node has none."""
    root = request.app.ctx.settings.analytics_dir
    data = _readiness()
    views = chain_views(data)
    bitcoin = await asyncio.to_thread(bitcoin_supply, root, environment)
    return render(
        "chains.html",
        **frame(request, principal, environment),
        readiness=data,
        views=views,
        chart_readiness=readiness_chart(views),
        grades=CHAIN_GRADES,
        points=STATUS_POINTS,
        max_points=MAX_STATUS_POINTS,
        supplies=[(s, *supply_charts(s)) for s in bitcoin.supplies],
        unreadable=bitcoin.unreadable,
        btc=btc,
        causes=CAUSES,
        meanings=CAUSE_MEANINGS,
        index=bitcoin.index,
        networks=NETWORKS[environment],
    )
