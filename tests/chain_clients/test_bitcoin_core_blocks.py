"""The Bitcoin Core block source (``tip``, ``block_hashes``, ``raw_blocks``) against the
loopback Core node of ``tests/core_rpc.py``, serving chains from ``tests/bitcoin_chain.py``
and the real mainnet blocks of the conformance folder.

Error replies are checked in both of Core's shapes: Core 28+ answers our JSON-RPC 2.0
calls' errors with HTTP 200, older Core with HTTP 500 and ``"result": null``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from chains.bitcoin.tx import TxOut, merkle_root, parse_block
from chains.clients.bitcoin_core import (
    BitcoinCoreClient,
    BlockNotFound,
    ChainTip,
    InvalidParameter,
    InWarmup,
    verify_block,
)
from chains.endpoints import EndpointConfig, RetrySettings
from chains.errors import ChainUnavailable, MalformedChainData
from tests.bitcoin_chain import (
    BuiltBlock,
    ChainBuilder,
    conformance_blocks,
    revealing_blocks,
    serialize_block,
    transaction,
)
from tests.chain_clients.loopback import Loopback
from tests.chain_clients.support import FakeClock
from tests.core_rpc import CoreRpcServer


@pytest.fixture
async def node() -> AsyncIterator[CoreRpcServer]:
    async with CoreRpcServer() as server:
        yield server


def client(url: str, http: httpx.AsyncClient, clock: FakeClock, max_batch: int = 1000) -> BitcoinCoreClient:
    endpoint = EndpointConfig(url, retry=RetrySettings(attempts=2, base_delay=0.1))
    return BitcoinCoreClient(endpoint, http, timing=clock.timing(), max_batch=max_batch)


def chain_of(length: int) -> tuple[ChainBuilder, list[BuiltBlock]]:
    builder = ChainBuilder()
    return builder, builder.extend(None, length)


@pytest.mark.parametrize(
    ("core_name", "ours"),
    [("main", "mainnet"), ("test", "testnet3"), ("testnet4", "testnet4"), ("signet", "signet"), ("regtest", "regtest")],
)
async def test_tip_is_height_hash_and_network(
    http: httpx.AsyncClient, clock: FakeClock, core_name: str, ours: str
) -> None:
    _, blocks = chain_of(6)
    async with CoreRpcServer(chain=core_name) as node:
        node.set_chain([b.raw for b in blocks])
        tip = await client(node.url, http, clock).tip()
    assert tip == ChainTip(height=5, hash=blocks[-1].hash, network=ours)
    assert node.calls == {"getblockchaininfo": 1}


async def test_fifty_heights_are_one_post(node: CoreRpcServer, http: httpx.AsyncClient, clock: FakeClock) -> None:
    _, blocks = chain_of(60)
    node.set_chain([b.raw for b in blocks])
    hashes = await client(node.url, http, clock).block_hashes(range(50))
    assert hashes == [b.hash for b in blocks[:50]]
    assert node.post_count == 1 and len(node.posts[0]) == 50 and node.calls == {"getblockhash": 50}


async def test_nothing_asked_sends_nothing(node: CoreRpcServer, http: httpx.AsyncClient, clock: FakeClock) -> None:
    core = client(node.url, http, clock)
    assert await core.block_hashes([]) == [] and await core.raw_blocks([]) == []
    assert node.http_requests == 0


async def test_raw_blocks_come_back_in_order_in_batches(
    node: CoreRpcServer, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    builder, genesis = chain_of(1)
    blocks = builder.branch(revealing_blocks(builder, builder.extend(genesis[0], 2)[-1]).blocks[-1])
    node.set_chain([b.raw for b in blocks])
    wanted = [b.hash for b in reversed(blocks)]
    raws = await client(node.url, http, clock).raw_blocks(wanted, batch_size=2)
    assert raws == [b.raw for b in reversed(blocks)]
    assert [parse_block(raw).header.hash for raw in raws] == wanted
    assert node.post_count == 3 and [len(post) for post in node.posts] == [2, 2, 1]
    assert [call["params"] for post in node.posts for call in post] == [[h, 0] for h in wanted]


async def test_real_mainnet_blocks_by_height(http: httpx.AsyncClient, clock: FakeClock, conformance_dir: Path) -> None:
    real = conformance_blocks(conformance_dir)
    async with CoreRpcServer(chain="main") as node:
        node.set_chain(real)
        core = client(node.url, http, clock)
        tip = await core.tip()
        hashes = await core.block_hashes(list(real))
        raws = await core.raw_blocks(hashes)
    assert tip.network == "mainnet" and tip.height == 702_861
    assert hashes[0] == "00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee"
    assert raws == list(real.values())  # 702861 is a segwit block: its witness commitment was checked


def with_witness_changed(block: BuiltBlock, other: BuiltBlock) -> bytes:
    """The block with the last transaction's witness public key replaced (txids unchanged)."""
    *rest, last = block.transactions
    inputs = [replace(i, witness=(i.witness[0], bytes(33))) if i.witness else i for i in last.inputs]
    return serialize_block(block.header, [*rest, transaction(inputs, last.outputs)])


