"""The vectorised scorer: one function scores one observation or ten million the same way.

``score_frame`` turns the observation frame (``scoring.frame``) into factor scores, the
weighted ``risk_value``, its W1–W4 band and the chain grade, with lazy Polars
expressions only: no Python code runs per row. Table lookups (``_lookup``) index a small
literal series by an enum's physical code, which is what keeps ten million rows fast.
Words for the API are built afterwards, for one row at a time, by ``scoring.result``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

import polars as pl

from chains.observation import AccountType, Exposure
from chains.registry import Family
from scoring.frame import conform_observations
from scoring.model import (
    ACCOUNT_MODEL_FAMILIES,
    ADDRESS_IS_KEY_FAMILIES,
    ADDRESS_TYPES,
    BALANCE_USD_CURVE,
    CAPPED_WHEN_EMPTY,
    CHAIN_FAMILY,
    CHAIN_GRADES,
    EMPTY_BALANCE_CAP,
    EXPOSURE_SCORE,
    KEY_ON_CHAIN,
    REUSE_CURVE,
    RISK_BANDS,
    SCORING_VERSION,
    SUPPORTED_CHAINS,
    TX_COUNT_CURVE,
    UNKNOWN_ADDRESS_TYPE_SCORE,
    UNKNOWN_PRICE_BALANCE_SCORE,
    WEIGHT_PERCENT,
    ExposureBasis,
    LogCurve,
    RiskFactor,
)
from scoring.readiness import ReadinessData, load_readiness

EXPOSURE_BASIS_DTYPE: Final = pl.Enum([basis.value for basis in ExposureBasis])
RISK_SCORE_DTYPE: Final = pl.Enum([band.score for band in RISK_BANDS])
CHAIN_GRADE_DTYPE: Final = pl.Enum([grade.letter for grade in CHAIN_GRADES])

SCORE_COLUMN: Final[Mapping[RiskFactor, str]] = MappingProxyType(
    {factor: f"{factor.value}_score" for factor in RiskFactor}
)
"""Output column holding each factor's 0–100 score."""

SCORED_SCHEMA: Final = pl.Schema(
    {
        "public_key_basis": EXPOSURE_BASIS_DTYPE,
        "public_key_exposed": pl.Boolean(),
        "balance_usd": pl.Float64(),
        **{column: pl.UInt8() for column in SCORE_COLUMN.values()},
        "risk_value": pl.UInt8(),
        "risk_score": RISK_SCORE_DTYPE,
        "chain_grade": CHAIN_GRADE_DTYPE,
        "scoring_version": pl.Categorical(),  # one value per run: cheap to store and to broadcast
    }
)
"""Columns ``score_frame`` appends to the observation columns (replacing older ones)."""


def score_frame(observations: pl.DataFrame | pl.LazyFrame, readiness: ReadinessData | None = None) -> pl.DataFrame:
    """Score every observation row: factor scores, risk value and band, chain grade.

    ``observations`` has the columns of ``scoring.frame.OBSERVATION_SCHEMA`` (build it
    with ``observations_to_frame`` or straight from storage); it is validated first.
    ``readiness`` defaults to the packaged file; pass it in to read that file only once.
    Returns the input columns followed by ``SCORED_SCHEMA``'s, in input row order. The
    input columns are not copied, and a row scores the same alone as among millions.
    """
    frame = conform_observations(observations).drop(SCORED_SCHEMA.names(), strict=False)
    readiness = load_readiness() if readiness is None else readiness
    grades = [readiness.chains[chain].grade.letter for chain in SUPPORTED_CHAINS]
    basis = pl.col("public_key_basis")
    scores = (
        frame.lazy()
        .with_columns(public_key_basis=_exposure_basis(), balance_usd=_balance_usd())
        .with_columns(
            _factor(
                RiskFactor.PUBLIC_KEY_EXPOSURE, _lookup(basis, [EXPOSURE_SCORE[b] for b in ExposureBasis], pl.UInt8)
            ),
            _factor(RiskFactor.BALANCE_AT_RISK, _balance_score()),
            _factor(RiskFactor.TRANSACTION_FREQUENCY, _count_curve(pl.col("tx_count"), TX_COUNT_CURVE)),
            _factor(RiskFactor.ADDRESS_TYPE, _address_type_score()),
            _factor(RiskFactor.ADDRESS_REUSE, _count_curve(pl.col("address_reuse_count"), REUSE_CURVE)),
            public_key_exposed=_lookup(basis, [b in KEY_ON_CHAIN for b in ExposureBasis], pl.Boolean),
            chain_grade=_lookup(pl.col("chain"), grades, CHAIN_GRADE_DTYPE),
        )
        .with_columns(risk_value=weighted_risk_value())
        .with_columns(
            risk_score=_lookup(pl.col("risk_value"), _band_table(), RISK_SCORE_DTYPE),
            scoring_version=pl.lit(SCORING_VERSION, pl.Categorical()),
        )
        .select(SCORED_SCHEMA.names())
        .collect()
    )
    return frame.hstack(scores)


