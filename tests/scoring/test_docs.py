"""docs/scoring.md stays true: its worked examples, curve points and grades match the code.

Each marked table in the document (``<!-- check:NAME -->`` ... ``<!-- /check:NAME -->``)
is parsed and recomputed here. Change the policy, and this test lists every number the
document must be updated with.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chains.observation import AccountType, Exposure, Observation
from scoring import SCORING_VERSION, PriceQuote, ReadinessData, observations_to_frame, score_frame, score_observation
from scoring.model import BALANCE_USD_CURVE, REUSE_CURVE, TX_COUNT_CURVE, RiskFactor, weight

DOC = Path(__file__).resolve().parents[2] / "docs" / "scoring.md"
BTC, ETH, SOL = 10**8, 10**18, 10**9

# Worked examples of the document, by the id in its first column: (chain, overrides, USD price or None).
EXAMPLES: dict[str, tuple[str, dict[str, Any], float | None]] = {
    "eth-eoa-active": (
        "ethereum",
        dict(
            balance=3 * ETH // 2,
            tx_count=30,
            outbound_tx_count=14,
            exposure=Exposure.EXPOSED_AT_REST,
            address_reuse_count=29,
        ),
        3_000.0,
    ),
    "eth-eoa-fresh": ("ethereum", dict(balance=ETH, tx_count=1), 3_000.0),
    "eth-exposed-empty": (
        "ethereum",
        dict(tx_count=40, outbound_tx_count=20, exposure=Exposure.EXPOSED_AT_REST, address_reuse_count=19),
        3_000.0,
    ),
    "eth-contract": (
        "ethereum",
        dict(
            address_type="contract",
            account_type=AccountType.CONTRACT,
            balance=1_000 * ETH,
            tx_count=5_000,
            exposure=Exposure.NOT_EXPOSED,
        ),
        3_000.0,
    ),
    "btc-p2wpkh-fresh": ("bitcoin", dict(address_type="p2wpkh", balance=BTC // 2, tx_count=1), 90_000.0),
    "btc-p2pk-dormant": (
        "bitcoin",
        dict(address_type="p2pk", balance=50 * BTC, tx_count=1, exposure=Exposure.EXPOSED_AT_REST),
        90_000.0,
    ),
    "btc-p2pkh-reused-whale": (
        "bitcoin",
        dict(
            address_type="p2pkh",
            balance=1_000 * BTC,
            tx_count=500,
            outbound_tx_count=120,
            exposure=Exposure.EXPOSED_AT_REST,
            address_reuse_count=400,
        ),
        90_000.0,
    ),
    "btc-p2tr-empty": ("bitcoin", dict(address_type="p2tr", tx_count=1, exposure=Exposure.EXPOSED_AT_REST), 90_000.0),
    "btc-p2wpkh-whale-fresh": ("bitcoin", dict(address_type="p2wpkh", balance=112 * BTC, tx_count=1), 90_000.0),
    "btc-undetermined": (
        "bitcoin",
        dict(address_type="witness_v2_len16", balance=BTC // 100, tx_count=1, exposure=Exposure.UNDETERMINED),
        90_000.0,
    ),
    "sol-wallet-receive-only": ("solana", dict(balance=10 * SOL, tx_count=1, exposure=Exposure.EXPOSED_AT_REST), 150.0),
    "sol-token-account": (
        "solana",
        dict(
            address_type="token_account",
            balance=2_039_280,
            tx_count=2,
            outbound_tx_count=1,
            exposure=Exposure.EXPOSED_AT_REST,
            public_key=bytes(range(32)),
            address_reuse_count=1,
        ),
        150.0,
    ),
    "sol-pda": (
        "solana",
        dict(
            address_type="pda",
            account_type=AccountType.PDA,
            balance=1_000 * SOL,
            tx_count=200,
            exposure=Exposure.NOT_EXPOSED,
        ),
        150.0,
    ),
    "celo-no-price": (
        "celo",
        dict(balance=100 * ETH, tx_count=3, outbound_tx_count=2, exposure=Exposure.EXPOSED_AT_REST),
        None,
    ),
}


def _table(name: str) -> list[list[str]]:
    """Body rows of the markdown table between the ``check:name`` markers."""
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"<!-- check:{name} -->(.*?)<!-- /check:{name} -->", text, re.S)
    assert match, f"docs/scoring.md lacks the check:{name} table"
    lines = [line.strip() for line in match.group(1).strip().splitlines() if line.strip().startswith("|")]
    return [[cell.strip().strip("`") for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_version_is_documented() -> None:
    assert f"`{SCORING_VERSION}`" in DOC.read_text(encoding="utf-8")


def test_weights_table() -> None:
    assert {row[0]: float(row[1]) for row in _table("weights")} == {f.value: weight(f) for f in RiskFactor}


def test_worked_examples(make_observation: Callable[..., Observation], now: Any, readiness: ReadinessData) -> None:
    rows = _table("worked-examples")
    assert [row[0] for row in rows] == list(EXAMPLES)
    for row in rows:
        chain, overrides, usd = EXAMPLES[row[0]]
        observation = make_observation(chain, **overrides)
        result = score_observation(observation, None if usd is None else PriceQuote(usd, now), readiness)
        scores = [f.score for f in result.risk_factors]
        weighted = sum(round(f.weight * 100) * f.score for f in result.risk_factors)
        usd_text = "unknown" if result.balance_at_risk_usd is None else f"{result.balance_at_risk_usd:,.2f}"
        computed = [
            row[0], result.balance_at_risk, usd_text, *map(str, scores),
            str(weighted), str(result.risk_value), result.risk_score, result.chain_grade,
        ]  # fmt: skip
        assert row == computed, f"docs row {row[0]} should read: | {' | '.join(computed)} |"


@pytest.mark.parametrize(
    ("name", "curve", "column"),
    [
        ("balance-curve", BALANCE_USD_CURVE, "balance_at_risk_score"),
        ("frequency-curve", TX_COUNT_CURVE, "transaction_frequency_score"),
        ("reuse-curve", REUSE_CURVE, "address_reuse_score"),
    ],
)
def test_curve_points(
    name: str, curve: Any, column: str, make_observation: Callable[..., Observation], now: Any, readiness: ReadinessData
) -> None:
    points = [(int(row[0].replace(",", "").lstrip("$")), int(row[1])) for row in _table(name)]
    field = {"balance-curve": "balance", "frequency-curve": "tx_count", "reuse-curve": "address_reuse_count"}[name]
    # A price of $1 per whole ETH makes the balance in ETH equal to its USD value.
    rows = [make_observation(**{field: x * ETH if field == "balance" else x}) for x, _ in points]
    scored = score_frame(observations_to_frame(rows, {"ETH": PriceQuote(1.0, now)}), readiness)
    assert list(zip([x for x, _ in points], scored[column].to_list(), strict=True)) == points
    assert points[-1][0] >= curve.full_scale and points[-1][1] == 100


def test_chain_grades_table(readiness: ReadinessData) -> None:
    computed = {
        chain: [info.grade.letter, " ".join(f.status.value for f in info.factors)]
        for chain, info in readiness.chains.items()
    }
    assert {row[0]: row[1:] for row in _table("chain-grades")} == computed
