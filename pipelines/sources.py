"""Where the pipelines get chain data and prices: real clients, or a recorded snapshot.

``ChainData`` and ``PriceData`` are the two async interfaces the rescoring code uses.
``ClientChainData`` builds the chain clients of ``chains.clients`` from a
``ChainEndpoints`` configuration (the same one the API uses; nothing here reads the
environment). ``SnapshotChainData`` replays observations recorded in a JSON-lines file
(``write_snapshot``), for tests and demos without a node; ``RecordingChainData`` records
what a real source answers, to make such a file.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import httpx

from chains.clients import ChainClient, build_clients
from chains.clients.prices import ChainlinkPrices, Price, PriceOracle, StaticPrices
from chains.codecs.address import Address
from chains.endpoints import ChainEndpoints
from chains.environment import Environment
from chains.errors import ChainUnavailable
from chains.observation import AccountType, EvidenceKind, Exposure, ExposureEvidence, Observation
from chains.registry import Chain


class ChainData(Protocol):
    """Observes addresses of one chain in one environment (live: mainnets, test: testnets)."""

    async def observe(self, environment: Environment, chain: Chain, addresses: Sequence[Address]) -> list[Observation]:
        """One observation per address, in order; ``ChainUnavailable`` when the source fails."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class PriceData(Protocol):
    """USD prices of native coins, per environment (absent when unknown, never 0)."""

    async def prices(self, environment: Environment, symbols: Iterable[str]) -> dict[str, Price]:
        """The usable prices of ``symbols``."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def _http_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))


class ClientChainData:
    """The real chain clients, built per environment from the endpoint configuration."""

    def __init__(self, endpoints: ChainEndpoints, http: httpx.AsyncClient | None = None) -> None:
        self._endpoints = endpoints
        self._own_http = http is None
        self._http = http or _http_client()
        self._clients: dict[Environment, dict[Chain, ChainClient]] = {}

    def client(self, environment: Environment, chain: Chain) -> ChainClient:
        """The environment's client of ``chain`` (all 19 are built on first use)."""
        return self.clients(environment)[chain]

    def clients(self, environment: Environment) -> Mapping[Chain, ChainClient]:
        """Every chain's client of the environment (built on first use), for what needs the
        clients themselves (a wallet's coins) rather than observations."""
        if environment not in self._clients:
            self._clients[environment] = build_clients(self._endpoints, environment, self._http)
        return self._clients[environment]

    async def observe(self, environment: Environment, chain: Chain, addresses: Sequence[Address]) -> list[Observation]:
        return await self.client(environment, chain).observe(addresses)

    async def aclose(self) -> None:
        for clients in self._clients.values():
            for client in clients.values():
                await client.aclose()
        self._clients.clear()
        if self._own_http:
            await self._http.aclose()


class OraclePriceData:
    """Chainlink feeds on each environment's Ethereum endpoint, then the static price file."""

    def __init__(
        self, endpoints: ChainEndpoints, static: StaticPrices | None = None, http: httpx.AsyncClient | None = None
    ) -> None:
        self._own_http = http is None
        self._http = http or _http_client()
        static = static or StaticPrices.from_file()
        self._feeds: list[ChainlinkPrices] = []
        self._oracles: dict[Environment, PriceOracle] = {}
        for environment in Environment:
            feeds = ChainlinkPrices.from_endpoints(endpoints[environment], self._http)
            self._feeds.append(feeds)
            self._oracles[environment] = PriceOracle([feeds, static])

    async def prices(self, environment: Environment, symbols: Iterable[str]) -> dict[str, Price]:
        return await self._oracles[environment].prices(symbols)

    async def aclose(self) -> None:
        for feeds in self._feeds:
            await feeds.aclose()
        if self._own_http:
            await self._http.aclose()


