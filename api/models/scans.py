"""Models of the wallet-scan and watch-list endpoints."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from api.models.accounts import Out, Strict, Timestamp

Address = Annotated[str, Meta(min_length=1, max_length=128, description="Address to scan")]
ChainName = Annotated[str, Meta(max_length=40, description="Chain identifier; absent = auto-detect (EVM → ethereum)")]


class ScanRequest(Strict):
    """Body of POST /v1/scan/wallet."""

    address: Address
    chain: ChainName | None = None
    refresh: Annotated[bool, Meta(description="Fetch fresh chain data even if a recent result is stored")] = False


class RiskFactorOut(Out):
    """One address-level risk factor."""

    factor: str
    weight: float
    score: float
    detail: str


class ChainFactorOut(Out):
    """One chain-level readiness factor."""

    factor: str
    status: Literal["active", "planned", "none", "vulnerable", "protective"]
    detail: str
    source: str | None = None


class WalletScanOut(Out):
    """The spec's wallet scan result, plus ``cached``, ``dataAsOf`` and provenance."""

    address: str
    chain: str
    risk_score: Literal["W1", "W2", "W3", "W4"]
    risk_label: Literal["Low", "Medium", "High", "Critical"]
    risk_value: Annotated[int, Meta(ge=0, le=100)]
    chain_grade: Literal["A", "B", "C", "D", "F"]
    chain_grade_label: str
    public_key_exposed: bool
    balance_at_risk: str
    balance_at_risk_usd: Annotated[float | None, Meta(description="null when no USD price is known")]
    risk_factors: list[RiskFactorOut]
    chain_factors: list[ChainFactorOut]
    scanned_at: Timestamp
    cached: bool
    data_as_of: Timestamp
    scoring_version: str
    data_source: str
    block_height: int | None


class DetectRequest(Strict):
    """Body of POST /v1/scan/detect."""

    address: Address


class DetectOut(Out):
    """Chains an address may belong to; EVM addresses list all 15 EVM chains."""

    address: str
    chains: list[str]
    default_chain: str


class WatchRequest(Strict):
    """Body of POST /v1/watchlist."""

    address: Address
    chain: ChainName | None = None
    label: Annotated[str, Meta(max_length=200)] | None = None


class WatchedOut(Out):
    """A watched address (rescored daily by the pipelines)."""

    id: str
    address: str
    chain: str
    label: str | None
    created_at: Timestamp