def _factor(factor: RiskFactor, score: pl.Expr) -> pl.Expr:
    """The score column of ``factor``: ``score``, capped at ``EMPTY_BALANCE_CAP`` on a zero
    balance for the factors in ``CAPPED_WHEN_EMPTY`` (``model.capped_when_empty``)."""
    if factor in CAPPED_WHEN_EMPTY:
        score = pl.when(pl.col("balance") == 0).then(score.clip(upper_bound=EMPTY_BALANCE_CAP)).otherwise(score)
    return score.alias(SCORE_COLUMN[factor])


def _lookup(index: pl.Expr, values: Sequence[object], dtype: pl.DataType | type[pl.DataType]) -> pl.Expr:
    """``values[index]`` per row; ``index`` is an enum (its physical code) or an integer."""
    return pl.lit(pl.Series(values, dtype=dtype)).gather(index.to_physical())


def _per_chain(families: frozenset[Family]) -> pl.Expr:
    """Per row: is the row's chain in one of ``families``?"""
    return _lookup(pl.col("chain"), [CHAIN_FAMILY[chain] in families for chain in SUPPORTED_CHAINS], pl.Boolean)


def _first_match(rules: Sequence[tuple[pl.Expr, pl.Expr]], default: pl.Expr) -> pl.Expr:
    """The value of the first rule whose condition holds, else ``default`` (vectorised)."""
    expr = default
    for condition, value in reversed(rules):
        expr = pl.when(condition).then(value).otherwise(expr)
    return expr


def _exposure_basis() -> pl.Expr:
    """Which ``ExposureBasis`` rule applies to each row (order documented on the enum).

    The client's exposure level is trusted, but only raised, never lowered: on an
    account-model chain any signed transaction publishes the key (recoverable from an ECDSA
    signature, or stored with the account), and a ``public_key`` in the record means the
    key was read from the chain.
    """
    account, exposure = pl.col("account_type"), pl.col("exposure")
    key_account = account == AccountType.EOA.value
    signed = pl.col("outbound_tx_count") > 0
    address_is_key = _per_chain(ADDRESS_IS_KEY_FAMILIES) & key_account
    account_model = _per_chain(ACCOUNT_MODEL_FAMILIES)
    revealed = pl.col("public_key").is_not_null() | (account_model & key_account & signed)

    def basis(value: ExposureBasis) -> pl.Expr:
        return pl.lit(value.value, EXPOSURE_BASIS_DTYPE)

    return _first_match(
        [
            (account.is_in([AccountType.CONTRACT.value, AccountType.PDA.value]), basis(ExposureBasis.CODE_CONTROLLED)),
            (address_is_key & signed, basis(ExposureBasis.ADDRESS_IS_KEY_SIGNED)),
            (address_is_key, basis(ExposureBasis.ADDRESS_IS_KEY)),
            (exposure == Exposure.EXPOSED_AT_REST.value, basis(ExposureBasis.AT_REST)),
            (revealed, basis(ExposureBasis.REVEALED_BY_RECORD)),
            (exposure == Exposure.UNDETERMINED.value, basis(ExposureBasis.UNDETERMINED)),
            (exposure == Exposure.NOT_EXPOSED.value, basis(ExposureBasis.NOT_EXPOSED)),
        ],
        basis(ExposureBasis.ON_SPEND),
    )


