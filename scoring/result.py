"""The spec's wallet-scan result for one scored row: numbers from the frame, plus words.

``score_frame`` computes every number for any number of rows; this module, used one row
at a time (the scan endpoint, a report), turns a scored row into the spec's fields:
riskScore, riskLabel, riskValue, chainGrade, chainGradeLabel, publicKeyExposed,
balanceAtRisk, balanceAtRiskUsd, riskFactors and chainFactors. The API adds address,
chain and scannedAt. Details explain each factor in words; they are never needed on the
ten-million-row path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chains.observation import AccountType, Observation
from core.clock import iso
from scoring.frame import UsdPrice, observations_to_frame
from scoring.model import (
    ACCOUNT_MODEL_FAMILIES,
    ADDRESS_TYPES,
    BALANCE_USD_CURVE,
    CHAIN_FAMILY,
    CHAIN_GRADES,
    EMPTY_BALANCE_CAP,
    EXPOSURE_SCORE,
    REUSE_CURVE,
    RISK_BANDS,
    TX_COUNT_CURVE,
    UNKNOWN_ADDRESS_TYPE_SCORE,
    UNKNOWN_PRICE_BALANCE_SCORE,
    ExposureBasis,
    LogCurve,
    RiskFactor,
    capped_when_empty,
    weight,
)
from scoring.readiness import ChainFactor, ReadinessData, load_readiness
from scoring.risk import SCORE_COLUMN, score_frame

_OFFLINE = "the key can be attacked offline at any time"


@dataclass(frozen=True, slots=True)
class RiskFactorResult:
    """One entry of ``riskFactors``: the spec's ``{factor, weight, score, detail}``."""

    factor: RiskFactor
    weight: float
    score: int
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the spec."""
        return {"factor": self.factor.value, "weight": self.weight, "score": self.score, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class WalletRisk:
    """The scoring part of the spec's wallet scan result, for one address."""

    risk_score: str
    risk_label: str
    risk_value: int
    chain_grade: str
    chain_grade_label: str
    public_key_exposed: bool
    balance_at_risk: str
    balance_at_risk_usd: float | None
    risk_factors: tuple[RiskFactorResult, ...]
    chain_factors: tuple[ChainFactor, ...]
    scoring_version: str
    price_as_of: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """The spec's camelCase fields; ``balanceAtRiskUsd`` is null when no price is known.

        Adds ``scoringVersion``, and a ``source`` link on each chain factor (new response
        fields are allowed within /v1).
        """
        return {
            "riskScore": self.risk_score,
            "riskLabel": self.risk_label,
            "riskValue": self.risk_value,
            "chainGrade": self.chain_grade,
            "chainGradeLabel": self.chain_grade_label,
            "publicKeyExposed": self.public_key_exposed,
            "balanceAtRisk": self.balance_at_risk,
            "balanceAtRiskUsd": self.balance_at_risk_usd,
            "riskFactors": [factor.to_dict() for factor in self.risk_factors],
            "chainFactors": [
                {"factor": f.factor.value, "status": f.status.value, "detail": f.detail, "source": f.source}
                for f in self.chain_factors
            ],
            "scoringVersion": self.scoring_version,
            "priceAsOf": None if self.price_as_of is None else iso(self.price_as_of),
        }


def score_observation(
    observation: Observation, price: UsdPrice | None, readiness: ReadinessData | None = None
) -> WalletRisk:
    """Score one observation end to end (what the scan endpoint needs).

    Runs the same vectorised ``score_frame`` as a pipeline, on a one-row frame, so the API
    and a batch run can never disagree. ``price`` is the USD quote of the native token, or
    None when unknown.
    """
    readiness = load_readiness() if readiness is None else readiness
    prices = {} if price is None else {observation.symbol: price}
    scored = score_frame(observations_to_frame([observation], prices), readiness)
    return wallet_risk(scored.row(0, named=True), readiness)


