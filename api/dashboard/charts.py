"""Charts drawn on the server as SVG: no script, no external library, nothing for the page's
Content-Security-Policy to allow, and each chart carries its own text alternative (a title
and a description naming every value; the page shows the same numbers in a table).

Colours come from CSS classes (``static/qday.css``), never inline styles, which the policy
forbids."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

#: Drawing width in SVG units (the image scales to its box).
WIDTH = 640
_BAR = 22
_GAP = 10
_LABEL = 120
_VALUE = 110


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
    """Horizontal stacked bars scaled to the longest, each with its total printed beside it;
    an empty chart says so. ``unit`` formats totals (``usd`` or ``count``)."""
    longest = max((b.total for b in bars), default=0.0)
    if longest <= 0:
        bars = []  # nothing to draw: the chart says so rather than showing empty rows
    span = WIDTH - _LABEL - _VALUE
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


def _fmt(value: float, unit: str) -> str:
    if unit == "usd":
        return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"
    return f"{value:,.0f}"
