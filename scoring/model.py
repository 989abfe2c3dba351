"""The scoring policy: every weight, curve, threshold and table, and the version.

This is the one file to change for a weight or a curve. Whoever changes a number here
also bumps ``SCORING_VERSION`` (scores are stored beside the version that produced them)
and updates ``docs/scoring.md``; the doc-check test fails until the worked examples
there match the code again.

Nothing here touches Polars or I/O: the vectorised scorer (``scoring.risk``) turns these
tables into expressions, and ``scoring.result`` turns them into words.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from chains.registry import CHAINS, Family

SCORING_VERSION: Final = "2026.11.2"
"""Version of this policy, stored beside every score (``scoring_version`` column)."""


CHAIN_FAMILY: Final[Mapping[str, Family]] = MappingProxyType(
    {chain.value: info.family for chain, info in CHAINS.items()}
)
"""The 19 chains of the spec (``chains.registry``), in the spec's order, and their family."""

SUPPORTED_CHAINS: Final[tuple[str, ...]] = tuple(CHAIN_FAMILY)

ACCOUNT_MODEL_FAMILIES: Final[frozenset[Family]] = frozenset(set(Family) - {Family.BITCOIN})
"""Families where one address (and key) holds a balance and signs every transaction."""

ADDRESS_IS_KEY_FAMILIES: Final[frozenset[Family]] = frozenset({Family.SOLANA})
"""Families whose wallet address is the raw public key, so the key is always public."""


# --- Address-level risk factors ------------------------------------------------------


class RiskFactor(enum.StrEnum):
    """The five address-level factors of the spec, in the order they are reported."""

    PUBLIC_KEY_EXPOSURE = "public_key_exposure"
    BALANCE_AT_RISK = "balance_at_risk"
    TRANSACTION_FREQUENCY = "transaction_frequency"
    ADDRESS_TYPE = "address_type"
    ADDRESS_REUSE = "address_reuse"


WEIGHT_PERCENT: Final[Mapping[RiskFactor, int]] = MappingProxyType(
    {
        RiskFactor.PUBLIC_KEY_EXPOSURE: 35,
        RiskFactor.BALANCE_AT_RISK: 25,
        RiskFactor.TRANSACTION_FREQUENCY: 15,
        RiskFactor.ADDRESS_TYPE: 15,
        RiskFactor.ADDRESS_REUSE: 10,
    }
)
"""The spec's weights in whole percent, so the weighted sum is exact integer arithmetic."""


def weight(factor: RiskFactor) -> float:
    """The spec's weight of ``factor`` as a number 0–1 (what the API reports)."""
    return WEIGHT_PERCENT[factor] / 100


@dataclass(frozen=True, slots=True)
class RiskBand:
    """One ``riskScore`` band: ``riskValue`` from ``low`` to ``high`` inclusive."""

    score: str
    label: str
    low: int
    high: int


RISK_BANDS: Final[tuple[RiskBand, ...]] = (
    RiskBand("W1", "Low", 0, 25),
    RiskBand("W2", "Medium", 26, 50),
    RiskBand("W3", "High", 51, 75),
    RiskBand("W4", "Critical", 76, 100),
)


# --- public_key_exposure --------------------------------------------------------------


class ExposureBasis(enum.StrEnum):
    """Why an address got its ``public_key_exposure`` score (first matching rule wins).

    The rules, in order: code-controlled accounts; Solana-style addresses that are the key
    (signed or not); the client's EXPOSED_AT_REST; evidence in the record that the key is
    public although the client said otherwise; UNDETERMINED (fail closed); NOT_EXPOSED;
    otherwise EXPOSED_ON_SPEND.
    """

    CODE_CONTROLLED = "code_controlled"
    ADDRESS_IS_KEY_SIGNED = "address_is_key_signed"
    ADDRESS_IS_KEY = "address_is_key"
    AT_REST = "at_rest"
    REVEALED_BY_RECORD = "revealed_by_record"
    UNDETERMINED = "undetermined"
    NOT_EXPOSED = "not_exposed"
    ON_SPEND = "on_spend"


EXPOSURE_SCORE: Final[Mapping[ExposureBasis, int]] = MappingProxyType(
    {
        # No key of its own; control sits with keys this scan cannot see: the unknown midpoint.
        ExposureBasis.CODE_CONTROLLED: 50,
        # Spec baseline 40 for an address that is its key; signing history raises it.
        ExposureBasis.ADDRESS_IS_KEY_SIGNED: 60,
        ExposureBasis.ADDRESS_IS_KEY: 40,
        # The key is on chain: attackable offline at any time. One disclosure is enough,
        # so the number of disclosures does not change the score (it is in the detail).
        ExposureBasis.AT_REST: 100,
        ExposureBasis.REVEALED_BY_RECORD: 100,
        ExposureBasis.UNDETERMINED: 100,
        ExposureBasis.NOT_EXPOSED: 0,
        ExposureBasis.ON_SPEND: 0,
    }
)