def with_output_changed(block: BuiltBlock, other: BuiltBlock) -> bytes:
    """The block with an output of its last transaction paying elsewhere (header kept)."""
    *rest, last = block.transactions
    outputs = [TxOut(last.outputs[0].value, b"\x51"), *last.outputs[1:]]
    return serialize_block(block.header, [*rest, transaction(last.inputs, outputs)])


def with_last_repeated(block: BuiltBlock, other: BuiltBlock) -> bytes:
    """CVE-2012-2459: with an odd count, repeating the last transaction keeps the Merkle root."""
    return serialize_block(block.header, [*block.transactions, block.transactions[-1]])


def another_block(block: BuiltBlock, other: BuiltBlock) -> bytes:
    """Another valid block altogether."""
    return other.raw


@pytest.mark.parametrize(
    ("alter", "reason"),
    [
        (another_block, "another block"),
        (with_output_changed, "Merkle root"),
        (with_witness_changed, "witness commitment"),
        (with_last_repeated, "repeated"),
    ],
)
async def test_a_substituted_or_altered_block_is_refused(
    node: CoreRpcServer,
    http: httpx.AsyncClient,
    clock: FakeClock,
    alter: Callable[[BuiltBlock, BuiltBlock], bytes],
    reason: str,
) -> None:
    builder, blocks = chain_of(2)
    revealing = revealing_blocks(builder, blocks[-1])
    funding, spend = revealing.blocks[0].transactions[1], revealing.blocks[1].transactions[1]
    target = builder.block(blocks[-1], [funding, spend])  # three transactions, the last with a witness
    node.set_chain([b.raw for b in blocks] + [target.raw])
    core = client(node.url, http, clock)
    assert await core.raw_blocks([target.hash]) == [target.raw]
    node.substitute(target.hash, alter(target, revealing.blocks[1]))
    with pytest.raises(MalformedChainData, match=reason):
        await core.raw_blocks([target.hash])


def test_the_repeated_transaction_mutation_keeps_the_merkle_root() -> None:
    builder, blocks = chain_of(2)
    revealing = revealing_blocks(builder, blocks[-1])
    block = builder.block(blocks[-1], [revealing.blocks[0].transactions[1], revealing.blocks[1].transactions[1]])
    mutated = parse_block(with_last_repeated(block, block))
    assert merkle_root([tx.txid for tx in mutated.transactions]) == block.merkle_root  # only the repeat gives it away


def test_witness_data_added_to_a_pre_segwit_block_is_refused(conformance_dir: Path) -> None:
    raw = conformance_blocks(conformance_dir)[170]
    block = parse_block(raw)
    payment = block.transactions[1]  # the last transaction: the block ends with its bytes
    original = transaction(payment.inputs, payment.outputs, version=payment.version, locktime=payment.locktime)
    assert raw.endswith(original.raw)
    inputs = [replace(payment.inputs[0], witness=(bytes(33),))]
    witnessed = transaction(inputs, payment.outputs, version=payment.version, locktime=payment.locktime)
    altered = raw[: len(raw) - len(original.raw)] + witnessed.raw
    assert [tx.txid for tx in parse_block(altered).transactions] == [tx.txid for tx in block.transactions]
    with pytest.raises(MalformedChainData, match="without a witness commitment"):
        verify_block(altered, block.header.hash)
    assert verify_block(raw, block.header.hash.upper()) == block


