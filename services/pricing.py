"""USD prices for scans: the environment's price oracle, and no price at all where coins
have no market value (test networks and local nodes, ``EnvironmentEndpoints.has_market_value``):
10,000 ETH on anvil are not "$25,000,000 at risk"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from chains.clients.prices import Price, PriceOracle
from chains.endpoints import ChainEndpoints
from chains.environment import Environment
from chains.registry import CHAINS, Chain

#: How long a scan waits for each live price source before the next one (the static
#: file) answers. The price feeds live on the Ethereum endpoint: without this bound, a
#: hung Ethereum RPC would hold every chain's scans for its whole retry budget.
PRICE_WAIT_SECONDS = 2.0


class PriceLookup(Protocol):
    """Where a scan gets a chain's native-coin price (``ScanPrices`` for the API; prices
    fetched up front for a pipeline run, ``KnownPrices``)."""

    async def price(self, env: Environment, chain: Chain) -> Price | None:
        """The price of ``chain``'s coin in ``env``; None when unknown or without market value."""
        ...


class KnownPrices:
    """Prices already fetched, per (environment, chain); absent ones are unknown."""

    def __init__(self, prices: Mapping[tuple[Environment, Chain], Price | None]) -> None:
        self._prices = prices

    async def price(self, env: Environment, chain: Chain) -> Price | None:
        """The price fetched for ``chain`` in ``env``, None when none was."""
        return self._prices.get((env, chain))


class ScanPrices:
    """The native coin's USD price of a chain, for one scan."""

    def __init__(self, oracles: Mapping[Environment, PriceOracle], endpoints: ChainEndpoints) -> None:
        self._oracles = oracles
        self._endpoints = endpoints

    async def price(self, env: Environment, chain: Chain) -> Price | None:
        """The price of ``chain``'s coin in ``env``; None when unknown or without market value."""
        if not self._endpoints[env].has_market_value(chain):
            return None
        return await self._oracles[env].price(CHAINS[chain].symbol, PRICE_WAIT_SECONDS)
