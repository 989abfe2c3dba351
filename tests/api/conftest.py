"""Fixtures shared by the API tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.anvil import MISSING_ANVIL, Anvil, anvil_binary


@pytest.fixture(scope="module")
def nodes(module_database_url: str) -> Iterator[tuple[Anvil, Anvil]]:
    """Two anvil nodes, one as ethereum (chain id 1) and one as base (chain id 8453), for
    the tests of key families across EVM chains: one fresh pair per test module and engine
    of its app (``module_database_url``), since the tests write to the chains."""
    binary = anvil_binary()
    if binary is None:
        pytest.skip(MISSING_ANVIL)
    ethereum, base = Anvil(binary, chain_id=1), Anvil(binary, chain_id=8453)
    yield ethereum, base
    ethereum.stop()
    base.stop()
