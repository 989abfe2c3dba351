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


class ExposureEvidenceOut(Out):
    """One place the key was revealed."""

    chain: str
    address: Annotated[str, Meta(description="Address, or the output script in hex for outputs without one")]
    kind: Literal["spend", "output", "nonce", "signature", "index"]
    txid: Annotated[str | None, Meta(description="Revealing transaction; null where the source does not say")]
    block_height: int | None


class CoverageOut(Out):
    """What the verdict could see."""

    checked: Annotated[list[str], Meta(description="Chains whose data the verdict includes")]
    unavailable: Annotated[list[str], Meta(description="Family chains down, late or not configured")]
    limits: Annotated[list[str], Meta(description="Revelations no configured source can show")]


class WalletScanResult(Out):
    """The spec's wallet scan result, plus ``dataAsOf``, provenance, evidence and coverage."""

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
    data_as_of: Timestamp
    scoring_version: str
    price_as_of: Annotated[
        Timestamp | None, Meta(description="When the USD price was taken (shows a static price's age); null if none")
    ]
    data_source: str
    block_height: int | None
    exposure_evidence: Annotated[
        list[ExposureEvidenceOut], Meta(description="Where the key was revealed, on this address or its family's")
    ]
    coverage: CoverageOut
    exposure_complete: Annotated[bool, Meta(description="False when a not-exposed verdict could not see everything")]


class WalletScanOut(WalletScanResult):
    """A wallet scan answer: the result and whether it came from the store."""

    cached: bool


PublicKeyHex = Annotated[
    str,
    Meta(
        min_length=64,
        max_length=130,
        description="secp256k1 SEC key (33 or 65 bytes) or ed25519 key (32 bytes), in hex",
    ),
]


class KeyScanRequest(Strict):
    """Body of POST /v1/scan/key."""

    public_key: PublicKeyHex
    chains: Annotated[list[ChainName], Meta(min_length=1, max_length=19)] | None = None
    refresh: Annotated[bool, Meta(description="Fetch fresh chain data even if a recent result is stored")] = False


class ScanErrorOut(Out):
    """Why one chain of a key scan gave no answer."""

    code: str
    message: str


class KeyAddressOut(Out):
    """One address or output of the key."""

    chain: str
    address: Annotated[str, Meta(description="Address, or the output script in hex (P2PK forms)")]
    form: Literal[
        "p2pk",
        "p2pk-uncompressed",
        "p2pkh",
        "p2pkh-uncompressed",
        "p2wpkh",
        "p2sh-p2wpkh",
        "p2tr",
        "evm",
        "tron",
        "cosmos",
        "solana",
    ]
    active: Annotated[bool, Meta(description="True when the chain has seen this address")]
    scan: Annotated[WalletScanResult | None, Meta(description="Its wallet scan; null when inactive or failed")]
    error: ScanErrorOut | None


class KeyScanOut(Out):
    """The verdict on one public key across every chain."""

    public_key: Annotated[str, Meta(description="The key, compressed encoding for secp256k1")]
    key_type: Literal["secp256k1", "ed25519"]
    public_key_exposed: bool
    exposure_evidence: list[ExposureEvidenceOut]
    risk_score: Literal["W1", "W2", "W3", "W4"]
    risk_label: Literal["Low", "Medium", "High", "Critical"]
    risk_value: Annotated[int, Meta(ge=0, le=100, description="The worst of its active addresses")]
    balance_at_risk_usd: Annotated[float | None, Meta(description="Sum over its addresses; null if a price is unknown")]
    addresses: list[KeyAddressOut]
    coverage: CoverageOut
    exposure_complete: bool
    scanned_at: Timestamp
    scoring_version: str
    cached: bool


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
