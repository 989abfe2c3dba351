"""USD prices: a Chainlink-aggregator stand-in on anvil, staleness, and the static fallback."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from chains.clients.prices import STATIC_PRICES_PATH, ChainlinkPrices, PriceOracle, StaticPrices
from chains.clients.transport import Timing, Transport
from chains.endpoints import ConfigError, EndpointConfig, RetrySettings
from chains.registry import CHAINS
from tests.anvil import Anvil, free_port, mock_aggregator_runtime

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def deploy_feed(
    anvil: Anvil,
    address: str,
    answer: int,
    updated: datetime,
    *,
    decimals: int = 8,
    round_id: int = 10,
    answered_in_round: int = 10,
) -> str:
    """Put the aggregator stand-in at ``address`` with the given round data in its storage."""
    anvil.rpc("anvil_setCode", address, "0x" + mock_aggregator_runtime().hex())
    stamp = int(updated.timestamp())
    for slot, value in enumerate((round_id, answer, stamp - 30, stamp, answered_in_round, decimals)):
        anvil.rpc("anvil_setStorageAt", address, hex(slot), "0x" + value.to_bytes(32, "big").hex())
    return address


def feed_address(n: int) -> str:
    return "0x" + f"{n:040x}"


def chainlink(url: str, http: httpx.AsyncClient, feeds: dict[str, str], max_age: float = 3600) -> ChainlinkPrices:
    timing = Timing(now=lambda: NOW)
    endpoint = EndpointConfig(url, timeout=2, retry=RetrySettings(attempts=1))
    return ChainlinkPrices(Transport(endpoint, http, "Chainlink", timing), feeds, max_age)


async def test_fresh_feeds_give_exact_decimal_prices_in_one_post(anvil: Anvil) -> None:
    eth = deploy_feed(anvil, feed_address(0xE7), 312_345_678_901, NOW - timedelta(minutes=5))
    btc = deploy_feed(anvil, feed_address(0xB7), 9_876_543_210_000_000, NOW - timedelta(minutes=1), decimals=8)
    posts = []

    async def count(request: httpx.Request) -> None:
        posts.append(request)

    async with httpx.AsyncClient(event_hooks={"request": [count]}) as http:
        prices = await chainlink(anvil.url, http, {"ETH": eth, "BTC": btc}).prices(["ETH", "BTC", "DOGE"])
    assert len(posts) == 1
    assert prices["ETH"].usd == Decimal("3123.45678901")
    assert prices["BTC"].usd == Decimal("98765432.1")
    assert prices["ETH"].as_of == (NOW - timedelta(minutes=5)).replace(microsecond=0)
    assert prices["ETH"].source.startswith("chainlink:0x") and "DOGE" not in prices


@pytest.mark.parametrize(
    ("answer", "age", "answered_in_round"),
    [
        (300_000_000_000, timedelta(hours=2), 10),
        (0, timedelta(minutes=1), 10),
        (300_000_000_000, timedelta(minutes=1), 9),
        (300_000_000_000, -timedelta(hours=1), 10),
    ],
    ids=["stale", "zero-answer", "incomplete-round", "future"],
)
async def test_unusable_answers_are_not_prices(
    anvil: Anvil, http, answer: int, age: timedelta, answered_in_round: int
) -> None:
    feed = deploy_feed(anvil, feed_address(0xF0), answer, NOW - age, answered_in_round=answered_in_round)
    assert await chainlink(anvil.url, http, {"ETH": feed}).prices(["ETH"]) == {}


async def test_oracle_falls_back_to_the_static_file_per_symbol(anvil: Anvil, http) -> None:
    eth = deploy_feed(anvil, feed_address(0xE8), 250_000_000_000, NOW - timedelta(minutes=1))
    stale_btc = deploy_feed(anvil, feed_address(0xB8), 9_000_000_000_000, NOW - timedelta(days=2))
    oracle = PriceOracle([chainlink(anvil.url, http, {"ETH": eth, "BTC": stale_btc}), StaticPrices.from_file()])
    prices = await oracle.prices(["ETH", "BTC", "NOPE"])
    assert prices["ETH"].source.startswith("chainlink:") and prices["BTC"].source.startswith("static:")
    assert await oracle.price("NOPE") is None


@pytest.mark.parametrize("broken", ["endpoint down", "no contract at the feed address"])
async def test_failing_feed_source_falls_back(anvil: Anvil, http, broken: str) -> None:
    url = f"http://127.0.0.1:{free_port()}" if broken == "endpoint down" else anvil.url
    oracle = PriceOracle([chainlink(url, http, {"ETH": feed_address(0xDEAD01)}), StaticPrices.from_file()])
    price = await oracle.price("ETH")
    assert price is not None and price.source.startswith("static:")


async def test_static_file_prices_every_native_coin_with_date_and_source() -> None:
    symbols = {info.symbol for info in CHAINS.values()}
    prices = await StaticPrices.from_file(STATIC_PRICES_PATH).prices(symbols)
    assert set(prices) == symbols
    assert all(p.usd > 0 and p.as_of.tzinfo is not None and p.source.startswith("static:") for p in prices.values())


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[prices.ETH]\nusd = 3000.5\nas_of = 2026-01-01\nsource = "x"', "decimal string"),
        ('[prices.ETH]\nusd = "0"\nas_of = 2026-01-01\nsource = "x"', "positive"),
        ('[prices.ETH]\nusd = "1"\nsource = "x"', "as_of"),
        ('[prices.ETH]\nusd = "1"\nas_of = 2026-01-01', "source"),
    ],
)
def test_bad_static_entries_are_refused(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=error):
        StaticPrices.from_file(path)
