"""The one interface of every chain client, and the registry that builds them by family.

A client answers ``observe(addresses)`` with one ``Observation`` per address, in input
order, in as few upstream round trips as its source allows. An address the chain never saw
still gets an ``Observation`` (``has_activity`` False); the scan layer turns that into
SCAN_003. An upstream failure raises ``ChainUnavailable`` (SCAN_004).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypedDict, TypeVar

import httpx

from chains.clients.transport import Timing
from chains.codecs.address import Address
from chains.endpoints import ChainEndpoints, EnvironmentEndpoints
from chains.environment import Environment
from chains.errors import InvalidAddress
from chains.observation import AccountType, Exposure, ExposureEvidence, Observation
from chains.registry import CHAINS, Chain, Family

A = TypeVar("A", bound=Address)


class ChainClient(Protocol):
    """Reads what one chain knows about addresses."""

    chain: Chain

    async def observe(self, addresses: Sequence[Address]) -> list[Observation]:
        """One observation per address, same order; raises ``ChainUnavailable`` on upstream failure."""
        ...

    async def aclose(self) -> None:
        """Release connections the client opened itself (not a shared ``httpx.AsyncClient``)."""
        ...


def typed_addresses(addresses: Sequence[Address], kind: type[A], chain: Chain) -> list[A]:
    """``addresses`` checked to be ``kind`` (``InvalidAddress`` SCAN_001 otherwise).

    An EVM address parsed for ``ethereum`` is accepted by every EVM client: the format is
    the same on all 15 chains.
    """
    typed: list[A] = []
    for address in addresses:
        if not isinstance(address, kind):
            raise InvalidAddress(
                f"the {chain} client takes {kind.family} addresses, got a {address.family} address ({address})",
                chain=str(chain),
                address=str(address),
            )
        typed.append(address)
    return typed


class ActivityTimes(TypedDict):
    """``Snapshot.observation``'s first and last activity, for a client that sets them together."""

    first_activity: datetime | None
    last_activity: datetime | None


class AccountCounts(TypedDict):
    """``Snapshot.observation``'s balance and counts, for a client that shares them between its cases."""

    balance: int
    tx_count: int
    outbound_tx_count: int
    address_reuse_count: int


class CountsAndTimes(AccountCounts, ActivityTimes):
    """Both of the above."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What every observation of one ``observe`` call shares: source, height and time."""

    chain: Chain
    source: str
    height: int | None
    observed_at: datetime

    def observation(
        self,
        address: str,
        *,
        address_type: str,
        account_type: AccountType,
        balance: int,
        tx_count: int,
        outbound_tx_count: int,
        exposure: Exposure,
        public_key: bytes | None = None,
        address_reuse_count: int = 0,
        first_activity: datetime | None = None,
        last_activity: datetime | None = None,
        evidence: tuple[ExposureEvidence, ...] = (),
    ) -> Observation:
        """An ``Observation`` of ``address`` with the chain's symbol and decimals filled in."""
        info = CHAINS[self.chain]
        return Observation(
            chain=self.chain.value,
            address=address,
            address_type=address_type,
            account_type=account_type,
            balance=balance,
            decimals=info.decimals,
            symbol=info.symbol,
            tx_count=tx_count,
            outbound_tx_count=outbound_tx_count,
            exposure=exposure,
            public_key=public_key,
            address_reuse_count=address_reuse_count,
            first_activity=first_activity,
            last_activity=last_activity,
            source=self.source,
            height=self.height,
            observed_at=self.observed_at,
            evidence=evidence,
        )


ClientBuilder = Callable[[Chain, EnvironmentEndpoints, httpx.AsyncClient | None, Timing | None], ChainClient]
"""Builds a family's client for one chain from an environment's endpoints."""

_BUILDERS: dict[Family, ClientBuilder] = {}


def register(family: Family) -> Callable[[ClientBuilder], ClientBuilder]:
    """Decorator: make ``builder`` the way ``build_clients`` creates ``family``'s clients."""

    def decorate(builder: ClientBuilder) -> ClientBuilder:
        """Record ``builder`` for ``family`` and return it unchanged."""
        _BUILDERS[family] = builder
        return builder

    return decorate


def build_clients(
    endpoints: ChainEndpoints,
    environment: Environment,
    http_client: httpx.AsyncClient | None = None,
    *,
    timing: Timing | None = None,
) -> dict[Chain, ChainClient]:
    """A client for each of the 19 chains (registry order), on ``environment``'s endpoints.

    All clients share ``http_client`` (one connection pool; each endpoint keeps its own
    retry policy and circuit breaker). Bitcoin is served by Esplora; the Bitcoin Core
    UTXO scanner is built separately (``BitcoinCoreClient.from_endpoints``) because it
    does not see history. The caller closes the clients with ``aclose``.
    """
    selected = endpoints[environment]
    return {chain: _BUILDERS[info.family](chain, selected, http_client, timing) for chain, info in CHAINS.items()}
