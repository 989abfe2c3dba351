"""The chains page: the post-quantum readiness of the 19 chains qday scores (grade, factors
and the source of each), and the Bitcoin supply exposed to a quantum attacker once this node
has built the exposure index and loaded a UTXO snapshot.

Public data, the same for every account: readiness is what scans grade chains with
(``scoring.load_readiness``, the packaged ``chain_readiness.toml``); the supply is what
``services.supply_exposure`` assembles for the page's environment from the
``bitcoin_supply_exposure`` tables (read off the event loop, on the app's executor). This
module only shows them: the route, the view of each chain, the charts and the names of script
types and causes. Source links are plain links; the page loads nothing from them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from markupsafe import Markup
from sanic import HTTPResponse

from api.context import QdayRequest
from api.dashboard.charts import Bar, Segment, bar_chart
from api.dashboard.frame import dashboard, frame, render, signed_in
from chains.environment import Environment
from chains.registry import Chain
from scoring import ChainReadiness, ReadinessData, format_amount, load_readiness
from scoring.model import CHAIN_GRADES, MAX_STATUS_POINTS, STATUS_POINTS
from services.accounts import Principal
from services.exposure_index import NETWORKS
from services.offload import run_blocking
from services.supply_exposure import Supply, SupplyRow, bitcoin_supply

#: The readiness the scans grade with, read once per process on first use (the file is packaged).
_readiness = functools.cache(load_readiness)

_BTC = Chain.BITCOIN.info
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


def type_name(script_type: str) -> str:
    """A script type of the supply table as the page names it."""
    return _TYPE_NAMES.get(script_type, script_type.upper())


def cause_text(cause: str) -> str:
    """What a ``cause`` of the supply table means, as the page says it."""
    return CAUSES.get(cause, cause)


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

    def bars(amount: Callable[[SupplyRow], float]) -> list[Bar]:
        return [
            Bar(
                type_name(rows[0].script_type),
                [Segment(cause_text(r.cause), amount(r), f"cause-{r.cause}") for r in rows],
            )
            for rows in ordered
        ]

    coins, outputs = bars(lambda r: r.value_sat / coin), bars(lambda r: r.outputs)
    at = f"{supply.network} at height {supply.height:,}"
    return (
        bar_chart(f"chart-supply-btc-{supply.network}", f"BTC by output type and exposure, {at}", coins, "btc"),
        bar_chart(
            f"chart-supply-outputs-{supply.network}", f"Outputs by output type and exposure, {at}", outputs, "count"
        ),
    )


@dashboard.get("/chains")
@signed_in
async def chains_page(request: QdayRequest, principal: Principal, environment: Environment) -> HTTPResponse:
    """Readiness of every chain (chart, table, factors with sources) and the Bitcoin supply
    exposure of the environment's networks, or what builds it when this node has none."""
    root = request.app.ctx.settings.analytics_dir
    data = _readiness()
    views = chain_views(data)
    bitcoin = await run_blocking(request.app.ctx.executor, bitcoin_supply, root, environment)
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
        type_name=type_name,
        cause_text=cause_text,
        causes=CAUSES,
        meanings=CAUSE_MEANINGS,
        index=bitcoin.index,
        networks=NETWORKS[environment],
    )
