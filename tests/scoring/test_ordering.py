"""The ranking the factor curves must produce (docs/scoring.md, "Ordering"): what is at stake
comes first, an empty address is never High, and an exposed key ranks above a hidden one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import polars as pl
import pytest

from chains.observation import AccountType, Exposure, Observation
from scoring import PriceQuote, ReadinessData, observations_to_frame, score_frame, score_observation
from scoring.model import ADDRESS_TYPES, EMPTY_BALANCE_CAP, RiskFactor, capped_when_empty

BTC = 10**8
ACTIVITY = [(tx, reuse) for tx in (1, 2, 9, 50, 400, 10_000) for reuse in (0, 1, 8, 100)]
KINDS = [
    *[("bitcoin", t, AccountType.UTXO_SCRIPT) for t in ADDRESS_TYPES],
    ("bitcoin", "witness_v9_len40", AccountType.UTXO_SCRIPT),
    ("ethereum", "eoa", AccountType.EOA),
    ("ethereum", "contract", AccountType.CONTRACT),
    ("solana", "ed25519", AccountType.EOA),
    ("solana", "token_account", AccountType.EOA),
    ("solana", "pda", AccountType.PDA),
    ("cosmos", "secp256k1", AccountType.EOA),
]


def _scored(rows: list[Observation], prices: dict[str, PriceQuote], readiness: ReadinessData) -> pl.DataFrame:
    return score_frame(observations_to_frame(rows, prices), readiness)


def test_an_empty_address_is_never_high(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    rows = [
        make_observation(
            chain,
            address_type=address_type,
            account_type=account,
            tx_count=tx,
            outbound_tx_count=tx,
            address_reuse_count=reuse,
            exposure=exposure,
            public_key=b"\x02" + bytes(32),
        )
        for chain, address_type, account in KINDS
        for exposure in Exposure
        for tx, reuse in ACTIVITY
    ]
    scored = _scored(rows, prices, readiness)
    assert scored["risk_value"].max() == 50  # the most active empty address: Medium at most
    assert scored.select(pl.col("public_key_exposure_score", "address_type_score").max()).row(0) == (50, 50)
    assert scored["public_key_exposed"].any()  # the cap lowers the score, not the exposure itself


def test_a_funded_never_spent_whale_outranks_an_empty_exposed_output(
    make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    empty_p2tr = make_observation("bitcoin", address_type="p2tr", tx_count=1, exposure=Exposure.EXPOSED_AT_REST)
    whale = make_observation("bitcoin", address_type="p2wpkh", balance=112 * BTC, tx_count=1)  # $10.08M
    empty, funded = (score_observation(o, prices["BTC"], readiness) for o in (empty_p2tr, whale))
    assert (empty.risk_value, empty.risk_score) == (26, "W2") and empty.public_key_exposed
    assert (funded.risk_value, funded.risk_score) == (32, "W2") and not funded.public_key_exposed


@pytest.mark.parametrize("address_type", ["p2pkh", "p2wpkh", "p2sh", "p2wsh"])
def test_with_equal_activity_60k_never_spent_outranks_any_empty_address(
    address_type: str,
    make_observation: Callable[..., Observation],
    now: datetime,
    readiness: ReadinessData,
) -> None:
    prices = {"BTC": PriceQuote(60_000.0, now)}  # 1 BTC = $60,000
    for tx, reuse in ACTIVITY:
        funded = make_observation(
            "bitcoin", address_type=address_type, balance=BTC, tx_count=tx, address_reuse_count=reuse
        )
        empties = [
            make_observation(chain, address_type=t, account_type=account, tx_count=tx, outbound_tx_count=tx,
                             address_reuse_count=reuse, exposure=Exposure.EXPOSED_AT_REST)
            for chain, t, account in KINDS
        ]  # fmt: skip
        funded_value = _scored([funded], prices, readiness)["risk_value"].item()
        assert funded_value > _scored(empties, {}, readiness)["risk_value"].max(), (tx, reuse)


@pytest.mark.parametrize("btc_usd", [14_200.0, 20_000.0, 60_000.0, 90_000.0, 150_000.0])
def test_a_50_btc_p2pk_output_is_critical_at_realistic_prices(
    btc_usd: float, make_observation: Callable[..., Observation], now: datetime, readiness: ReadinessData
) -> None:
    satoshi = make_observation(
        "bitcoin", address_type="p2pk", balance=50 * BTC, tx_count=1, exposure=Exposure.EXPOSED_AT_REST
    )
    result = score_observation(satoshi, PriceQuote(btc_usd, now), readiness)
    assert (result.risk_score, result.risk_label) == ("W4", "Critical"), result.risk_value


@pytest.mark.parametrize("sats", [0, 1, 10**5, 10**8, 10**10])
def test_an_exposed_key_ranks_above_a_hidden_one_with_the_same_balance(
    sats: int, make_observation: Callable[..., Observation], prices: dict[str, PriceQuote], readiness: ReadinessData
) -> None:
    for tx, reuse in ACTIVITY:
        same = dict(balance=sats, tx_count=tx, address_reuse_count=reuse)
        pairs = [
            (
                make_observation("bitcoin", address_type=exposed, exposure=Exposure.EXPOSED_AT_REST, **same),
                make_observation("bitcoin", address_type=hidden, **same),
            )
            for exposed in ("p2pk", "p2tr", "p2pkh", "p2wpkh")
            for hidden in ("p2pkh", "p2wpkh", "p2sh", "p2wsh")
        ]
        eth = 10**10 * sats  # the same number of whole coins on Ethereum
        pairs.append(
            (
                make_observation(balance=eth, tx_count=tx, outbound_tx_count=tx, address_reuse_count=reuse,
                                 exposure=Exposure.EXPOSED_AT_REST),
                make_observation(balance=eth, tx_count=tx, address_reuse_count=reuse),
            )
        )  # fmt: skip
        exposed = _scored([a for a, _ in pairs], prices, readiness)["risk_value"]
        hidden = _scored([b for _, b in pairs], prices, readiness)["risk_value"]
        assert (exposed > hidden).all(), (sats, tx, reuse)


def test_the_cap_applies_to_the_exposure_and_format_factors_only() -> None:
    assert capped_when_empty(RiskFactor.PUBLIC_KEY_EXPOSURE, 100, 0) == EMPTY_BALANCE_CAP
    assert capped_when_empty(RiskFactor.ADDRESS_TYPE, 40, 0) == 40
    assert capped_when_empty(RiskFactor.ADDRESS_TYPE, 100, 1) == 100
    assert capped_when_empty(RiskFactor.TRANSACTION_FREQUENCY, 100, 0) == 100
