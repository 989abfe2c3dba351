"""Fixtures for the scoring tests: observations built directly, one readiness load."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from chains.observation import AccountType, Exposure, Observation
from scoring import PriceQuote, ReadinessData, load_readiness

_NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
_PRICES = {
    "ETH": PriceQuote(3_000.0, _NOW),
    "BTC": PriceQuote(90_000.0, _NOW),
    "SOL": PriceQuote(150.0, _NOW),
    "ATOM": PriceQuote(5.0, _NOW),
    "TRX": PriceQuote(0.25, _NOW),
}

# chain -> (address, address_type, account_type, decimals, symbol) of a plain key account
_DEFAULTS: dict[str, tuple[str, str, AccountType, int, str]] = {
    "ethereum": ("0x" + "ab" * 20, "eoa", AccountType.EOA, 18, "ETH"),
    "bitcoin": ("bc1qexampleaddress", "p2wpkh", AccountType.UTXO_SCRIPT, 8, "BTC"),
    "solana": ("So1anaExampleAddress1111111111111111111111", "ed25519", AccountType.EOA, 9, "SOL"),
    "cosmos": ("cosmos1exampleaddress", "secp256k1", AccountType.EOA, 6, "ATOM"),
    "tron": ("TExampleAddress", "eoa", AccountType.EOA, 6, "TRX"),
    "celo": ("0x" + "cd" * 20, "eoa", AccountType.EOA, 18, "CELO"),
}


def _make(chain: str = "ethereum", **fields: Any) -> Observation:
    """An observation of a never-used key account on ``chain``, with ``fields`` replaced."""
    address, address_type, account_type, decimals, symbol = _DEFAULTS[chain]
    base = Observation(
        chain=chain,
        address=address,
        address_type=address_type,
        account_type=account_type,
        balance=0,
        decimals=decimals,
        symbol=symbol,
        tx_count=0,
        outbound_tx_count=0,
        exposure=Exposure.EXPOSED_ON_SPEND,
        public_key=None,
        address_reuse_count=0,
        first_activity=None,
        last_activity=None,
        source="test",
        height=1,
        observed_at=_NOW,
    )
    return replace(base, **fields)


@pytest.fixture(scope="session")
def readiness() -> ReadinessData:
    """The packaged readiness data, loaded once."""
    return load_readiness()


@pytest.fixture()
def make_observation() -> Callable[..., Observation]:
    """Factory: ``make_observation(chain, **overrides)``, a never-used key account by default."""
    return _make


@pytest.fixture()
def prices() -> dict[str, PriceQuote]:
    """USD quotes for ETH, BTC, SOL, ATOM and TRX (no CELO: an unknown price)."""
    return dict(_PRICES)


@pytest.fixture()
def now() -> datetime:
    """The fixed observation and price time."""
    return _NOW
