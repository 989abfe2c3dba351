"""Benchmark: the batched EVM client against the raw batched JSON-RPC round trip, on anvil.

Run with ``.venv/bin/python -m bench.bench_chains [--sizes 100 1000] [--rounds 7]``. It needs
anvil (``make anvil`` or ``QDAY_ANVIL``) and prints SKIPPED without it.

For N addresses the client sends ``eth_blockNumber`` plus ``eth_getBalance``,
``eth_getTransactionCount`` and ``eth_getCode`` per address in one POST, then builds N
``Observation`` records. The ceiling is the same calls as one raw ``httpx`` POST with
``json.dumps``/``json.loads`` and no parsing of the results. Both run on one anvil,
alternating, and the medians of ``--rounds`` rounds are compared (target: client ≥ 0.50
of raw). For reference the same calls go through web3 8's ``AsyncWeb3.batch_requests``;
that is why the client does not use it. Half the addresses hold a balance and none has
sent a transaction, so every address costs the same three calls. Nothing here asserts on
time; the script prints, and exits 1 below the target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from web3 import AsyncWeb3

from bench.report import Figure
from chains.clients.evm import EvmClient
from chains.clients.transport import Transport
from chains.clients.web3_provider import TransportProvider
from chains.codecs.evm import EvmAddress
from chains.endpoints import EndpointConfig
from chains.registry import Chain, Network
from tests.anvil import MISSING_ANVIL, Anvil, anvil_binary

TARGET = 0.50
_METHODS = ("eth_getBalance", "eth_getTransactionCount", "eth_getCode")


def _addresses(anvil: Anvil, count: int) -> list[EvmAddress]:
    addresses = [EvmAddress(os.urandom(20), Chain.ETHEREUM, Network.MAINNET) for _ in range(count)]
    for i, address in enumerate(addresses[::2]):
        anvil.fund(str(address), 10**18 + i)
    return addresses


async def _raw(http: httpx.AsyncClient, url: str, addresses: list[EvmAddress]) -> int:
    """The ceiling: one POST of the same calls, decoded, results not interpreted."""
    calls = [{"jsonrpc": "2.0", "id": 0, "method": "eth_blockNumber", "params": []}]
    for i, address in enumerate(addresses):
        text = "0x" + address.payload.hex()
        calls += [
            {"jsonrpc": "2.0", "id": 3 * i + k + 1, "method": m, "params": [text, "latest"]}
            for k, m in enumerate(_METHODS)
        ]
    response = await http.post(url, content=json.dumps(calls), headers={"content-type": "application/json"})
    return len(json.loads(response.content)) // 3


async def _web3(w3: AsyncWeb3, addresses: list[EvmAddress]) -> int:
    """The same calls through web3's batch API (reference only)."""
    async with w3.batch_requests() as batch:
        batch.add(w3.eth.get_block_number())
        for address in addresses:
            checksum = w3.to_checksum_address(str(address))
            batch.add(w3.eth.get_balance(checksum))
            batch.add(w3.eth.get_transaction_count(checksum))
            batch.add(w3.eth.get_code(checksum))
        results = await batch.async_execute()
    return len(results) // 3


async def _timed(run: Callable[[], Awaitable[int]]) -> float:
    """Observations per second of one call of ``run``."""
    start = time.perf_counter()
    count = await run()
    return count / (time.perf_counter() - start)


async def _bench(anvil: Anvil, sizes: Sequence[int], rounds: int, web3_sizes: set[int]) -> list[Figure]:
    figures = []
    async with httpx.AsyncClient(timeout=120) as http:
        endpoint = EndpointConfig(anvil.url, timeout=120)
        w3 = AsyncWeb3(TransportProvider(Transport(endpoint, http, "bench web3")))
        for size in sizes:
            addresses = _addresses(anvil, size)
            client = EvmClient(Chain.ETHEREUM, endpoint, http, max_batch=3 * size + 1)
            observed = await client.observe(addresses)
            assert len(observed) == size and sum(o.balance > 0 for o in observed) == (size + 1) // 2
            await _raw(http, anvil.url, addresses)  # warm both paths
            raw_rates, client_rates = [], []
            for i in range(rounds):
                raw_rates.append(await _timed(partial(_raw, http, anvil.url, addresses)))
                client_rates.append(await _timed(partial(_observe, client, addresses)))
                print(
                    f"N={size} round {i + 1}/{rounds}: raw {raw_rates[-1]:,.0f} obs/s, "
                    f"client {client_rates[-1]:,.0f} obs/s",
                    flush=True,
                )
            raw = statistics.median(raw_rates)
            figures.append(
                Figure(
                    f"EVM client observations, N={size}",
                    statistics.median(client_rates),
                    "obs/s",
                    raw,
                    "raw batched JSON-RPC",
                    TARGET,
                )
            )
            print(figures[-1].line(), flush=True)
            if size in web3_sizes:
                rate = statistics.median([await _timed(partial(_web3, w3, addresses)) for _ in range(min(rounds, 3))])
                figures.append(
                    Figure(f"web3 8 batch_requests (reference), N={size}", rate, "obs/s", raw, "raw batched JSON-RPC")
                )
                print(figures[-1].line(), flush=True)
    return figures


async def _observe(client: EvmClient, addresses: list[EvmAddress]) -> int:
    """The client under test: observations built from the same calls."""
    return len(await client.observe(addresses))


def measure(
    sizes: Sequence[int] = (100, 1000), rounds: int = 7, web3_sizes: Sequence[int] = (100, 1000)
) -> list[Figure]:
    """Run the benchmark on a fresh anvil (printing each round) and return the client's rate
    beside the raw round trip at each size; no figures (SKIPPED printed) without anvil."""
    binary = anvil_binary()
    if binary is None:
        print(f"SKIPPED: {MISSING_ANVIL}")
        return []
    anvil = Anvil(binary)
    try:
        print(
            f"anvil {anvil.rpc('web3_clientVersion')} on {anvil.url}; sizes {list(sizes)}, {rounds} rounds", flush=True
        )
        return asyncio.run(_bench(anvil, sizes, rounds, set(web3_sizes)))
    finally:
        anvil.stop()


def main() -> int:
    """Run the benchmark; exit 1 if the client is below the target ratio at any size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--web3-sizes",
        type=int,
        nargs="*",
        default=[100, 1000],
        help="sizes at which to also time web3's batch API (slow)",
    )
    args = parser.parse_args()
    return 1 if any(figure.met is False for figure in measure(args.sizes, args.rounds, args.web3_sizes)) else 0


if __name__ == "__main__":
    sys.exit(main())