@pytest.mark.parametrize("major", [27, 28])
async def test_out_of_range_and_unknown_hash_raise_their_classes(
    http: httpx.AsyncClient, clock: FakeClock, major: int
) -> None:
    builder, blocks = chain_of(4)
    stranger = ChainBuilder(start_time=1).extend(None, 1)[0]  # same builder settings would make the same block
    async with CoreRpcServer(major=major) as node:
        node.set_chain([b.raw for b in blocks])
        core = client(node.url, http, clock)
        with pytest.raises(InvalidParameter, match="Block height out of range") as height_error:
            await core.block_hashes([0, 1, 9, -1])
        with pytest.raises(BlockNotFound, match="Block not found") as hash_error:
            await core.raw_blocks([blocks[0].hash, stranger.hash])
        with pytest.raises(InvalidParameter, match="must be of length 64"):
            await core.raw_blocks(["00"])
    assert (height_error.value.rpc_code, hash_error.value.rpc_code) == (-8, -5)
    assert node.post_count == 3  # answers, not outages: nothing retried


@pytest.mark.parametrize("major", [27, 28])
async def test_a_starting_node_is_in_warmup(http: httpx.AsyncClient, clock: FakeClock, major: int) -> None:
    async with CoreRpcServer(major=major) as node:
        with pytest.raises(InWarmup):
            await client(node.url, http, clock).tip()
        assert node.post_count == 1


async def test_a_reorg_changes_the_hashes(node: CoreRpcServer, http: httpx.AsyncClient, clock: FakeClock) -> None:
    builder, chain_a = chain_of(6)  # heights 0..5
    chain_b = builder.branch(builder.extend(chain_a[3], 4)[-1])  # shares 0..3, then its own 4..7
    node.set_chain([b.raw for b in chain_a])
    core = client(node.url, http, clock)
    before = await core.block_hashes(range(6))
    node.set_chain([b.raw for b in chain_b])
    after = await core.block_hashes(range(8))
    assert before == [b.hash for b in chain_a] and after == [b.hash for b in chain_b]
    assert before[:4] == after[:4] and not set(before[4:]) & set(after[4:])
    assert (await core.tip()).height == 7
    assert await core.raw_blocks([chain_a[5].hash]) == [chain_a[5].raw]  # the stale block is still served by hash


