"""USD prices of the native coins: Chainlink feeds first, a static file as the offline fallback.

``ChainlinkPrices`` reads each configured aggregator's ``decimals()`` and
``latestRoundData()`` through ``AsyncWeb3`` (one JSON-RPC batch for all feeds). An answer is
used only if it is positive, its round is complete (``answeredInRound >= roundId``) and its
``updatedAt`` is at most ``max_age`` seconds old. Anything else counts as no price, never
an old or zero one. ``StaticPrices`` reads ``chains/data/prices.toml``, where every entry
has its own ``as_of`` and ``source``. ``PriceOracle`` asks its sources in order, per symbol.

Prices are ``Decimal``; an unknown price is None, never 0.
"""

from __future__ import annotations

import asyncio
import logging
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Protocol, cast

import httpx
from web3.exceptions import Web3Exception

from chains.clients.transport import Timing, Transport
from chains.clients.web3_provider import web3_over
from chains.endpoints import ConfigError, EnvironmentEndpoints
from chains.errors import ChainUnavailable
from chains.registry import Chain

logger = logging.getLogger(__name__)

STATIC_PRICES_PATH = Path(__file__).resolve().parent.parent / "data" / "prices.toml"

#: The two AggregatorV3Interface functions used (Chainlink's documented ABI).
AGGREGATOR_ABI: Sequence[Mapping[str, Any]] = (
    {
        "name": "decimals",
        "type": "function",
        "stateMutability": "view",
        "inputs": [],
        "outputs": [{"name": "", "type": "uint8"}],
    },
    {
        "name": "latestRoundData",
        "type": "function",
        "stateMutability": "view",
        "inputs": [],
        "outputs": [
            {"name": "roundId", "type": "uint80"},
            {"name": "answer", "type": "int256"},
            {"name": "startedAt", "type": "uint256"},
            {"name": "updatedAt", "type": "uint256"},
            {"name": "answeredInRound", "type": "uint80"},
        ],
    },
)

_FUTURE_TOLERANCE = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class Price:
    """The USD price of one whole coin (``ETH``, ``BTC`` ...), when it held and where it came from."""

    symbol: str
    usd: Decimal
    as_of: datetime
    source: str


class PriceSource(Protocol):
    """Anything that can price coins by symbol."""

    async def prices(self, symbols: Iterable[str]) -> dict[str, Price]:
        """The symbols it has a usable price for (others are absent, never 0)."""
        ...


class ChainlinkPrices:
    """Chainlink USD aggregators on one EVM endpoint, with a staleness limit."""

    def __init__(self, transport: Transport, feeds: Mapping[str, str], max_age: float) -> None:
        """Read through ``transport`` (the environment's Ethereum RPC endpoint, with its
        retries and breaker); ``feeds`` maps a symbol to its aggregator address; ``max_age``
        is in seconds."""
        self._transport = transport
        self._web3 = web3 = web3_over(transport)
        self._feeds = {
            symbol: web3.eth.contract(address=web3.to_checksum_address(address), abi=AGGREGATOR_ABI)
            for symbol, address in feeds.items()
        }
        self._addresses = dict(feeds)
        self._max_age = timedelta(seconds=max_age)
        self._now = transport.timing.now

    @classmethod
    def from_endpoints(
        cls, endpoints: EnvironmentEndpoints, http: httpx.AsyncClient | None = None, timing: Timing | None = None
    ) -> ChainlinkPrices:
        """The environment's feeds, read on its Ethereum endpoint."""
        transport = Transport(endpoints.evm[Chain.ETHEREUM], http, "Chainlink price feeds", timing)
        return cls(transport, endpoints.price_feeds, endpoints.price_max_age)

    async def prices(self, symbols: Iterable[str]) -> dict[str, Price]:
        """Fresh prices of the configured ``symbols``, in one batch (see the module docstring).

        Raises ``ChainUnavailable`` when the endpoint fails.
        """
        wanted = [s for s in dict.fromkeys(symbols) if s in self._feeds]
        if not wanted:
            return {}
        async with self._web3.batch_requests() as batch:
            for symbol in wanted:
                batch.add(self._feeds[symbol].functions.decimals())
                batch.add(self._feeds[symbol].functions.latestRoundData())
            try:
                results = await batch.async_execute()
            except Web3Exception as exc:  # a revert or an undecodable answer (e.g. no contract there)
                raise ChainUnavailable(f"{self._transport.label}: batch failed ({type(exc).__name__}: {exc})") from None
        found = {}
        for i, symbol in enumerate(wanted):
            # web3 types batch results as raw RPCResponse dicts, but contract calls come back
            # ABI-decoded: decimals() as an int, latestRoundData() as a tuple of five ints.
            decimals, round_data = cast(int, results[2 * i]), cast(Sequence[int], results[2 * i + 1])
            price = self._price(symbol, decimals, round_data)
            if price is not None:
                found[symbol] = price
        return found

    def _price(self, symbol: str, decimals: int, round_data: Sequence[int]) -> Price | None:
        round_id, answer, _, updated_at, answered_in_round = round_data
        updated = datetime.fromtimestamp(updated_at, UTC)
        now = self._now()
        reason = None
        if answer <= 0:
            reason = f"non-positive answer {answer}"
        elif answered_in_round < round_id:
            reason = f"round {round_id} not answered (answeredInRound {answered_in_round})"
        elif now - updated > self._max_age:
            reason = f"stale: updated {updated:%Y-%m-%dT%H:%M:%SZ}, older than {self._max_age}"
        elif updated - now > _FUTURE_TOLERANCE:
            reason = f"updatedAt {updated:%Y-%m-%dT%H:%M:%SZ} is in the future"
        if reason is not None:
            logger.warning("Chainlink %s/USD feed %s not used: %s", symbol, self._addresses[symbol], reason)
            return None
        usd = Decimal(answer).scaleb(-decimals)
        return Price(symbol, usd, updated, f"chainlink:{self._addresses[symbol]}")

    async def aclose(self) -> None:
        """Close the HTTP client if this reader created it."""
        await self._transport.aclose()


