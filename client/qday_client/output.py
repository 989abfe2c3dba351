"""What the CLI prints: JSON for machines (``--json``), aligned tables for people.

JSON uses the API's camelCase names (``msgspec.to_builtins`` of the typed
results), so ``qday-client ... --json`` output matches the API's ``data``.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import msgspec


def to_plain(value: Any) -> Any:
    """Typed results (and lists of them) as JSON-ready builtins with wire names."""
    return msgspec.to_builtins(value)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """An aligned text table of ``columns`` with a header and a rule."""
    cells = [[_text(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def csv_text(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """CSV of ``columns`` with a header row: empty cells for null, ``true``/``false`` for booleans."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        cells = (row.get(c) for c in columns)
        writer.writerow("" if v is None else str(v).lower() if isinstance(v, bool) else v for v in cells)
    return out.getvalue()


def show(value: Any, *, as_json: bool, columns: Sequence[str] | None = None, stream: TextIO | None = None) -> None:
    """Print a result (to stdout by default): JSON, a table of ``columns`` for a list, or field/value lines
    for one object."""
    stream = stream or sys.stdout
    plain = to_plain(value)
    if as_json:
        stream.write(json.dumps(plain, indent=2) + "\n")
    elif isinstance(plain, list):
        stream.write((table(plain, columns or sorted(plain[0])) if plain else "(none)") + "\n")
    else:
        fields = columns or [k for k, v in plain.items() if not isinstance(v, list)]
        width = max(len(k) for k in fields)
        stream.write("\n".join(f"{k.ljust(width)}  {_text(plain.get(k))}" for k in fields) + "\n")
