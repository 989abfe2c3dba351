"""The spec's wallet-scan fields built from one scored row, and the frame builder."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from chains.observation import Exposure, Observation
from core.clock import iso
from scoring import (
    OBSERVATION_SCHEMA,
    PriceQuote,
    ReadinessData,
    format_amount,
    observations_to_frame,
    score_frame,
    score_observation,
    wallet_risk,
)


@pytest.mark.parametrize(
    ("amount", "decimals", "symbol", "text"),
    [
        (1_500_000_000_000_000_000, 18, "ETH", "1.5 ETH"),
        (0, 18, "ETH", "0 ETH"),
        (1, 18, "ETH", "0.000000000000000001 ETH"),
        (5_000_000_000, 8, "BTC", "50 BTC"),
        (123_456_789, 8, "BTC", "1.23456789 BTC"),
        (120_000_000 * 10**18 + 1, 18, "ETH", "120000000.000000000000000001 ETH"),
        (42, 0, "XYZ", "42 XYZ"),
    ],
)
def test_format_amount_is_exact(amount: int, decimals: int, symbol: str, text: str) -> None:
    assert format_amount(amount, decimals, symbol) == text


def test_format_amount_rejects_negative() -> None:
    with pytest.raises(ValueError):
        format_amount(-1, 18, "ETH")


def test_to_dict_has_the_spec_fields(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    observation = make_observation(balance=10**18, tx_count=2, outbound_tx_count=1, exposure=Exposure.EXPOSED_AT_REST)
    result = score_observation(observation, prices["ETH"], readiness).to_dict()
    assert list(result) == [
        "riskScore", "riskLabel", "riskValue", "chainGrade", "chainGradeLabel", "publicKeyExposed",
        "balanceAtRisk", "balanceAtRiskUsd", "riskFactors", "chainFactors", "scoringVersion", "priceAsOf",
    ]  # fmt: skip
    assert result["priceAsOf"] == iso(prices["ETH"].as_of)  # the price's age is visible
    assert (result["riskScore"], result["riskLabel"]) in {
        ("W1", "Low"),
        ("W2", "Medium"),
        ("W3", "High"),
        ("W4", "Critical"),
    }
    assert result["balanceAtRisk"] == "1 ETH" and result["balanceAtRiskUsd"] == 3000.0
    assert [f["factor"] for f in result["riskFactors"]] == [
        "public_key_exposure", "balance_at_risk", "transaction_frequency", "address_type", "address_reuse",
    ]  # fmt: skip
    assert [f["weight"] for f in result["riskFactors"]] == [0.35, 0.25, 0.15, 0.15, 0.1]
    assert all(set(f) == {"factor", "weight", "score", "detail"} for f in result["riskFactors"])
    assert [f["factor"] for f in result["chainFactors"]] == [
        "signature_scheme",
        "pqc_migration_plan",
        "community_activity",
    ]
    assert all(f["status"] in {"active", "planned", "none", "vulnerable", "protective"} for f in result["chainFactors"])
    assert result["chainGradeLabel"] == readiness.chains["ethereum"].grade.label


def test_unknown_price_result(make_observation: Callable[..., Observation], readiness: ReadinessData) -> None:
    result = score_observation(make_observation("celo", balance=25 * 10**17, tx_count=1), None, readiness)
    assert result.balance_at_risk == "2.5 CELO" and result.balance_at_risk_usd is None
    balance = result.risk_factors[1]
    assert (
        balance.score == 50
        and "no USD price is known" in balance.detail
        and "rather than assuming $0" in balance.detail
    )


def test_usd_is_rounded_to_cents(
    make_observation: Callable[..., Observation], now: object, readiness: ReadinessData
) -> None:
    observation = make_observation(balance=123_456_789_000_000_000)  # 0.123456789 ETH
    result = score_observation(observation, PriceQuote(3_333.33, now), readiness)  # type: ignore[arg-type]  # a fixture's datetime
    assert result.balance_at_risk_usd == 411.52


def test_wallet_risk_from_any_row_of_a_batch(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    rows = [
        make_observation(chain, balance=10**12, tx_count=3)
        for chain in ("ethereum", "bitcoin", "solana", "cosmos", "tron")
    ]
    scored = score_frame(observations_to_frame(rows, prices), readiness)
    for index, observation in enumerate(rows):
        assert wallet_risk(scored.row(index, named=True), readiness) == score_observation(
            observation, prices[observation.symbol], readiness
        )


def test_frame_schema_starts_with_the_observation_fields() -> None:
    fields = [f.name for f in dataclasses.fields(Observation) if f.name != "evidence"]  # not a scorer column
    assert OBSERVATION_SCHEMA.names()[: len(fields)] == fields
    assert OBSERVATION_SCHEMA.names()[len(fields) :] == ["price_usd", "price_as_of"]


def test_observations_to_frame_keeps_values(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote]
) -> None:
    observation = make_observation(
        "cosmos", balance=7, public_key=b"\x02" + bytes(32), exposure=Exposure.EXPOSED_AT_REST
    )
    row = observations_to_frame([observation], prices).row(0, named=True)
    assert {name: row[name] for name in ("chain", "balance", "public_key", "exposure", "symbol")} == {
        "chain": "cosmos", "balance": 7, "public_key": b"\x02" + bytes(32),
        "exposure": "EXPOSED_AT_REST", "symbol": "ATOM",
    }  # fmt: skip
    assert (row["price_usd"], row["price_as_of"]) == (prices["ATOM"].usd, prices["ATOM"].as_of)


def test_decimal_prices_fit(make_observation: Callable[..., Observation], now: Any, readiness: ReadinessData) -> None:
    # chains.clients.prices.Price carries a Decimal; any object with ``usd`` and ``as_of`` fits.
    observation = make_observation(balance=2 * 10**18)
    result = score_observation(observation, PriceQuote(Decimal("2500.10"), now), readiness)
    assert result.balance_at_risk_usd == 5000.2
