"""Colour contrast of the dashboard's stylesheet against WCAG 2.2 (1.4.3, level AA: 4.5:1
for text): every badge's background under its white text, and the text colours the pages
use on the backgrounds they use them on, read from ``static/qday.css`` itself so that a
colour changed there is checked here."""

from __future__ import annotations

import re
from importlib import resources

import pytest

CSS = resources.files("api.dashboard").joinpath("static", "qday.css").read_text()
#: WCAG's minimum contrast for text of normal size (level AA).
AA_TEXT = 4.5


def _variables() -> dict[str, str]:
    root = re.search(r":root\s*\{([^}]*)\}", CSS)
    assert root is not None
    return dict(re.findall(r"(--[\w-]+)\s*:\s*(#[0-9a-fA-F]{6})", root.group(1)))


def _colour(value: str) -> str:
    """A colour of the stylesheet as ``#rrggbb`` (a ``var(--x)`` resolved)."""
    found = re.fullmatch(r"var\((--[\w-]+)\)", value.strip())
    colour = _variables()[found.group(1)] if found else value.strip()
    if re.fullmatch(r"#[0-9a-fA-F]{3}", colour):
        colour = "#" + "".join(c * 2 for c in colour[1:])
    assert re.fullmatch(r"#[0-9a-fA-F]{6}", colour), value
    return colour.lower()


def _luminance(colour: str) -> float:
    """WCAG's relative luminance of an sRGB colour."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(foreground: str, background: str) -> float:
    """WCAG's contrast ratio of two colours (1 to 21)."""
    lighter, darker = sorted((_luminance(_colour(foreground)), _luminance(_colour(background))), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def _badge_backgrounds() -> dict[str, str]:
    """Every ``.badge.<kind>`` rule's background, by selector."""
    found: dict[str, str] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", CSS):
        background = re.search(r"background\s*:\s*([^;]+);", body)
        for selector in selectors.split(","):
            if re.fullmatch(r"\s*\.badge\.[\w-]+\s*", selector) and background:
                found[selector.strip()] = background.group(1)
    return found


def test_the_contrast_formula_matches_wcag_examples() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)  # the lightest AA grey on white


def test_every_badge_is_legible_under_its_white_text() -> None:
    badges = _badge_backgrounds()
    assert {".badge.level-W1", ".badge.level-W4", ".badge.grade-F", ".badge.state-failed"} <= set(badges)
    weak = {s: round(contrast("#ffffff", b), 2) for s, b in badges.items() if contrast("#ffffff", b) < AA_TEXT}
    assert weak == {}


@pytest.mark.parametrize(
    ("foreground", "background"),
    [
        ("var(--ink)", "var(--bg)"),  # body text
        ("var(--ink)", "var(--card)"),  # cards
        ("var(--muted)", "var(--card)"),  # labels and notes
        ("var(--accent)", "var(--card)"),  # links
        ("var(--w4)", "var(--card)"),  # errors
        ("#ffffff", "#10243e"),  # the header's text and links
        ("#d5dde8", "#10243e"),  # the header's tagline and e-mail
        ("#ffffff", "#2f4f78"),  # the header's buttons
        ("#ffffff", "var(--accent)"),  # buttons
        ("var(--w3)", "#fff8e6"),  # a secret's note
        ("var(--ink)", "#fff8e1"),  # notices
    ],
)
def test_text_is_legible_on_its_background(foreground: str, background: str) -> None:
    assert contrast(foreground, background) >= AA_TEXT
    assert _colour(background).lstrip("#") in CSS.lower() or background.startswith("var(")  # still in the sheet