def _static_price(symbol: str, entry: Mapping[str, Any]) -> Price:
    where = f"static price {symbol}"
    try:
        usd = Decimal(entry["usd"]) if isinstance(entry.get("usd"), str) else None
    except InvalidOperation:
        usd = None
    if usd is None:
        raise ConfigError(f'{where}: usd must be a decimal string such as "3012.55" (not a TOML float)')
    if not usd.is_finite() or usd <= 0:
        raise ConfigError(f"{where}: usd must be positive, got {usd}")
    as_of = entry.get("as_of")
    if isinstance(as_of, date) and not isinstance(as_of, datetime):
        as_of = datetime(as_of.year, as_of.month, as_of.day, tzinfo=UTC)
    if not isinstance(as_of, datetime):
        raise ConfigError(f"{where}: as_of must be a TOML date or date-time")
    source = entry.get("source")
    if not isinstance(source, str) or not source:
        raise ConfigError(f"{where}: source must name where the price comes from")
    return Price(symbol, usd, as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC), f"static:{source}")


class StaticPrices:
    """Prices from a TOML table ``[prices.<SYMBOL>]`` with ``usd``, ``as_of`` and ``source``."""

    def __init__(self, table: Mapping[str, Any]) -> None:
        """Validate every entry now (``ConfigError`` names the bad one)."""
        prices = table.get("prices", {})
        if not isinstance(prices, Mapping):
            raise ConfigError("static prices: [prices] must be a table")
        self._prices = {symbol: _static_price(symbol, entry) for symbol, entry in prices.items()}

    @classmethod
    def from_file(cls, path: str | Path = STATIC_PRICES_PATH) -> StaticPrices:
        """Load the static price file (by default ``chains/data/prices.toml``)."""
        try:
            return cls(tomllib.loads(Path(path).read_text(encoding="utf-8")))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None

    async def prices(self, symbols: Iterable[str]) -> dict[str, Price]:
        """The file's prices of ``symbols`` (absent when the file has none)."""
        return {s: self._prices[s] for s in symbols if s in self._prices}


class PriceOracle:
    """Asks each source in turn for the symbols still missing; a failing source is skipped."""

    def __init__(self, sources: Sequence[PriceSource]) -> None:
        """``sources`` in order of preference (live feeds first, the static file last)."""
        self._sources = tuple(sources)

    async def prices(self, symbols: Iterable[str], wait: float | None = None) -> dict[str, Price]:
        """The best available price of each symbol; symbols nobody prices are absent.

        ``wait`` bounds, in seconds, how long each source may take before it is skipped
        (its read cancelled, which its breaker counts as a failure). A scan passes it so
        that a hung price endpoint cannot hold up scans of every chain for the endpoint's
        whole retry budget; batch callers leave it None and let the retries run.
        """
        missing = list(dict.fromkeys(symbols))
        found: dict[str, Price] = {}
        for source in self._sources:
            if not missing:
                break
            try:
                async with asyncio.timeout(wait):
                    got = await source.prices(missing)
            except ChainUnavailable as exc:
                logger.warning("price source %s failed, trying the next: %s", type(source).__name__, exc)
                continue
            except TimeoutError:
                logger.warning(
                    "price source %s gave no answer within %ss, trying the next", type(source).__name__, wait
                )
                continue
            found.update(got)
            missing = [s for s in missing if s not in got]
        return found

    async def price(self, symbol: str, wait: float | None = None) -> Price | None:
        """The best available price of one symbol, or None (never 0); ``wait`` as in ``prices``."""
        return (await self.prices([symbol], wait)).get(symbol)
