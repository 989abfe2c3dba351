"""The dashboard's SVG charts: bars scaled to the longest, totals (BTC to the satoshi, with
room to print them) and a description naming every value, labels escaped, an empty chart
that says so; lines over days scaled from 0, split where a value is missing, with guides and
every point named."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from api.dashboard.charts import WIDTH, Bar, Point, Segment, Series, bar_chart, line_chart

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


def test_btc_totals_are_exact_to_the_satoshi_and_fit_beside_the_longest_bar() -> None:
    bars = [
        Bar("P2PKH", [Segment("revealed", 19_812_345.12345678, "cause-revealed_key"), Segment("none", 0.5, "c")]),
        Bar("P2PK", [Segment("type", 12.5, "cause-type")]),
        Bar("P2TR", [Segment("type", 0.0003, "cause-type")]),
        Bar("P2WSH", [Segment("none", 0.00000001, "cause-none")]),
        Bar("P2SH", [Segment("none", 50.0, "cause-none")]),
    ]
    svg = ET.fromstring(str(bar_chart("b", "BTC", bars, "btc")))
    values = [t for t in svg.findall(f"{SVG}text") if t.get("class") == "chart-value"]
    assert [t.text for t in values] == [
        "19812345.62345678 BTC",
        "12.5 BTC",
        "0.0003 BTC",
        "0.00000001 BTC",
        "50 BTC",
    ]
    desc = svg.find(f"{SVG}desc")
    assert desc is not None and desc.text is not None
    assert desc.text.startswith("P2PKH: 19812345.62345678 BTC (revealed 19812345.12345678 BTC, none 0.5 BTC); ")
    longest = values[0]
    assert float(longest.get("x") or 0) + len(longest.text or "") * 8 <= WIDTH  # the total is not cut off


def test_labels_are_escaped_and_an_empty_chart_says_so() -> None:
    hostile = bar_chart("c", "<script>alert(1)</script>", [Bar("<b>x</b>", [Segment("W1", 1, "level-W1")])], "count")
    assert "<script>" not in hostile and "<b>" not in hostile and "&lt;b&gt;x&lt;/b&gt;" in hostile
    empty = bar_chart("e", "Nothing", [Bar("W1", [Segment("W1", 0, "level-W1")])], "count")
    assert "nothing to show yet" in empty and not re.search("<rect", empty)


def test_lines_are_scaled_split_at_gaps_and_every_value_described() -> None:
    days = ["2026-11-19", "2026-11-20", "2026-11-21"]
    w1 = Series("W1", "level-W1", [Point(4), None, Point(2)])
    w4 = Series("W4", "level-W4", [Point(0), Point(1), Point(3, "late", "moved")])
    svg = ET.fromstring(str(line_chart("t", "By day", days, [w1, w4], "count")))
    desc = svg.find(f"{SVG}desc")
    assert desc is not None
    assert desc.text == "W1: 2026-11-19 4, 2026-11-21 2; W4: 2026-11-19 0, 2026-11-20 1, 2026-11-21 3 (moved)"
    lines = svg.findall(f"{SVG}polyline")
    assert [p.get("class") for p in lines] == ["line level-W4"]  # W1's gap leaves no run of two points
    circles = svg.findall(f"{SVG}circle")
    assert [c.get("class") for c in circles] == ["point level-W1"] * 2 + ["point level-W4"] * 2 + [
        "point level-W4 late"
    ]
    ys = [float(c.get("cy") or 0) for c in circles]  # W1: 4, 2; W4: 0, 1, 3
    assert ys[1] == (ys[0] + ys[2]) / 2 and ys[0] < ys[4] < ys[3] < ys[2]  # linear from 0, up is more
    xs = [float(c.get("cx") or 0) for c in circles]
    assert xs[2] < xs[3] < xs[4] and xs[3] - xs[2] == xs[4] - xs[3] and (xs[0], xs[1]) == (xs[2], xs[4])
    assert [t.text for t in svg.findall(f"{SVG}text") if t.get("class") == "chart-day"] == days
    titles = [t.text for c in circles for t in c.findall(f"{SVG}title")]
    assert titles[-1] == "W4, 2026-11-21: 3 (moved)"


def test_a_line_chart_with_guides_a_fixed_top_and_nothing_to_show() -> None:
    svg = str(line_chart("h", "<b>risk</b>", ["d"], [Series("risk", "risk", [Point(50)])], "count", 100, [(76, "W4")]))
    root = ET.fromstring(svg)
    circle = root.find(f"{SVG}circle")
    grid = [float(g.get("y1") or 0) for g in root.findall(f"{SVG}line") if g.get("class") == "chart-grid"]
    assert circle is not None and float(circle.get("cy") or 0) == grid[1]  # 50 of 100 on the middle line
    assert [t.text for t in root.findall(f"{SVG}text") if t.get("class") == "chart-guide-label"] == ["W4"]
    assert "<b>" not in svg and "&lt;b&gt;risk&lt;/b&gt;" in svg
    empty = line_chart("e", "Nothing", ["d"], [Series("W1", "level-W1", [None])], "count")
    assert "nothing to show yet" in empty and "<circle" not in empty and "<polyline" not in empty
