"""The vectorised scorer on frames: bands, rounding, batch equals single, inputs."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import polars as pl
import pytest

from chains.observation import AccountType, Exposure, Observation
from scoring import (
    OBSERVATION_SCHEMA,
    SCORE_COLUMN,
    SCORED_SCHEMA,
    SCORING_VERSION,
    WEIGHT_PERCENT,
    PriceQuote,
    ReadinessData,
    observations_to_frame,
    score_frame,
)
from scoring.model import ADDRESS_TYPES, RISK_BANDS


@pytest.fixture()
def variety(make_observation: Callable[..., Observation]) -> list[Observation]:
    """Two hundred observations over every chain family, exposure and address type."""
    rng = random.Random(2026)
    kinds = [("ethereum", "eoa", AccountType.EOA), ("ethereum", "contract", AccountType.CONTRACT)]
    kinds += [("bitcoin", t, AccountType.UTXO_SCRIPT) for t in ("p2pkh", "p2wpkh", "p2sh", "p2tr", "p2pk", "odd")]
    kinds += [("solana", "ed25519", AccountType.EOA), ("solana", "pda", AccountType.PDA)]
    kinds += [
        ("cosmos", "secp256k1", AccountType.EOA),
        ("tron", "eoa", AccountType.EOA),
        ("celo", "eoa", AccountType.EOA),
    ]
    rows = []
    for _ in range(200):
        chain, address_type, account = rng.choice(kinds)
        tx = rng.choice([0, 1, 3, 17, 250, 9_999, 10_000, 123_456])
        rows.append(
            make_observation(
                chain,
                address_type=address_type,
                account_type=account,
                balance=rng.choice([0, 1, 10**6, 10**12, 10**20, 10**30]),
                tx_count=tx,
                outbound_tx_count=rng.randint(0, tx),
                exposure=rng.choice(list(Exposure)),
                public_key=rng.choice([None, None, b"\x02" + bytes(32)]),
                address_reuse_count=rng.choice([0, 1, 5, 99, 100, 5_000]),
            )
        )
    return rows


def test_batch_scores_equal_single_row_scores(
    variety: list[Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    batch = score_frame(observations_to_frame(variety, prices), readiness)
    singles = pl.concat([score_frame(observations_to_frame([o], prices), readiness) for o in variety])
    assert batch.equals(singles)
    shuffled = list(range(len(variety)))
    random.Random(1).shuffle(shuffled)
    reordered = score_frame(observations_to_frame([variety[i] for i in shuffled], prices), readiness)
    assert reordered.equals(batch[shuffled])


def test_output_schema_and_version(
    variety: list[Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    scored = score_frame(observations_to_frame(variety, prices), readiness)
    assert scored.schema == pl.Schema({**OBSERVATION_SCHEMA, **SCORED_SCHEMA})
    assert scored["scoring_version"].unique().to_list() == [SCORING_VERSION]
    assert scored.select(pl.col(SCORED_SCHEMA.names()).null_count()).row(0) == tuple(
        scored["price_usd"].null_count() if name == "balance_usd" else 0 for name in SCORED_SCHEMA.names()
    )


def test_risk_value_is_the_weighted_sum_rounded_half_up(
    variety: list[Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    scored = score_frame(observations_to_frame(variety, prices), readiness)
    for row in scored.iter_rows(named=True):
        exact = sum(WEIGHT_PERCENT[f] * row[column] for f, column in SCORE_COLUMN.items())  # hundredths
        assert row["risk_value"] == (exact + 50) // 100
        assert all(0 <= row[column] <= 100 for column in SCORE_COLUMN.values())


@pytest.fixture()
def grid(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> pl.DataFrame:
    """Bitcoin outputs over balances, tx counts, reuse counts and types: every risk value 0..~90."""
    rows = [
        make_observation(
            "bitcoin", address_type=t, balance=sats, tx_count=tx, address_reuse_count=reuse, exposure=exposure
        )
        for t in ADDRESS_TYPES
        for exposure in (Exposure.EXPOSED_ON_SPEND, Exposure.EXPOSED_AT_REST)
        for sats in (0, 10**4, 10**7, 10**9)
        for tx in (0, 1, 2, 4, 9, 20, 50, 120, 400, 1_500, 10_000)
        for reuse in (0, 1, 3, 8, 20, 100)
    ]
    return score_frame(observations_to_frame(rows, prices), readiness)


@pytest.mark.parametrize(("value", "band"), [(25, "W1"), (26, "W2"), (50, "W2"), (51, "W3"), (75, "W3"), (76, "W4")])
def test_band_boundaries(value: int, band: str, grid: pl.DataFrame) -> None:
    candidates = grid.filter(pl.col("risk_value") == value)
    assert candidates.height > 0, f"no grid row reaches {value}"
    assert candidates["risk_score"].unique().to_list() == [band]


def test_every_band_label_pairs_with_its_score() -> None:
    assert [b.label for b in RISK_BANDS] == ["Low", "Medium", "High", "Critical"]


def test_unknown_price(make_observation: Callable[..., Observation], readiness: ReadinessData) -> None:
    held = make_observation("celo", balance=100 * 10**18, tx_count=3)
    empty = make_observation("celo", tx_count=3)
    scored = score_frame(observations_to_frame([held, empty], {}), readiness)
    assert scored["balance_usd"].to_list() == [None, None]
    assert scored[SCORE_COLUMN[next(iter(SCORE_COLUMN))]].to_list() == [0, 0]
    assert scored["balance_at_risk_score"].to_list() == [50, 0]


def test_price_is_looked_up_by_symbol(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    rows = [make_observation(chain, balance=10**18) for chain in ("ethereum", "celo")]
    rows.append(replace(rows[0], chain="base"))
    scored = score_frame(observations_to_frame(rows, prices), readiness)
    assert scored["balance_usd"].to_list() == [3_000.0, None, 3_000.0]


def test_large_wei_balances_are_exact(make_observation: Callable[..., Observation], readiness: ReadinessData) -> None:
    wei = 120_000_000 * 10**18 + 1  # beyond Int64, exact in Int128
    scored = score_frame(observations_to_frame([make_observation(balance=wei)]), readiness)
    assert scored["balance"].item() == wei


def test_accepts_lazy_frames_and_plain_string_columns(
    variety: list[Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    frame = observations_to_frame(variety, prices)
    plain = frame.cast(
        {"chain": pl.String, "exposure": pl.String, "account_type": pl.String, "balance": pl.Decimal(38, 0)}
    )
    assert score_frame(plain.lazy(), readiness).equals(score_frame(frame, readiness))


def test_rescoring_replaces_old_score_columns(
    variety: list[Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    scored = score_frame(observations_to_frame(variety, prices), readiness)
    assert score_frame(scored, readiness).equals(scored)


def test_extra_columns_pass_through(make_observation: Callable[..., Observation], readiness: ReadinessData) -> None:
    frame = observations_to_frame([make_observation()]).with_columns(batch_id=pl.lit(7))
    assert score_frame(frame, readiness)["batch_id"].to_list() == [7]


def test_empty_frame(readiness: ReadinessData) -> None:
    assert score_frame(observations_to_frame([]), readiness).schema == pl.Schema(
        {**OBSERVATION_SCHEMA, **SCORED_SCHEMA}
    )


def test_default_readiness_is_the_packaged_file(
    make_observation: Callable[..., Observation], readiness: ReadinessData
) -> None:
    frame = observations_to_frame([make_observation()])
    assert score_frame(frame).equals(score_frame(frame, readiness))


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("balance", -1, "balance (1 rows)"),
        ("tx_count", -5, "tx_count (1 rows)"),
        ("price_usd", -3.0, "price_usd (1 rows)"),
        ("price_usd", float("nan"), "price_usd is NaN"),
        ("price_usd", float("inf"), "price_usd is infinite"),
    ],
)
def test_rejects_impossible_values(
    column: str, value: object, message: str, make_observation: Callable[..., Observation], readiness: ReadinessData
) -> None:
    frame = observations_to_frame([make_observation(), make_observation()]).with_columns(
        pl.when(pl.int_range(pl.len()) == 0)
        .then(pl.lit(value))
        .otherwise(pl.col(column))
        .cast(OBSERVATION_SCHEMA[column])
        .alias(column)
    )
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        score_frame(frame, readiness)


def test_rejects_missing_columns_and_unknown_chains(
    make_observation: Callable[..., Observation], readiness: ReadinessData
) -> None:
    frame = observations_to_frame([make_observation()])
    with pytest.raises(ValueError, match="lacks columns: price_usd, price_as_of"):
        score_frame(frame.drop("price_usd", "price_as_of"), readiness)
    with pytest.raises(pl.exceptions.InvalidOperationError):
        score_frame(frame.cast({"chain": pl.String}).with_columns(chain=pl.lit("algorand")), readiness)