def score_observations(
    observations: Sequence[Observation],
    prices: Mapping[str, UsdPrice],
    readiness: ReadinessData | None = None,
) -> list[WalletRisk]:
    """Score many observations in one vectorised pass (a wallet's addresses): the same
    ``score_frame`` as ``score_observation``, one frame for all, so a thousand addresses cost
    one frame rather than a thousand. ``prices`` maps a native symbol to its quote."""
    readiness = load_readiness() if readiness is None else readiness
    if not observations:
        return []
    scored = score_frame(observations_to_frame(observations, prices), readiness)
    return [wallet_risk(row, readiness) for row in scored.iter_rows(named=True)]


def wallet_risk(row: Mapping[str, Any], readiness: ReadinessData) -> WalletRisk:
    """Build the result fields from one row of ``score_frame`` output (``frame.row(i, named=True)``)."""
    band = next(band for band in RISK_BANDS if band.score == row["risk_score"])
    grade = next(grade for grade in CHAIN_GRADES if grade.letter == row["chain_grade"])
    usd = row["balance_usd"]
    details = {
        RiskFactor.PUBLIC_KEY_EXPOSURE: _exposure_detail(row) + _empty_cap_note(row, RiskFactor.PUBLIC_KEY_EXPOSURE),
        RiskFactor.BALANCE_AT_RISK: _balance_detail(row),
        RiskFactor.TRANSACTION_FREQUENCY: _frequency_detail(row),
        RiskFactor.ADDRESS_TYPE: _address_type_detail(row) + _empty_cap_note(row, RiskFactor.ADDRESS_TYPE),
        RiskFactor.ADDRESS_REUSE: _reuse_detail(row),
    }
    return WalletRisk(
        risk_score=band.score,
        risk_label=band.label,
        risk_value=row["risk_value"],
        chain_grade=grade.letter,
        chain_grade_label=grade.label,
        public_key_exposed=row["public_key_exposed"],
        balance_at_risk=format_amount(row["balance"], row["decimals"], row["symbol"]),
        balance_at_risk_usd=None if usd is None else round(usd, 2),
        risk_factors=tuple(
            RiskFactorResult(factor, weight(factor), row[SCORE_COLUMN[factor]], detail)
            for factor, detail in details.items()
        ),
        chain_factors=readiness.chains[row["chain"]].factors,
        scoring_version=row["scoring_version"],
        price_as_of=row.get("price_as_of") if usd is not None else None,
    )


def format_amount(amount: int, decimals: int, symbol: str) -> str:
    """Exact decimal of an integer base-unit amount with its unit: ``1.5 ETH``, ``0 BTC``.

    Integer arithmetic only (no float, no exponent notation), trailing zeros dropped.
    """
    if amount < 0 or decimals < 0:
        raise ValueError(f"amount and decimals must not be negative, got {amount} and {decimals}")
    whole, fraction = divmod(amount, 10**decimals)
    digits = str(fraction).rjust(decimals, "0").rstrip("0") if decimals else ""
    return f"{whole}.{digits} {symbol}" if digits else f"{whole} {symbol}"


def _plural(count: int, noun: str) -> str:
    """``1 transaction``, ``14 transactions``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _usd(amount: float) -> str:
    """Dollars with cents, or significant digits for sub-dollar prices (``$0.0001234``)."""
    return f"${amount:,.2f}" if amount >= 1 or amount == 0 else f"${amount:.3g}"


def _curve_text(curve: LogCurve, zero: str = "none") -> str:
    """How a log curve maps its input, in words."""
    return (
        f"log scale from 0 at {zero} to 100 at {curve.full_scale:,.0f} {curve.unit} or more "
        f"(about {curve.points_per_decade:.1f} points per tenfold)"
    )


def _rule_score(row: Mapping[str, Any], factor: RiskFactor) -> int:
    """The score ``factor``'s rule gives this row before the empty-balance cap."""
    if factor is RiskFactor.PUBLIC_KEY_EXPOSURE:
        return EXPOSURE_SCORE[ExposureBasis(row["public_key_basis"])]
    rule = ADDRESS_TYPES.get(row["address_type"])
    return UNKNOWN_ADDRESS_TYPE_SCORE if rule is None else rule.score