def _balance_usd() -> pl.Expr:
    """USD value of the balance (float; exact amounts are formatted by ``scoring.result``).

    ``10 ** decimals`` comes from a 256-entry table (``decimals`` is a UInt8): a lookup is
    ten times cheaper than a power per row, and the powers are exact up to 10**22.
    """
    scale = _lookup(pl.col("decimals"), [10.0**decimals for decimals in range(256)], pl.Float64)
    return pl.col("balance").cast(pl.Float64) / scale * pl.col("price_usd")


def _log_curve(value: pl.Expr, curve: LogCurve) -> pl.Expr:
    """``curve`` applied to a non-negative column: integer 0–100, rounded half up.

    Inputs are validated non-negative (``conform_observations``), so only the top is
    clipped; the cast cannot overflow after that clip, so it skips the range check.
    """
    raw = (value.cast(pl.Float64) + 1).log10() * curve.points_per_decade
    return (raw + 0.5).floor().clip(upper_bound=100).cast(pl.UInt8, wrap_numerical=True)


def _count_curve(count: pl.Expr, curve: LogCurve) -> pl.Expr:
    """``curve`` applied to an integer count, by lookup in a table built with ``_log_curve``.

    Same numbers as ``_log_curve`` (the table is computed by it for 0..full_scale, and
    counts beyond full scale score 100), about three times faster than a log per row.
    """
    full_scale = int(curve.full_scale)
    table = pl.select(_log_curve(pl.int_range(0, full_scale + 1), curve)).to_series()
    return pl.lit(table).gather(count.clip(upper_bound=full_scale))


def _balance_score() -> pl.Expr:
    """balance_at_risk: the USD curve; without a price, 0 for an empty balance, else the
    documented unknown-price score (never a pretend $0)."""
    unknown_price = (pl.col("balance") > 0).cast(pl.UInt8) * UNKNOWN_PRICE_BALANCE_SCORE
    return _log_curve(pl.col("balance_usd"), BALANCE_USD_CURVE).fill_null(unknown_price)


def _address_type_score() -> pl.Expr:
    """address_type: the ``ADDRESS_TYPES`` score, unknown types failing closed."""
    address_type = pl.col("address_type")
    by_score: dict[int, list[str]] = {}
    for name, rule in ADDRESS_TYPES.items():
        by_score.setdefault(rule.score, []).append(name)
    return _first_match(
        [
            (pl.any_horizontal(address_type == name for name in names), pl.lit(score, pl.UInt8))
            for score, names in by_score.items()
        ],
        pl.lit(UNKNOWN_ADDRESS_TYPE_SCORE, pl.UInt8),
    )


def weighted_risk_value() -> pl.Expr:
    """``risk_value`` from the factor score columns (``SCORE_COLUMN``): their weighted
    sum, rounded half up, ``(Σ weight% · score + 50) // 100`` as a UInt8.

    Exact integer arithmetic (weights are whole percent), so 25.5 always rounds to 26 and
    the band boundaries never depend on float error. A null score counts as 0 here
    (``score_frame`` never leaves one); the pipelines' checks use this same expression
    to verify stored rows.
    """
    weighted = pl.sum_horizontal(
        pl.col(SCORE_COLUMN[factor]).cast(pl.UInt16) * pl.lit(percent, pl.UInt16)
        for factor, percent in WEIGHT_PERCENT.items()
    )
    return ((weighted + 50) // 100).cast(pl.UInt8, wrap_numerical=True)  # at most 100


def _band_table() -> list[str]:
    """The ``riskScore`` band of every ``riskValue`` 0–100 (raises if the bands leave a gap)."""
    return [next(band.score for band in RISK_BANDS if band.low <= value <= band.high) for value in range(101)]