class StaticPriceData:
    """One static price table for both environments (tests, offline runs)."""

    def __init__(self, static: StaticPrices) -> None:
        self._static = static

    async def prices(self, environment: Environment, symbols: Iterable[str]) -> dict[str, Price]:
        return await self._static.prices(symbols)

    async def aclose(self) -> None:
        return None


# --- snapshots --------------------------------------------------------------------------


def _encode(environment: Environment, observation: Observation) -> str:
    def value(name: str) -> Any:
        item = getattr(observation, name)
        if isinstance(item, bytes):
            return item.hex()
        if isinstance(item, datetime):
            return item.isoformat()
        if name == "evidence":
            return [evidence.to_dict() for evidence in item]
        return item

    fields = {f.name: value(f.name) for f in dataclasses.fields(Observation)}
    return json.dumps({"environment": environment.value, **fields}, separators=(",", ":"))


def _decode(line: str) -> tuple[Environment, Observation]:
    data = json.loads(line)
    environment = Environment(data.pop("environment"))
    for name in ("first_activity", "last_activity", "observed_at"):
        if data[name] is not None:
            data[name] = datetime.fromisoformat(data[name])
    if data["public_key"] is not None:
        data["public_key"] = bytes.fromhex(data["public_key"])
    data["account_type"] = AccountType(data["account_type"])
    data["exposure"] = Exposure(data["exposure"])
    data["evidence"] = tuple(
        ExposureEvidence(e["chain"], e["address"], EvidenceKind(e["kind"]), e["txid"], e["blockHeight"])
        for e in data.get("evidence") or ()
    )  # recordings made before evidence existed have none
    return environment, Observation(**data)


def write_snapshot(path: Path, observations: Iterable[tuple[Environment, Observation]]) -> int:
    """Write observations as JSON lines (one per address and environment); returns the count."""
    count = 0
    with open(path, "w", encoding="utf-8") as f:
        for environment, observation in observations:
            f.write(_encode(environment, observation) + "\n")
            count += 1
    return count


def read_snapshot(path: Path) -> dict[tuple[Environment, str, str], Observation]:
    """The observations of a snapshot file, keyed by (environment, chain, address)."""
    found = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                environment, observation = _decode(line)
                found[(environment, observation.chain, observation.address)] = observation
    return found


class SnapshotChainData:
    """Replays recorded observations. A chain listed in ``unavailable`` fails as an outage
    would, and so does an address the recording lacks (no data is not "no activity")."""

    def __init__(
        self, observations: Mapping[tuple[Environment, str, str], Observation], unavailable: Iterable[str] = ()
    ) -> None:
        self._observations = dict(observations)
        self._unavailable = frozenset(unavailable)

    @classmethod
    def from_file(cls, path: Path, unavailable: Iterable[str] = ()) -> SnapshotChainData:
        return cls(read_snapshot(path), unavailable)

    async def observe(self, environment: Environment, chain: Chain, addresses: Sequence[Address]) -> list[Observation]:
        if chain.value in self._unavailable:
            raise ChainUnavailable(f"{chain} snapshot source: marked unavailable", chain=chain.value)
        found = []
        for address in addresses:
            observation = self._observations.get((environment, chain.value, str(address)))
            if observation is None:
                raise ChainUnavailable(
                    f"{chain} snapshot has no {environment} observation of {address}", chain=chain.value
                )
            found.append(observation)
        return found

    async def aclose(self) -> None:
        return None


class RecordingChainData:
    """Wraps a source and keeps every observation it returns (``recorded``), for ``write_snapshot``."""

    def __init__(self, inner: ChainData) -> None:
        self.inner = inner
        self.recorded: list[tuple[Environment, Observation]] = []

    async def observe(self, environment: Environment, chain: Chain, addresses: Sequence[Address]) -> list[Observation]:
        found = await self.inner.observe(environment, chain, addresses)
        self.recorded.extend((environment, o) for o in found)
        return found

    async def aclose(self) -> None:
        await self.inner.aclose()
