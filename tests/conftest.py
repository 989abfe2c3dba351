"""Shared pytest fixtures for the whole suite."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.anvil import MISSING_ANVIL, Anvil, anvil_binary

REPO_ROOT = Path(__file__).resolve().parent.parent


def _conformance_root() -> Path:
    override = os.environ.get("QDAY_CONFORMANCE_DIR")
    if override:
        return Path(override)
    return REPO_ROOT.parent / "shared" / "conformance"


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    """The public test-vector folder (../shared/conformance); skips the test when absent."""
    root = _conformance_root()
    if not (root / "INDEX.md").is_file():
        pytest.skip(
            f"conformance vectors not found at {root} "
            "(set QDAY_CONFORMANCE_DIR or place shared/conformance beside the checkout)"
        )
    return root


@pytest.fixture(scope="session")
def anvil() -> Iterator[Anvil]:
    """One anvil node for the session (chain id 31337) on a free loopback port;
    skips the test when the binary is absent (`make anvil` installs it)."""
    binary = anvil_binary()
    if binary is None:
        pytest.skip(MISSING_ANVIL)
    node = Anvil(binary, chain_id=31337)
    yield node
    node.stop()
