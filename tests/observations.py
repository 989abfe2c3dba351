"""Observations for tests: one builder of a plain ``Observation`` (a never-used key
account by default), shared by the scoring, chains and services tests."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from chains.observation import AccountType, Exposure, Observation

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
"""When every built observation was made, unless ``observed_at`` is given."""

_DEFAULTS: dict[str, tuple[str, str, AccountType, int, str]] = {
    "ethereum": ("0x" + "ab" * 20, "eoa", AccountType.EOA, 18, "ETH"),
    "bitcoin": ("bc1qexampleaddress", "p2wpkh", AccountType.UTXO_SCRIPT, 8, "BTC"),
    "solana": ("So1anaExampleAddress1111111111111111111111", "ed25519", AccountType.EOA, 9, "SOL"),
    "cosmos": ("cosmos1exampleaddress", "secp256k1", AccountType.EOA, 6, "ATOM"),
    "tron": ("TExampleAddress", "eoa", AccountType.EOA, 6, "TRX"),
    "celo": ("0x" + "cd" * 20, "eoa", AccountType.EOA, 18, "CELO"),
}


def observation(chain: str = "ethereum", **fields: Any) -> Observation:
    """An observation of a never-used key account on ``chain``, with ``fields`` replaced."""
    address, address_type, account_type, decimals, symbol = _DEFAULTS.get(chain, _DEFAULTS["ethereum"])
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
        observed_at=NOW,
    )
    return replace(base, **fields)
