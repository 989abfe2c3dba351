"""``ChainObserver``: the family fan-out's failure rules, with in-memory chain clients.

The anvil and Esplora tests (tests/api/test_scan_family.py, test_scan_key.py) cover real
data; these cover what is hard to provoke there: a sibling that hangs, one that answers
garbage, the scanned chain failing while siblings are in flight, and shared fetches.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import pytest

from chains.codecs.address import Address
from chains.codecs.evm import EvmAddress
from chains.environment import Environment
from chains.errors import ChainUnavailable, MalformedChainData
from chains.observation import Observation
from chains.registry import EVM_CHAINS, Chain, Network
from services.observer import ChainObserver
from tests.observations import observation

ACCOUNT = EvmAddress(bytes.fromhex("ab" * 20), Chain.ETHEREUM, Network.MAINNET)


def seen(address: Address, outbound: int = 0) -> Observation:
    """What a memory client says of ``address``: funded, ``outbound`` signed transactions."""
    return observation(
        address.chain.value, address=str(address), balance=10**18, tx_count=outbound, outbound_tx_count=outbound
    )


@dataclasses.dataclass
class MemoryClient:
    """A chain client answering from memory, or hanging, or failing."""

    chain: Chain
    outbound: int = 0
    behaviour: str = "answer"  # answer | hang | garbage | down
    calls: int = 0

    async def observe(self, addresses: Sequence[Address]) -> list[Observation]:
        self.calls += 1
        await asyncio.sleep(0.01)
        if self.behaviour == "hang":
            await asyncio.sleep(3600)
        if self.behaviour == "garbage":
            raise MalformedChainData("not JSON")
        if self.behaviour == "down":
            raise ChainUnavailable("connection refused")
        return [seen(a, self.outbound) for a in addresses]

    async def aclose(self) -> None:
        pass


def observer(clients: dict[Chain, MemoryClient], wait: float = 0.3) -> ChainObserver:
    chains = [c.value for c in clients]
    return ChainObserver({Environment.LIVE: clients}, chains, wait)  # type: ignore[dict-item]


async def test_a_hung_or_broken_sibling_is_unavailable_and_never_fails_the_scan():
    clients = {
        Chain.ETHEREUM: MemoryClient(Chain.ETHEREUM),
        Chain.BASE: MemoryClient(Chain.BASE, behaviour="hang"),
        Chain.POLYGON: MemoryClient(Chain.POLYGON, behaviour="garbage"),
        Chain.ARBITRUM: MemoryClient(Chain.ARBITRUM, outbound=3),
    }
    merged, coverage = await asyncio.wait_for(observer(clients).family(Environment.LIVE, ACCOUNT), 5)
    assert coverage.checked == ("ethereum", "arbitrum")
    assert {"base", "polygon", "optimism", "tron"} <= set(coverage.unavailable)  # hung, broken, not configured
    assert merged.public_key_exposed and [e.chain for e in merged.evidence] == ["arbitrum"]


async def test_the_scanned_chain_failing_fails_the_scan_and_stops_waiting_for_siblings():
    clients = {Chain.ETHEREUM: MemoryClient(Chain.ETHEREUM, behaviour="down"), Chain.BASE: MemoryClient(Chain.BASE)}
    with pytest.raises(ChainUnavailable):
        await observer(clients).family(Environment.LIVE, ACCOUNT)


async def test_identical_family_scans_share_each_chain_s_fetch():
    clients = {chain: MemoryClient(chain) for chain in EVM_CHAINS}
    watcher = observer(clients)
    results = await asyncio.gather(*(watcher.family(Environment.LIVE, ACCOUNT) for _ in range(5)))
    assert all(coverage.complete is False for _, coverage in results)  # tron is not configured
    assert {client.calls for client in clients.values()} == {1}


async def test_all_family_chains_answering_is_complete():
    clients = {chain: MemoryClient(chain) for chain in (*EVM_CHAINS, Chain.TRON)}
    merged, coverage = await observer(clients).family(Environment.LIVE, ACCOUNT)
    assert coverage.complete and coverage.unavailable == () and len(coverage.checked) == 16
    assert not merged.public_key_exposed and merged.evidence == ()
