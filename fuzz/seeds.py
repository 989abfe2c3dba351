"""Seed inputs taken from the public conformance vectors (../shared/conformance).

Seeds only steer the fuzzer towards interesting shapes; with the vectors absent each
harness still starts from its own few hand-written seeds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fuzz.runner import conformance_dir

_HEX_TEXT = re.compile(r"(0x)?[0-9a-fA-F]+")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def json_strings(*relative: str, min_length: int = 1, max_length: int = 200) -> list[str]:
    """Every string value (any depth) of the named conformance JSON files, within the length bounds."""
    root = conformance_dir()
    if root is None:
        return []
    found: list[str] = []
    for name in relative:
        document = json.loads((root / name).read_text())
        found += [s for s in _strings(document) if min_length <= len(s) <= max_length]
    return found


def hex_values(*relative: str, max_length: int = 20_000) -> list[bytes]:
    """The bytes of every even-length hex string in the named conformance JSON files."""
    return [
        bytes.fromhex(s.removeprefix("0x"))
        for s in json_strings(*relative, min_length=2, max_length=max_length)
        if _HEX_TEXT.fullmatch(s) and len(s.removeprefix("0x")) % 2 == 0
    ]


def raw_file(relative: str) -> bytes | None:
    """A binary conformance file's bytes, or None when the vectors are absent."""
    root = conformance_dir()
    return (root / relative).read_bytes() if root is not None else None


def files(relative_glob: str) -> list[Path]:
    """The conformance files matching a glob (empty when the vectors are absent)."""
    root = conformance_dir()
    return sorted(root.glob(relative_glob)) if root is not None else []