def _empty_cap_note(row: Mapping[str, Any], factor: RiskFactor) -> str:
    """The sentence saying the empty-balance cap lowered this factor, or nothing."""
    before = _rule_score(row, factor)
    after = capped_when_empty(factor, before, row["balance"])
    if after == before:
        return ""
    return (
        f" The address holds nothing today, so this counts {after} instead of {before} (at most "
        f"{EMPTY_BALANCE_CAP}, the unknown midpoint): only funds sent here later would be exposed."
    )


def _exposure_detail(row: Mapping[str, Any]) -> str:
    """Why public_key_exposure scored what it did: the basis rule, with its evidence."""
    basis = ExposureBasis(row["public_key_basis"])
    score = EXPOSURE_SCORE[basis]
    outbound = row["outbound_tx_count"]
    rule = ADDRESS_TYPES.get(row["address_type"])
    if basis is ExposureBasis.CODE_CONTROLLED:
        what = (
            "A program-derived address is off the Ed25519 curve, so no private key exists; its program, "
            "usually upgradable by an ordinary key, decides over the funds"
            if row["account_type"] == AccountType.PDA.value
            else "A contract has no private key of its own; whoever controls it (owners, multisig signers, "
            "upgrade admins) usually holds elliptic-curve keys"
        )
        return (
            f"{what}. Those keys are not visible from this address, so the exposure is unknown: scored "
            f"{score}, the midpoint. Scan the controlling addresses too."
        )
    if basis in (ExposureBasis.ADDRESS_IS_KEY, ExposureBasis.ADDRESS_IS_KEY_SIGNED):
        token_account = row["address_type"] == "token_account"
        signed = ""
        if basis is ExposureBasis.ADDRESS_IS_KEY_SIGNED:
            whose = "Its owner's key" if token_account else "The key"
            signed = (
                f" {whose} has also signed at least {_plural(outbound, 'transaction')} here (the chain client "
                "checks the newest transactions, and counts one when it cannot rule signing out), so the key is "
                f"in use, which raises the score to {score}."
            )
        what = (
            "A token account is controlled by its owner wallet, and a wallet's address is its Ed25519 public key, "
            "so the controlling key is public"
            if token_account
            else "The address is the Ed25519 public key itself, so the key is public"
        )
        return (
            f"{what} with or without transactions and {_OFFLINE}. Baseline "
            f"{EXPOSURE_SCORE[ExposureBasis.ADDRESS_IS_KEY]}: every wallet on the chain shares this exposure, "
            f"which the chain grade also counts (address_format_exposure).{signed}"
        )
    if basis is ExposureBasis.AT_REST:
        causes = []
        if outbound:
            causes.append(f"revealed by {_plural(outbound, 'outbound transaction')}")
        if rule is not None and rule.key_in_address:
            causes.append(f"on chain by the {rule.label} format itself ({rule.reason})")
        if not causes:
            causes.append(
                "revealed on chain: by an earlier spend, or on another address or chain of the same key "
                "(exposureEvidence lists where)"
            )
        return f"Public key {' and '.join(causes)}; {_OFFLINE}."
    if basis is ExposureBasis.REVEALED_BY_RECORD:
        evidence = (
            f"this account signed {_plural(outbound, 'outbound transaction')} (the key is recoverable from a signature)"
            if outbound
            and CHAIN_FAMILY[row["chain"]] in ACCOUNT_MODEL_FAMILIES
            and row["account_type"] == AccountType.EOA.value
            else "the public key was read from the chain"
        )
        return (
            f"The chain client reported {row['exposure']}, but {evidence}; scored as exposed at rest "
            f"(fail closed): {_OFFLINE}."
        )
    if basis is ExposureBasis.UNDETERMINED:
        return (
            "Exposure could not be determined (for example an unknown script type or incomplete history); "
            "scored as exposed (fail closed) until the full history shows otherwise."
        )
    if basis is ExposureBasis.NOT_EXPOSED:
        return "The output type needs no elliptic-curve key material: nothing here for a quantum computer to attack."
    if CHAIN_FAMILY[row["chain"]] in ACCOUNT_MODEL_FAMILIES:
        return (
            "No public key on chain yet: this account has never signed a transaction. Its first outbound "
            "transaction reveals the key for good. The same account on the other chains of its key family is "
            "checked (coverage lists which); a key reused under an unrelated address cannot be seen."
        )
    return (
        "No public key on chain yet: only unspent hash-protected outputs and no outbound transactions. A spend "
        "reveals the key until it confirms; send the change to a fresh address. The other addresses of the same "
        "key hash are checked (coverage lists what could not be); disclosure outside the chain (a shared xpub) "
        "cannot be seen here."
    )


