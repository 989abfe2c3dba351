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


DescriptorText = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=8192,
        description="An output descriptor (BIP-380..386, BIP-389 <0;1>), checksum verified when present, or a "
        "bare extended public key (xpub, ypub, zpub; tpub, upub, vpub with test keys)",
    ),
]


class DescriptorScanRequest(Strict):
    """Body of POST /v1/scan/descriptor."""

    descriptor: DescriptorText
    chain: Annotated[
        str, Meta(max_length=40, description="bitcoin, or an EVM chain (descriptor: an account-level xpub)")
    ] = "bitcoin"
    gap_limit: Annotated[
        int, Meta(ge=1, le=1000, description="Unused addresses in a row that end a branch (BIP-44: 20)")
    ] = 20


ExposureLevel = Literal["EXPOSED_AT_REST", "EXPOSED_ON_SPEND", "NOT_EXPOSED", "UNDETERMINED"]
Branch = Literal["receive", "change"]


class WalletAddressOut(Out):
    """One used address of the wallet and its verdict (for EVM accounts: one per active chain)."""

    address: str
    chain: str
    branch: Branch
    index: int
    script_type: str
    balance_sat: Annotated[int, Meta(description="In the chain's smallest unit: satoshi, wei, sun")]
    balance: Annotated[str, Meta(description="In the native coin, e.g. '0.5 BTC'")]
    tx_count: int
    public_key_exposed: bool
    exposure: ExposureLevel
    risk_score: Literal["W1", "W2", "W3", "W4"]
    risk_value: Annotated[int, Meta(ge=0, le=100)]
    balance_at_risk_usd: float | None
    exposure_evidence: list[ExposureEvidenceOut]
    exposure_complete: bool


class CoinOut(Out):
    """One confirmed unspent output of the wallet."""

    txid: str
    vout: int
    value: Annotated[int, Meta(description="Satoshi")]
    address: str
    height: int
    public_key_exposed: bool
    exposure: ExposureLevel


class ExposedUnusedOut(Out):
    """An address derived but never used whose key the exposure index shows revealed."""

    address: str
    branch: Branch
    index: int
    script_type: str
    exposure_evidence: list[ExposureEvidenceOut]


class DescriptorSummaryOut(Out):
    """One descriptor scanned (a bare xpub stands for four)."""

    descriptor: Annotated[str, Meta(description="Canonical text with its BIP-380 checksum")]
    used_addresses: int
    derived_addresses: int
    balance_sat: Annotated[int | None, Meta(description="null for EVM accounts (several coins)")]


class ExposureTotalOut(Out):
    """Used addresses and their balance at one exposure level."""

    addresses: int
    balance_sat: Annotated[int | None, Meta(description="null for EVM accounts (several coins)")]


class WalletSummaryOut(Out):
    """The wallet's totals (Bitcoin amounts in satoshi; null for EVM accounts, whose chains
    hold different coins: balanceAtRiskUsd adds them up)."""

    balance_sat: int | None
    exposed_balance_sat: int | None
    balance_at_risk_usd: Annotated[float | None, Meta(description="null when no USD price is known")]
    risk_score: Annotated[Literal["W1", "W2", "W3", "W4"], Meta(description="The worst used address's")]
    risk_value: Annotated[int, Meta(ge=0, le=100)]
    used_addresses: int
    derived_addresses: int
    by_exposure: dict[str, ExposureTotalOut]
    gap_limit: int
    lookup_rounds: Annotated[int, Meta(description="Batched lookups the derivation took")]


class DescriptorScanOut(Out):
    """A wallet scanned from its descriptor or extended public key."""

    descriptor: Annotated[
        str | None, Meta(description="The descriptor, canonical with its checksum; null for a bare extended key")
    ]
    descriptors: list[DescriptorSummaryOut]
    addresses: Annotated[list[WalletAddressOut], Meta(description="Used addresses only")]
    coins: list[CoinOut]
    exposed_unused: list[ExposedUnusedOut]
    summary: WalletSummaryOut
    coverage: CoverageOut
    exposure_complete: bool
    scanned_at: Timestamp
    scoring_version: str


class MigrationPlanRequest(Strict):
    """Body of POST /v1/plan/migration."""

    descriptor: DescriptorText
    destination: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=8192,
            description="The new wallet: one ranged descriptor (or a ypub/zpub); outputs go to fresh addresses of "
            "its receive branch",
        ),
    ]
    fee_rate: (
        Annotated[
            float, Meta(ge=1, le=10_000, description="sat/vB; default: the Bitcoin source's estimate for 6 blocks")
        ]
        | None
    ) = None
    max_per_address_sat: Annotated[
        int, Meta(ge=546, le=2_100_000_000_000_000, description="Most any one destination address receives")
    ] = 5_000_000_000
    gap_limit: Annotated[int, Meta(ge=1, le=1000, description="As for POST /v1/scan/descriptor")] = 20


class PlanInputOut(Out):
    """A coin a step spends."""

    txid: str
    vout: int
    value_sat: int
    address: str
    exposure: ExposureLevel


class PlanOutputOut(Out):
    """A payment to a fresh destination address."""

    address: str
    value_sat: int
    index: Annotated[int, Meta(description="Child index on the destination's receive branch")]


class PlanStepOut(Out):
    """One transaction of the plan, as an unsigned PSBT."""

    order: int
    inputs: list[PlanInputOut]
    outputs: list[PlanOutputOut]
    vsize: int
    fee_sat: int
    psbt: Annotated[str, Meta(description="BIP-174 PSBT, base64; unsigned")]


class PlanSkippedOut(Out):
    """A coin left out of the plan, and why."""

    txid: str
    vout: int
    value_sat: int
    exposure: ExposureLevel
    reason: str


class PlanTotalsOut(Out):
    """What the plan spends, pays and leaves in fees (satoshi)."""

    in_sat: int
    out_sat: int
    fee_sat: int


class MigrationPlanOut(Out):
    """How to move a wallet: exposed coins first, capped per fresh address."""

    descriptors: list[str]
    destination: str
    fee_rate: float
    max_per_address_sat: int
    steps: list[PlanStepOut]
    skipped: list[PlanSkippedOut]
    totals: PlanTotalsOut
    coverage: Annotated[CoverageOut, Meta(description="What the scan the order rests on could see")]
    exposure_complete: bool


class WatchDescriptorRequest(Strict):
    """Body of POST /v1/watchlist/descriptors."""

    descriptor: DescriptorText
    label: Annotated[str, Meta(max_length=200)] | None = None
    gap_limit: Annotated[int, Meta(ge=1, le=1000, description="As for POST /v1/scan/descriptor")] = 20


class WatchedDescriptorOut(Out):
    """A watched wallet (rescored daily by the pipelines)."""

    id: str
    descriptor: Annotated[str, Meta(description="Canonical descriptor with its checksum, or the bare extended key")]
    label: str | None
    gap_limit: int
    derived_addresses: Annotated[int, Meta(description="What the wallet counts against the watch cap")]
    summary: Annotated[WalletSummaryOut | None, Meta(description="The latest scan's summary")]
    scanned_at: Timestamp | None
    created_at: Timestamp


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