KEY_ON_CHAIN: Final[frozenset[ExposureBasis]] = frozenset(
    {
        ExposureBasis.ADDRESS_IS_KEY_SIGNED,
        ExposureBasis.ADDRESS_IS_KEY,
        ExposureBasis.AT_REST,
        ExposureBasis.REVEALED_BY_RECORD,
        ExposureBasis.UNDETERMINED,
    }
)
"""Bases reported as ``publicKeyExposed: true`` (UNDETERMINED fails closed)."""


# --- Log curves (balance_at_risk, transaction_frequency, address_reuse) ---------------


@dataclass(frozen=True, slots=True)
class LogCurve:
    """``score(x) = min(100, floor(100 · log10(1 + x) / log10(1 + full_scale) + 0.5))``.

    0 at x = 0, 100 at x ≥ ``full_scale``, equal steps per decade in between; negative
    inputs count as 0. Rounding is half up, so the score is an integer 0–100.
    """

    full_scale: float
    unit: str

    @property
    def points_per_decade(self) -> float:
        """How many points a tenfold increase of x adds (for the docs and details)."""
        return 100 / math.log10(1 + self.full_scale)


BALANCE_USD_CURVE: Final = LogCurve(full_scale=1_000_000, unit="USD")
"""$1M at one address is full scale: from there an output whose format shows its key (P2PK,
P2TR) is Critical, and a 50 BTC P2PK output is Critical from about $14,200 per BTC
(docs/scoring.md, "Ordering")."""
TX_COUNT_CURVE: Final = LogCurve(full_scale=10_000, unit="transactions")
REUSE_CURVE: Final = LogCurve(full_scale=100, unit="reuses")

UNKNOWN_PRICE_BALANCE_SCORE: Final = 50
"""balance_at_risk of a non-zero balance without a USD price: mid-scale, not $0."""


# --- Nothing at stake ------------------------------------------------------------------

EMPTY_BALANCE_CAP: Final = 50
"""Highest public_key_exposure and address_type score of an address with a zero balance.

Those two factors say how exposed the holding is; with nothing held, what they expose is
only what may be sent later, an unknown, so they count at most the unknown midpoint. The
activity factors are not capped. With the cap no empty address can leave Medium."""

CAPPED_WHEN_EMPTY: Final[frozenset[RiskFactor]] = frozenset({RiskFactor.PUBLIC_KEY_EXPOSURE, RiskFactor.ADDRESS_TYPE})


def capped_when_empty(factor: RiskFactor, score: int, balance: int) -> int:
    """``score`` of ``factor`` after the empty-balance cap (one row; ``scoring.risk`` does the same
    with expressions)."""
    return min(score, EMPTY_BALANCE_CAP) if balance == 0 and factor in CAPPED_WHEN_EMPTY else score


# --- address_type ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AddressTypeRule:
    """Score and wording for one ``Observation.address_type`` value."""

    score: int
    label: str
    reason: str
    key_in_address: bool = False
    """True when the format itself puts the public key on chain (exposed at rest)."""


_ACCOUNT_KEY = (
    "the address is a hash of the key until the first signed transaction; the account then "
    "signs every transaction with that same key"
)
_KEY_HASH = "the address is a hash; the key appears only when spending"
_SCRIPT_HASH = "the address is a script hash; the script and its keys appear only when spending"

