"""Fixtures of the pqc tests: conformance vector loading and a pass-count summary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

_TALLY = pytest.StashKey[dict[str, tuple[int, int]]]()


@pytest.fixture(scope="session")
def crypto_vectors(conformance_dir: Path) -> Callable[[str], Any]:
    """Load a JSON file from the conformance folder's crypto/ part by relative path."""

    def load(relative: str) -> Any:
        return json.loads((conformance_dir / "crypto" / relative).read_text(encoding="utf-8"))

    return load


@pytest.fixture(scope="session")
def tally(request: pytest.FixtureRequest) -> Callable[[str, int, int], None]:
    """Record (cases run, cases passed) per vector set for the end-of-run summary."""
    results = request.config.stash.setdefault(_TALLY, {})

    def record(name: str, ran: int, passed: int) -> None:
        results[name] = (ran, passed)

    return record


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Print how many conformance cases each vector set ran and passed."""
    results = config.stash.get(_TALLY, {})
    if results:
        terminalreporter.section("pqc conformance vectors")
        for name, (ran, passed) in sorted(results.items()):
            terminalreporter.write_line(f"{name}: {passed}/{ran} passed")
