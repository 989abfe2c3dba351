"""The dashboard's SVG charts: bars scaled to the longest, totals and a description naming
every value, labels escaped, an empty chart that says so."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from api.dashboard.charts import WIDTH, Bar, Segment, bar_chart

SVG = "{http://www.w3.org/2000/svg}"


def test_bars_are_scaled_to_the_longest_and_described() -> None:
    bars = [
        Bar("ethereum", [Segment("W3", 3000.0, "level-W3"), Segment("W4", 1000.0, "level-W4")]),
        Bar("bitcoin", [Segment("W1", 2000.0, "level-W1")]),
    ]
    svg = ET.fromstring(str(bar_chart("c", "At risk", bars, "usd")))
    rects = svg.findall(f"{SVG}rect")
    widths = [float(r.get("width") or 0) for r in rects]
    assert [r.get("class") for r in rects] == ["bar level-W3", "bar level-W4", "bar level-W1"]
    assert widths[0] == 3 * widths[1] and widths[2] == 2 * widths[1]  # proportional
    assert widths[0] + widths[1] <= WIDTH
    desc = svg.find(f"{SVG}desc")
    assert desc is not None and desc.text == "ethereum: $4,000 (W3 $3,000, W4 $1,000); bitcoin: $2,000 (W1 $2,000)"
    assert [t.text for t in svg.findall(f"{SVG}text") if t.get("class") == "chart-value"] == ["$4,000", "$2,000"]


def test_labels_are_escaped_and_an_empty_chart_says_so() -> None:
    hostile = bar_chart("c", "<script>alert(1)</script>", [Bar("<b>x</b>", [Segment("W1", 1, "level-W1")])], "count")
    assert "<script>" not in hostile and "<b>" not in hostile and "&lt;b&gt;x&lt;/b&gt;" in hostile
    empty = bar_chart("e", "Nothing", [Bar("W1", [Segment("W1", 0, "level-W1")])], "count")
    assert "nothing to show yet" in empty and not re.search("<rect", empty)