async def test_wrong_credentials_are_refused_without_showing_them(
    node: CoreRpcServer, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    _, blocks = chain_of(1)
    node.set_chain([blocks[0].raw])
    url = node.bare_url.replace("http://", "http://qday:wrong-pa55@")
    with pytest.raises(ChainUnavailable, match="HTTP 401.*credentials") as caught:
        await client(url, http, clock).tip()
    assert "wrong-pa55" not in str(caught.value) and node.post_count == 0 and node.http_requests == 1


async def test_answers_that_are_not_blocks_are_malformed(
    loopback: Loopback, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    loopback.rpc_methods({"getblock": lambda params: "zz", "getblockhash": lambda params: 42})
    core = client(loopback.url, http, clock)
    with pytest.raises(MalformedChainData, match="not a hex string"):
        await core.raw_blocks(["00" * 32])
    with pytest.raises(MalformedChainData, match="not a block hash"):
        await core.block_hashes([1])
    with pytest.raises(ValueError, match="batch_size"):
        await core.raw_blocks(["00" * 32], batch_size=0)


@pytest.mark.parametrize(
    ("info", "reason"),
    [
        ({"blocks": True, "bestblockhash": "00" * 32, "chain": "main"}, "blocks/bestblockhash"),
        ({"blocks": 1, "bestblockhash": "xyz", "chain": "main"}, "blocks/bestblockhash"),
        ({"blocks": 1, "bestblockhash": "00" * 32, "chain": "liquidv1"}, "unknown chain"),
    ],
)
async def test_a_tip_without_height_hash_or_known_chain_is_malformed(
    loopback: Loopback, http: httpx.AsyncClient, clock: FakeClock, info: dict[str, Any], reason: str
) -> None:
    loopback.rpc_methods({"getblockchaininfo": lambda params: info})
    with pytest.raises(MalformedChainData, match=reason):
        await client(loopback.url, http, clock).tip()


async def test_many_heights_split_by_the_clients_batch_cap(
    node: CoreRpcServer, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    _, blocks = chain_of(25)
    node.set_chain([b.raw for b in blocks])
    hashes = await client(node.url, http, clock, max_batch=10).block_hashes(range(25))
    assert hashes == [b.hash for b in blocks] and sorted(len(post) for post in node.posts) == [5, 10, 10]


# --- the loopback node's wire shapes, as Core's src/httprpc.cpp and rpc/request.cpp write them ---


async def post(node: CoreRpcServer, http: httpx.AsyncClient, body: Any) -> httpx.Response:
    """POST a JSON body with the node's credentials (httpx sends URL userinfo as basic auth)."""
    return await http.post(node.url, json=body)


@pytest.mark.parametrize(
    ("major", "jsonrpc", "status", "reply"),
    [
        (28, "2.0", 200, {"jsonrpc": "2.0", "error": {"code": -8, "message": "Block height out of range"}, "id": 7}),
        (28, "1.0", 500, {"result": None, "error": {"code": -8, "message": "Block height out of range"}, "id": 7}),
        (27, "2.0", 500, {"result": None, "error": {"code": -8, "message": "Block height out of range"}, "id": 7}),
    ],
)
async def test_single_call_error_shapes(
    http: httpx.AsyncClient, major: int, jsonrpc: str, status: int, reply: dict[str, Any]
) -> None:
    _, blocks = chain_of(1)
    async with CoreRpcServer(major=major) as node:
        node.set_chain([blocks[0].raw])
        answer = await post(node, http, {"jsonrpc": jsonrpc, "id": 7, "method": "getblockhash", "params": [5]})
    assert (answer.status_code, answer.json()) == (status, reply)


async def test_batches_are_http_200_with_errors_in_their_slots(node: CoreRpcServer, http: httpx.AsyncClient) -> None:
    _, blocks = chain_of(1)
    node.set_chain([blocks[0].raw])
    answer = await post(
        node,
        http,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "getblockhash", "params": [0]},
            {"jsonrpc": "2.0", "id": 2, "method": "getblockhash", "params": [1]},
            {"id": 3, "method": "nosuchmethod", "params": []},
            {"jsonrpc": "3.0", "id": 4, "method": "getblockcount"},
        ],
    )
    assert answer.status_code == 200
    assert answer.json() == [
        {"jsonrpc": "2.0", "result": blocks[0].hash, "id": 1},
        {"jsonrpc": "2.0", "error": {"code": -8, "message": "Block height out of range"}, "id": 2},
        {"result": None, "error": {"code": -32601, "message": "Method not found"}, "id": 3},
        {"result": None, "error": {"code": -32600, "message": "JSON-RPC version not supported"}, "id": 4},
    ]


async def test_requests_core_refuses_before_running_a_method(node: CoreRpcServer, http: httpx.AsyncClient) -> None:
    node.set_chain([chain_of(1)[1][0].raw])  # while warming up, Core answers every method with -28
    unauthenticated = await http.post(node.bare_url, json={"id": 1, "method": "getblockcount"})
    assert unauthenticated.status_code == 401 and unauthenticated.headers["WWW-Authenticate"] == 'Basic realm="jsonrpc"'
    assert (await http.get(node.url)).status_code == 405
    unknown = await post(node, http, {"id": 1, "method": "nosuchmethod"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == -32601
    garbled = await http.post(node.url, content=b"{not json")
    assert garbled.status_code == 500 and garbled.json() == {
        "result": None,
        "error": {"code": -32700, "message": "Parse error"},
        "id": None,
    }
