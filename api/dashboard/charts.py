"""Charts drawn on the server as SVG: no script, no external library, nothing for the page's
Content-Security-Policy to allow, and each chart carries its own text alternative (a title
and a description naming every value; the page shows the same numbers in a table).

Colours come from CSS classes (``static/qday.css``), never inline styles, which the policy
forbids."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

from chains.registry import Chain
from scoring import format_amount

_BTC = Chain.BITCOIN.info
#: Drawing width in SVG units (the image scales to its box).
WIDTH = 640
_BAR = 22
_GAP = 10
_LABEL = 120
_VALUE = 110
#: SVG units a character of a printed total takes at most (13px text, digits ~7.3).
_CHAR = 8


@dataclass(frozen=True, slots=True)
class Segment:
    """One part of a bar: a value drawn with a CSS class (e.g. ``level-W4``), named."""

    name: str
    value: float
    css: str


@dataclass(frozen=True, slots=True)
class Bar:
    """One labelled bar of stacked segments."""

    label: str
    segments: Sequence[Segment]

    @property
    def total(self) -> float:
        """The bar's length: its segments' sum."""
        return sum(s.value for s in self.segments)


def bar_chart(chart_id: str, title: str, bars: Sequence[Bar], unit: str) -> Markup:
    """Horizontal stacked bars scaled to the longest, each with its total printed beside it
    (room kept for the longest total); an empty chart says so. ``unit`` formats totals
    (``usd``, ``count`` or ``btc``: a value in BTC, exact to the satoshi)."""
    longest = max((b.total for b in bars), default=0.0)
    if longest <= 0:
        bars = []  # nothing to draw: the chart says so rather than showing empty rows
    printed = max((len(_fmt(b.total, unit)) for b in bars), default=0)
    span = WIDTH - _LABEL - max(_VALUE, printed * _CHAR + 12)
    height = max(len(bars), 1) * (_BAR + _GAP) + _GAP
    described = "; ".join(
        f"{b.label}: {_fmt(b.total, unit)} (" + ", ".join(f"{s.name} {_fmt(s.value, unit)}" for s in b.segments) + ")"
        for b in bars
    )
    parts = [
        f'<svg id="{escape(chart_id)}" class="chart" role="img" viewBox="0 0 {WIDTH} {height}"'
        f' aria-labelledby="{escape(chart_id)}-title {escape(chart_id)}-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{escape(chart_id)}-title">{escape(title)}</title>',
        f'<desc id="{escape(chart_id)}-desc">{escape(described or "nothing to show")}</desc>',
    ]
    if not bars:
        parts.append(f'<text class="chart-empty" x="{_GAP}" y="{_GAP + _BAR * 0.7:.0f}">nothing to show yet</text>')
    for row, bar in enumerate(bars):
        y = _GAP + row * (_BAR + _GAP)
        parts.append(f'<text class="chart-label" x="{_LABEL - 8}" y="{y + _BAR * 0.7:.1f}">{escape(bar.label)}</text>')
        x = float(_LABEL)
        for segment in bar.segments:
            if segment.value <= 0:
                continue
            width = max(segment.value / longest * span, 1.0)
            named = f"{bar.label}, {segment.name}: {_fmt(segment.value, unit)}"
            parts.append(
                f'<rect class="bar {escape(segment.css)}" x="{x:.1f}" y="{y}" width="{width:.1f}" height="{_BAR}">'
                f"<title>{escape(named)}</title></rect>"
            )
            x += width
        parts.append(
            f'<text class="chart-value" x="{x + 6:.1f}" y="{y + _BAR * 0.7:.1f}">{escape(_fmt(bar.total, unit))}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


@dataclass(frozen=True, slots=True)
class Point:
    """One value of a line on one day, with an extra CSS class (e.g. the day's ``level-W3``)
    and a note said with the value (e.g. ``W3``)."""

    value: float
    css: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class Series:
    """One named line: a point per label of the chart (None: no value there)."""

    name: str
    css: str
    points: Sequence[Point | None]


_TOP = 16
_PLOT = 180
_AXIS = 28
_LEGEND = 24
_AXIS_LABEL = 70
_RIGHT = 44
_GUIDE_LABELS = 96
_DAY_LABEL_WIDTH = 90


def line_chart(
    chart_id: str,
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    unit: str,
    top: float | None = None,
    guides: Sequence[tuple[float, str]] = (),
) -> Markup:
    """Lines over ``labels`` (days, oldest first), one per series, each value a point with
    its own title; scaled from 0 to ``top`` (default: the largest value), with dashed
    ``guides`` (value, name) such as the W-level thresholds, a legend, and a description
    naming every value. ``unit`` formats values (``usd`` or ``count``). A chart without a
    value says so."""
    values = [p.value for s in series for p in s.points if p is not None]
    if not values:
        labels, series = [], []
    ceiling = top if top is not None else max(values, default=0.0)
    ceiling = ceiling if ceiling > 0 else 1.0
    if unit == "count" and top is None:
        ceiling = float(math.ceil(ceiling / 2) * 2)  # whole counts at every tick
    right = _GUIDE_LABELS if guides else _RIGHT
    height = _TOP + _PLOT + _AXIS + _LEGEND
    span = WIDTH - _AXIS_LABEL - right
    step = span / (len(labels) - 1) if len(labels) > 1 else 0.0

    def x_of(i: int) -> float:
        return _AXIS_LABEL + (i * step if len(labels) > 1 else span / 2)

    def y_of(value: float) -> float:
        return _TOP + _PLOT - min(max(value, 0.0), ceiling) / ceiling * _PLOT

    described = "; ".join(
        f"{s.name}: "
        + ", ".join(
            f"{labels[i]} {_fmt(p.value, unit)}" + (f" ({p.note})" if p.note else "")
            for i, p in enumerate(s.points)
            if p is not None
        )
        for s in series
    )
    cid = escape(chart_id)
    parts = [
        f'<svg id="{cid}" class="chart" role="img" viewBox="0 0 {WIDTH} {height}"'
        f' aria-labelledby="{cid}-title {cid}-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{cid}-title">{escape(title)}</title>',
        f'<desc id="{cid}-desc">{escape(described or "nothing to show")}</desc>',
    ]
    if not series:
        parts.append(f'<text class="chart-empty" x="{_GAP}" y="{_TOP + _BAR * 0.7:.0f}">nothing to show yet</text>')
        parts.append("</svg>")
        return Markup("".join(parts))
    for value in (0.0, ceiling / 2, ceiling):
        y = y_of(value)
        parts.append(f'<line class="chart-grid" x1="{_AXIS_LABEL}" y1="{y:.1f}" x2="{WIDTH - right}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="chart-label" x="{_AXIS_LABEL - 8}" y="{y + 4:.1f}">{escape(_fmt(value, unit))}</text>'
        )
    for value, name in guides:
        y = y_of(value)
        parts.append(f'<line class="chart-guide" x1="{_AXIS_LABEL}" y1="{y:.1f}" x2="{WIDTH - right}" y2="{y:.1f}"/>')
        parts.append(f'<text class="chart-guide-label" x="{WIDTH - right + 6}" y="{y + 4:.1f}">{escape(name)}</text>')
    every = -(-len(labels) // max(int(span // _DAY_LABEL_WIDTH), 1))  # labels that do not overlap
    for i, label in enumerate(labels):
        if (len(labels) - 1 - i) % every == 0:  # evenly spaced, ending at the last day
            y = _TOP + _PLOT + 18
            parts.append(f'<text class="chart-day" x="{x_of(i):.1f}" y="{y}">{escape(label)}</text>')
    for line in series:
        css = escape(line.css)
        for run in _runs(line.points):
            if len(run) > 1:
                coords = " ".join(f"{x_of(i):.1f},{y_of(p.value):.1f}" for i, p in run)
                parts.append(f'<polyline class="line {css}" points="{coords}"/>')
        for i, p in enumerate(line.points):
            if p is None:
                continue
            named = f"{line.name}, {labels[i]}: {_fmt(p.value, unit)}" + (f" ({p.note})" if p.note else "")
            classes = escape(" ".join(c for c in ("point", line.css, p.css) if c))
            parts.append(
                f'<circle class="{classes}" cx="{x_of(i):.1f}" cy="{y_of(p.value):.1f}" r="4">'
                f"<title>{escape(named)}</title></circle>"
            )
    legend_y = _TOP + _PLOT + _AXIS + 8
    for n, line in enumerate(series):
        x = _AXIS_LABEL + n * 120
        parts.append(f'<rect class="swatch {escape(line.css)}" x="{x}" y="{legend_y}" width="14" height="10"/>')
        parts.append(f'<text class="chart-legend" x="{x + 20}" y="{legend_y + 10}">{escape(line.name)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _runs(points: Sequence[Point | None]) -> list[list[tuple[int, Point]]]:
    """The points split where a value is missing: each run is drawn as one polyline."""
    runs: list[list[tuple[int, Point]]] = [[]]
    for i, p in enumerate(points):
        if p is None:
            runs.append([])
        else:
            runs[-1].append((i, p))
    return [run for run in runs if run]


def _fmt(value: float, unit: str) -> str:
    if unit == "usd":
        return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"
    if unit == "btc":  # to the satoshi, trailing zeros dropped: "12.5 BTC", "0.0003 BTC"
        return format_amount(round(value * 10**_BTC.decimals), _BTC.decimals, _BTC.symbol)
    return f"{value:,.0f}"
