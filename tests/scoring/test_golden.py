"""Golden cases per chain type: every factor score, the risk value and band, by hand.

Expected numbers were worked out by hand from docs/scoring.md, not copied from the code:
balance = round(100·log10(1+usd)/log10(1+10^6)), frequency = round(25·log10(1+tx)),
reuse = round(100·log10(1+n)/log10(101)), public_key_exposure and address_type at most 50
when the balance is 0, risk = (35·pk + 25·bal + 15·freq + 15·type + 10·reuse + 50) // 100.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chains.observation import AccountType, Exposure, Observation
from scoring import PriceQuote, ReadinessData, score_observation, score_observations

BTC = 100_000_000
ETH = 10**18
SOL = 10**9

# id: (chain, observation overrides, expected (pk, balance, frequency, type, reuse), value, band, exposed)
GOLDEN: dict[str, tuple[str, dict[str, Any], tuple[int, int, int, int, int], int, str, bool]] = {
    # $3,000; 1 tx; never signed: the key is still behind its hash.
    "evm_eoa_unexposed": ("ethereum", dict(balance=ETH, tx_count=1), (0, 58, 8, 60, 0), 25, "W1", False),
    # $4,500; nonce 14: the key is recoverable from any of its signatures.
    "evm_eoa_exposed": (
        "ethereum",
        dict(
            balance=3 * ETH // 2,
            tx_count=30,
            outbound_tx_count=14,
            exposure=Exposure.EXPOSED_AT_REST,
            address_reuse_count=29,
        ),
        (100, 61, 37, 60, 74),
        72,
        "W3",
        True,
    ),
    # $3M held by code: no key of its own, controllers unknown -> midpoint 50.
    "evm_contract": (
        "ethereum",
        dict(
            address_type="contract",
            account_type=AccountType.CONTRACT,
            balance=1_000 * ETH,
            tx_count=5_000,
            exposure=Exposure.UNDETERMINED,
        ),
        (50, 100, 92, 30, 0),
        61,
        "W3",
        False,
    ),
    # $45,000 in a P2PKH never spent from: spec says not exposed, public_key_exposure 0.
    "btc_p2pkh_unspent": (
        "bitcoin",
        dict(address_type="p2pkh", balance=BTC // 2, tx_count=2, address_reuse_count=1),
        (0, 78, 12, 40, 15),
        29,
        "W2",
        False,
    ),
    # $180,000 left in a P2PKH that was spent from: derived exposure, at rest.
    "btc_p2pkh_spent_with_balance": (
        "bitcoin",
        dict(
            address_type="p2pkh",
            balance=2 * BTC,
            tx_count=12,
            outbound_tx_count=3,
            exposure=Exposure.EXPOSED_AT_REST,
            address_reuse_count=11,
        ),
        (100, 88, 28, 40, 54),
        73,
        "W3",
        True,
    ),
    # $9,000 in a Taproot output never spent: the output key is on chain anyway.
    "btc_p2tr_unspent": (
        "bitcoin",
        dict(address_type="p2tr", balance=BTC // 10, tx_count=1, exposure=Exposure.EXPOSED_AT_REST),
        (100, 66, 8, 100, 0),
        68,
        "W3",
        True,
    ),
    # 50 BTC in a dormant P2PK ($4.5M): the balance is past full scale ($1M), so Critical.
    "btc_p2pk": (
        "bitcoin",
        dict(address_type="p2pk", balance=50 * BTC, tx_count=1, exposure=Exposure.EXPOSED_AT_REST),
        (100, 100, 8, 100, 0),
        76,
        "W4",
        True,
    ),
    # An empty Taproot output: the key is on chain, but nothing is held, so the exposure and
    # format factors count at most 50 (26.2 -> 26, Medium, not High).
    "btc_p2tr_empty": (
        "bitcoin",
        dict(address_type="p2tr", tx_count=1, exposure=Exposure.EXPOSED_AT_REST),
        (50, 0, 8, 50, 0),
        26,
        "W2",
        True,
    ),
    # 112 BTC ($10.08M) in a P2WPKH never spent from: key still hashed, yet it outranks the empty P2TR.
    "btc_p2wpkh_whale_unspent": (
        "bitcoin",
        dict(address_type="p2wpkh", balance=112 * BTC, tx_count=1),
        (0, 100, 8, 40, 0),
        32,
        "W2",
        False,
    ),
    # Unknown witness version: exposure and address type both fail closed.
    "btc_undetermined": (
        "bitcoin",
        dict(address_type="witness_v2_len16", balance=BTC // 100, tx_count=1, exposure=Exposure.UNDETERMINED),
        (100, 49, 8, 100, 0),
        63,
        "W3",
        True,
    ),
    # Solana receive-only wallet: the address is the key -> spec baseline 40.
    "solana_wallet_receive_only": (
        "solana",
        dict(balance=10 * SOL, tx_count=1, exposure=Exposure.EXPOSED_AT_REST),
        (40, 53, 8, 100, 0),
        43,
        "W2",
        True,
    ),
    # Solana wallet that signs: baseline 40 + 20 for signing history.
    "solana_wallet_signing": (
        "solana",
        dict(
            balance=10 * SOL,
            tx_count=50,
            outbound_tx_count=20,
            exposure=Exposure.EXPOSED_AT_REST,
            address_reuse_count=49,
        ),
        (60, 53, 43, 100, 85),
        64,
        "W3",
        True,
    ),
    # Solana wallet that signed and is now empty: 60 and 100 capped at 50.
    "solana_wallet_empty_signed": (
        "solana",
        dict(tx_count=5, outbound_tx_count=2, exposure=Exposure.EXPOSED_AT_REST, address_reuse_count=4),
        (50, 0, 19, 50, 35),
        31,
        "W2",
        True,
    ),
    # SPL token account (rent only, 0.00203928 SOL ≈ $0.31) whose owner signed one of its 2 transactions.
    "solana_token_account": (
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
        (60, 2, 12, 100, 15),
        40,
        "W2",
        True,
    ),
    # Program-derived address: off-curve, no private key at all.
    "solana_pda": (
        "solana",
        dict(
            address_type="pda",
            account_type=AccountType.PDA,
            balance=1_000 * SOL,
            tx_count=200,
            exposure=Exposure.NOT_EXPOSED,
        ),
        (50, 86, 58, 30, 0),
        52,
        "W3",
        False,
    ),
    # Cosmos account whose pub_key the LCD returned: $500.
    "cosmos_with_pub_key": (
        "cosmos",
        dict(
            balance=100_000_000,
            tx_count=8,
            outbound_tx_count=3,
            exposure=Exposure.EXPOSED_AT_REST,
            public_key=b"\x02" + bytes(32),
            address_reuse_count=7,
        ),
        (100, 45, 24, 60, 45),
        63,
        "W3",
        True,
    ),
    # Tron account with 40 signed txs that the client (wrongly) left EXPOSED_ON_SPEND:
    # raised to exposed from the record itself. $2,500, busy and reused: Critical.
    "tron_signed_reported_on_spend": (
        "tron",
        dict(balance=10_000_000_000, tx_count=100, outbound_tx_count=40, address_reuse_count=99),
        (100, 57, 50, 60, 100),
        76,
        "W4",
        True,
    ),
}


@pytest.mark.parametrize("case", GOLDEN)
def test_golden_case(
    case: str,
    make_observation: Callable[..., Observation],
    prices: dict[str, PriceQuote],
    readiness: ReadinessData,
) -> None:
    chain, overrides, factor_scores, value, band, exposed = GOLDEN[case]
    observation = make_observation(chain, **overrides)
    result = score_observation(observation, prices.get(observation.symbol), readiness)

    assert tuple(f.score for f in result.risk_factors) == factor_scores
    assert result.risk_value == value
    assert result.risk_score == band
    assert result.public_key_exposed is exposed
    assert all(f.detail.strip() for f in result.risk_factors)
    assert result.chain_grade == readiness.chains[chain].grade.letter


def test_a_batch_scores_every_golden_case_as_one_at_a_time(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    """``score_observations`` (one frame for a wallet's addresses) gives each row exactly what
    ``score_observation`` gives it alone."""
    observations = [make_observation(case[0], **case[1]) for case in GOLDEN.values()]
    batch = score_observations(observations, prices, readiness)
    assert batch == [score_observation(o, prices.get(o.symbol), readiness) for o in observations]
    assert score_observations([], prices, readiness) == []


def _details(observation: Observation, price: PriceQuote | None, readiness: ReadinessData) -> dict[str, str]:
    result = score_observation(observation, price, readiness)
    return {f.factor.value: f.detail for f in result.risk_factors}


def test_details_say_why(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    def details(case: str) -> dict[str, str]:
        chain, overrides, *_ = GOLDEN[case]
        observation = make_observation(chain, **overrides)
        return _details(observation, prices.get(observation.symbol), readiness)

    assert details("evm_eoa_exposed")["public_key_exposure"] == (
        "Public key revealed by 14 outbound transactions; the key can be attacked offline at any time."
    )
    assert "P2TR Taproot format itself" in details("btc_p2tr_unspent")["public_key_exposure"]
    assert "fail closed" in details("btc_undetermined")["public_key_exposure"]
    assert "fail closed" in details("btc_undetermined")["address_type"]
    assert "No public key on chain yet" in details("btc_p2pkh_unspent")["public_key_exposure"]
    assert "Baseline 40" in details("solana_wallet_receive_only")["public_key_exposure"]
    assert "no private key exists" in details("solana_pda")["public_key_exposure"]
    assert "no private key of its own" in details("evm_contract")["public_key_exposure"]
    tron = details("tron_signed_reported_on_spend")["public_key_exposure"]
    assert "reported EXPOSED_ON_SPEND" in tron and "40 outbound transactions" in tron
    assert "Holds 1.5 ETH ≈ $4,500.00" in details("evm_eoa_exposed")["balance_at_risk"]
    assert "100 at 1,000,000 USD" in details("evm_eoa_exposed")["balance_at_risk"]
    token = details("solana_token_account")["public_key_exposure"]
    assert token.startswith("A token account is controlled by its owner wallet") and "Its owner's key" in token
    assert (
        "has also signed at least 1 transaction" in token
        and "SPL token account" in details("solana_token_account")["address_type"]
    )
    empty = details("btc_p2tr_empty")
    for factor, before in (("public_key_exposure", 100), ("address_type", 100)):
        assert f"holds nothing today, so this counts 50 instead of {before}" in empty[factor]
    assert "counts 50 instead of 60" in details("solana_wallet_empty_signed")["public_key_exposure"]
    assert "holds nothing today" not in details("btc_p2wpkh_whale_unspent")["address_type"]


def test_zero_balance_exposed_is_low_value_at_risk(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    observation = make_observation(tx_count=5, outbound_tx_count=5, exposure=Exposure.EXPOSED_AT_REST)
    result = score_observation(observation, prices["ETH"], readiness)
    balance = result.risk_factors[1]
    assert (balance.factor.value, balance.score) == ("balance_at_risk", 0)
    assert "the key is exposed but there is no value at risk today" in balance.detail
    assert result.public_key_exposed and result.balance_at_risk == "0 ETH" and result.balance_at_risk_usd == 0.0


def test_public_key_in_record_raises_a_hash_protected_level(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    observation = make_observation("cosmos", balance=10**6, tx_count=1, public_key=b"\x03" + bytes(32))
    result = score_observation(observation, prices["ATOM"], readiness)
    assert result.public_key_exposed
    assert result.risk_factors[0].score == 100
    assert "the public key was read from the chain" in result.risk_factors[0].detail


def test_not_exposed_output_type_scores_zero(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    observation = make_observation("bitcoin", address_type="p2mr", balance=BTC, exposure=Exposure.NOT_EXPOSED)
    result = score_observation(observation, prices["BTC"], readiness)
    assert not result.public_key_exposed
    assert [f.score for f in result.risk_factors][0::3] == [0, 20]  # public_key_exposure, address_type
