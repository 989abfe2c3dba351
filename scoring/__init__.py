"""qday risk scoring: which addresses a quantum computer breaks first, and why.

Pure functions over Polars frames. ``score_frame`` scores any number of observations
(``chains.observation.Observation`` rows plus a USD price) with one vectorised pass:
five address-level factors, the weighted ``riskValue`` 0–100, its W1–W4 band and the
chain's A–F post-quantum readiness grade. ``score_observation`` / ``wallet_risk`` turn
one scored row into the spec's wallet-scan fields with words for every factor. The
policy (weights, curves, thresholds, version) lives in ``scoring.model``; the chain
readiness facts in ``scoring/data/chain_readiness.toml``. See ``docs/scoring.md``.
"""

from scoring.frame import OBSERVATION_SCHEMA, PriceQuote, UsdPrice, conform_observations, observations_to_frame
from scoring.model import SCORING_VERSION, WEIGHT_PERCENT, RiskFactor, weight
from scoring.readiness import (
    ChainFactor,
    ChainReadiness,
    ReadinessData,
    ReadinessDataError,
    grade_chain,
    load_readiness,
    parse_readiness,
)
from scoring.result import (
    RiskFactorResult,
    WalletRisk,
    format_amount,
    score_observation,
    score_observations,
    wallet_risk,
)
from scoring.risk import SCORE_COLUMN, SCORED_SCHEMA, score_frame, weighted_risk_value

__all__ = [
    "OBSERVATION_SCHEMA",
    "SCORED_SCHEMA",
    "SCORE_COLUMN",
    "SCORING_VERSION",
    "WEIGHT_PERCENT",
    "ChainFactor",
    "ChainReadiness",
    "PriceQuote",
    "ReadinessData",
    "ReadinessDataError",
    "RiskFactor",
    "RiskFactorResult",
    "UsdPrice",
    "WalletRisk",
    "conform_observations",
    "format_amount",
    "grade_chain",
    "load_readiness",
    "observations_to_frame",
    "parse_readiness",
    "score_frame",
    "score_observation",
    "score_observations",
    "wallet_risk",
    "weight",
    "weighted_risk_value",
]