def _balance_detail(row: Mapping[str, Any]) -> str:
    """The amount, its USD value and price, or why the value is zero or unknown."""
    amount = format_amount(row["balance"], row["decimals"], row["symbol"])
    exposed = row["public_key_exposed"]
    if row["balance"] == 0:
        return (
            f"Holds {amount}: {'the key is exposed but ' if exposed else ''}there is no value at risk today; "
            "anything sent here later inherits this address's exposure."
        )
    if row["balance_usd"] is None:
        return (
            f"Holds {amount}, but no USD price is known, so the value at risk is unknown: scored "
            f"{UNKNOWN_PRICE_BALANCE_SCORE} (mid-scale) rather than assuming $0."
        )
    as_of: datetime | None = row["price_as_of"]
    when = f", price as of {as_of:%Y-%m-%d %H:%M %Z}" if as_of is not None else ""
    return (
        f"Holds {amount} ≈ {_usd(row['balance_usd'])} (at {_usd(row['price_usd'])} per {row['symbol']}{when}); "
        f"{_curve_text(BALANCE_USD_CURVE, zero='$0')}."
    )


def _frequency_detail(row: Mapping[str, Any]) -> str:
    """Transaction counts and why activity matters."""
    last: datetime | None = row["last_activity"]
    since = f", last active {last:%Y-%m-%d}" if last is not None else ""
    return (
        f"{_plural(row['tx_count'], 'transaction')}, {row['outbound_tx_count']:,} of them outbound{since}; "
        f"{_curve_text(TX_COUNT_CURVE)}. Each signature publishes the key again, and each spend from a "
        "hash-protected address opens an attack window while it confirms."
    )


def _address_type_detail(row: Mapping[str, Any]) -> str:
    """What the address format exposes by itself."""
    rule = ADDRESS_TYPES.get(row["address_type"])
    if rule is None:
        return (
            f"Unrecognised address type {row['address_type']!r}: scored {UNKNOWN_ADDRESS_TYPE_SCORE}, "
            "as the most exposed format (fail closed)."
        )
    return f"{rule.label}: {rule.reason}."


def _reuse_detail(row: Mapping[str, Any]) -> str:
    """How often the address was reused and why that matters on this kind of chain."""
    reuses = row["address_reuse_count"]
    scale = _curve_text(REUSE_CURVE)
    if not reuses:
        return f"No reuse recorded; {scale}."
    if CHAIN_FAMILY[row["chain"]] in ACCOUNT_MODEL_FAMILIES:
        why = "an account signs everything with one key, so once that key is exposed all later funds are exposed too"
    else:
        why = "funds that arrive after a spend from this address sit behind an already revealed key"
    return f"Used again {_plural(reuses, 'time')} after first use: {why}; {scale}."