ADDRESS_TYPES: Final[Mapping[str, AddressTypeRule]] = MappingProxyType(
    {
        # Key material in the address or output script: exposed at rest by format.
        "p2pk": AddressTypeRule(100, "P2PK", "the output script contains the public key itself", True),
        "p2ms": AddressTypeRule(100, "P2MS bare multisig", "the output script lists every public key", True),
        "p2tr": AddressTypeRule(
            100, "P2TR Taproot", "the output key is a tweaked public key, visible before any spend", True
        ),
        "ed25519": AddressTypeRule(100, "Ed25519 wallet", "the address is the public key", True),
        "token_account": AddressTypeRule(
            100,
            "SPL token account",
            "its owner wallet controls it, and a Solana wallet's address is its public key",
            True,
        ),
        # Hash of one key that an account-model chain reuses for every transaction.
        "eoa": AddressTypeRule(60, "Externally owned account", _ACCOUNT_KEY),
        "secp256k1": AddressTypeRule(60, "Account with a secp256k1 key", _ACCOUNT_KEY),
        "multisig": AddressTypeRule(
            60,
            "Multisig account",
            "the address is a hash of the key set until the first signed transaction, which reveals every key",
        ),
        # Hash-committed Bitcoin outputs: the key or script appears only when spending.
        "p2pkh": AddressTypeRule(40, "P2PKH", _KEY_HASH),
        "p2wpkh": AddressTypeRule(40, "P2WPKH", _KEY_HASH),
        "p2sh": AddressTypeRule(40, "P2SH", _SCRIPT_HASH),
        "p2wsh": AddressTypeRule(40, "P2WSH", _SCRIPT_HASH),
        "p2mr": AddressTypeRule(
            20,
            "P2MR (BIP-360)",
            "a Merkle root of scripts with no key-path spend; its leaves can move to post-quantum "
            "signatures once those are activated",
        ),
        # The client could not classify the output: exposure cannot be ruled out.
        "witness_unknown": AddressTypeRule(
            100,
            "Unassigned witness version",
            "no meaning is assigned yet, so exposure cannot be ruled out (fail closed)",
        ),
        "nonstandard": AddressTypeRule(
            100,
            "Non-standard script",
            "the script could not be classified, so exposure cannot be ruled out (fail closed)",
        ),
        # No private key of its own.
        "contract": AddressTypeRule(
            30, "Contract", "no key of its own; whoever controls its code (owners, admins) holds the keys"
        ),
        "pda": AddressTypeRule(
            30, "Program-derived address", "off-curve, so no private key exists; its program controls it"
        ),
    }
)
"""Inherent exposure of each address format, whatever this address has done so far."""

UNKNOWN_ADDRESS_TYPE_SCORE: Final = 100
"""An address type missing from ``ADDRESS_TYPES`` fails closed: scored as the worst format."""


# --- Chain readiness ------------------------------------------------------------------


class ChainFactorId(enum.StrEnum):
    """Chain-level factor identifiers of the spec."""

    SIGNATURE_SCHEME = "signature_scheme"
    PQC_MIGRATION_PLAN = "pqc_migration_plan"
    COMMUNITY_ACTIVITY = "community_activity"
    ADDRESS_FORMAT_EXPOSURE = "address_format_exposure"
    UTXO_MODEL = "utxo_model"


class ChainFactorStatus(enum.StrEnum):
    """Status values a chain factor may take (the spec's list)."""

    ACTIVE = "active"
    PLANNED = "planned"
    NONE = "none"
    VULNERABLE = "vulnerable"
    PROTECTIVE = "protective"


_COMMON_CHAIN_FACTORS = (
    ChainFactorId.SIGNATURE_SCHEME,
    ChainFactorId.PQC_MIGRATION_PLAN,
    ChainFactorId.COMMUNITY_ACTIVITY,
)

CHAIN_FACTORS_BY_FAMILY: Final[Mapping[Family, tuple[ChainFactorId, ...]]] = MappingProxyType(
    {
        Family.EVM: _COMMON_CHAIN_FACTORS,
        Family.BITCOIN: (*_COMMON_CHAIN_FACTORS, ChainFactorId.UTXO_MODEL),
        Family.SOLANA: (*_COMMON_CHAIN_FACTORS, ChainFactorId.ADDRESS_FORMAT_EXPOSURE),
        Family.COSMOS: _COMMON_CHAIN_FACTORS,
        Family.TRON: _COMMON_CHAIN_FACTORS,
    }
)
"""Which chain factors each family reports: every chain has the three common ones; the
UTXO model is a Bitcoin property and address-format exposure a Solana one."""

STATUS_POINTS: Final[Mapping[ChainFactorStatus, int]] = MappingProxyType(
    {
        ChainFactorStatus.PROTECTIVE: 4,
        ChainFactorStatus.ACTIVE: 3,
        ChainFactorStatus.PLANNED: 2,
        ChainFactorStatus.NONE: 1,
        ChainFactorStatus.VULNERABLE: 0,
    }
)
MAX_STATUS_POINTS: Final = max(STATUS_POINTS.values())


@dataclass(frozen=True, slots=True)
class ChainGrade:
    """A ``chainGrade`` letter, reached at ``min_percent`` of the possible points."""

    letter: str
    min_percent: int
    label: str


CHAIN_GRADES: Final[tuple[ChainGrade, ...]] = (
    ChainGrade("A", 80, "Quantum-ready: strong post-quantum readiness"),
    ChainGrade("B", 60, "Advanced: substantial post-quantum readiness"),
    ChainGrade("C", 40, "Prepared: partial post-quantum readiness"),
    ChainGrade("D", 20, "Early: limited post-quantum readiness"),
    ChainGrade("F", 0, "Unprepared: little or no post-quantum readiness"),
)
"""Best grade first; a chain gets the first grade whose threshold it reaches.

A grade is a share of points, which many mixes of statuses reach, so a label says only how
much readiness the share means, never which factor holds it (a chain's ``chainFactors``
say that): "no public plan" would be false for a chain graded F with a planned migration
but a vulnerable signature scheme and no community work."""
