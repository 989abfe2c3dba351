"""Fixtures for the scoring tests: observations built directly, one readiness load."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from chains.observation import Observation
from scoring import PriceQuote, ReadinessData, load_readiness
from tests.observations import observation

_NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
_PRICES = {
    "ETH": PriceQuote(3_000.0, _NOW),
    "BTC": PriceQuote(90_000.0, _NOW),
    "SOL": PriceQuote(150.0, _NOW),
    "ATOM": PriceQuote(5.0, _NOW),
    "TRX": PriceQuote(0.25, _NOW),
}


# chain -> (address, address_type, account_type, decimals, symbol) of a plain key account
@pytest.fixture(scope="session")
def readiness() -> ReadinessData:
    """The packaged readiness data, loaded once."""
    return load_readiness()


@pytest.fixture()
def make_observation() -> Callable[..., Observation]:
    """Factory: ``make_observation(chain, **overrides)``, a never-used key account by default."""
    return observation


@pytest.fixture()
def prices() -> dict[str, PriceQuote]:
    """USD quotes for ETH, BTC, SOL, ATOM and TRX (no CELO: an unknown price)."""
    return dict(_PRICES)


@pytest.fixture()
def now() -> datetime:
    """The fixed observation and price time."""
    return _NOW
