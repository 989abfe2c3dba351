"""The policy tables: weights, bands, curves and families are complete and consistent."""

from __future__ import annotations

import math
import re

from chains.registry import Family
from scoring import model


def test_weights_are_the_spec_weights_and_sum_to_one() -> None:
    assert {f.value: model.weight(f) for f in model.RiskFactor} == {
        "public_key_exposure": 0.35,
        "balance_at_risk": 0.25,
        "transaction_frequency": 0.15,
        "address_type": 0.15,
        "address_reuse": 0.10,
    }
    assert sum(model.WEIGHT_PERCENT.values()) == 100
    assert math.isclose(sum(model.weight(f) for f in model.RiskFactor), 1.0)


def test_bands_cover_0_to_100_without_gaps() -> None:
    assert [(b.score, b.label, b.low, b.high) for b in model.RISK_BANDS] == [
        ("W1", "Low", 0, 25),
        ("W2", "Medium", 26, 50),
        ("W3", "High", 51, 75),
        ("W4", "Critical", 76, 100),
    ]
    for lower, upper in zip(model.RISK_BANDS, model.RISK_BANDS[1:], strict=False):
        assert upper.low == lower.high + 1


def test_version_is_calendar_style() -> None:
    assert re.fullmatch(r"20\d\d\.(1[0-2]|[1-9])\.\d+", model.SCORING_VERSION)


def test_every_score_in_the_tables_is_0_to_100() -> None:
    scores = [*model.EXPOSURE_SCORE.values(), *(r.score for r in model.ADDRESS_TYPES.values())]
    scores += [model.UNKNOWN_ADDRESS_TYPE_SCORE, model.UNKNOWN_PRICE_BALANCE_SCORE]
    assert all(0 <= s <= 100 for s in scores)
    assert set(model.EXPOSURE_SCORE) == set(model.ExposureBasis)


def test_spec_behaviours_are_in_the_tables() -> None:
    assert model.EXPOSURE_SCORE[model.ExposureBasis.ADDRESS_IS_KEY] == 40  # Solana baseline
    assert model.EXPOSURE_SCORE[model.ExposureBasis.ON_SPEND] == 0  # unspent hash-protected Bitcoin
    assert model.EXPOSURE_SCORE[model.ExposureBasis.UNDETERMINED] == model.EXPOSURE_SCORE[model.ExposureBasis.AT_REST]
    assert model.ExposureBasis.UNDETERMINED in model.KEY_ON_CHAIN
    assert model.ExposureBasis.CODE_CONTROLLED not in model.KEY_ON_CHAIN
    assert model.UNKNOWN_ADDRESS_TYPE_SCORE == max(r.score for r in model.ADDRESS_TYPES.values())


def test_the_19_chains_in_spec_order() -> None:
    assert model.SUPPORTED_CHAINS == (
        "ethereum", "bitcoin", "solana", "base", "arbitrum", "optimism", "polygon", "zksync", "linea",
        "scroll", "mantle", "blast", "sonic", "gnosis", "celo", "bsc", "avalanche", "cosmos", "tron",
    )  # fmt: skip
    assert set(model.CHAIN_FACTORS_BY_FAMILY) == set(Family)


def test_grades_best_first_ending_at_zero() -> None:
    thresholds = [g.min_percent for g in model.CHAIN_GRADES]
    assert [g.letter for g in model.CHAIN_GRADES] == ["A", "B", "C", "D", "F"]
    assert thresholds == sorted(thresholds, reverse=True) and thresholds[-1] == 0
