"""Fixtures of the chain-layer tests: conformance vectors loaded from the shared folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def load_vectors(conformance_dir: Path) -> Callable[[str], Any]:
    """Load a JSON vector file by its path inside the conformance folder."""

    def load(relative: str) -> Any:
        return json.loads((conformance_dir / relative).read_text(encoding="utf-8"))

    return load
