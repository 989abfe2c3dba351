"""Block heights without a node: BIP-34 heights of real blocks, chain work, the best chain."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from chains.bitcoin.heights import (
    GENESIS_PARENT,
    HeaderLink,
    best_chain,
    bip34_height,
    block_work,
    complete_height,
)
from chains.bitcoin.tx import Block, parse_block


@pytest.mark.parametrize(
    ("name", "network", "height"),
    [
        ("block413567.raw", "mainnet", 413_567),
        ("mainnet_block_0c835b.raw", "mainnet", 702_861),
        ("testnet_block_045e0b.raw", "testnet3", 924_634),
        ("block170.raw", "mainnet", None),  # version 1: before BIP-34, the coinbase pushes anything
    ],
)
def test_bip34_heights_of_real_blocks(conformance_dir: Path, name: str, network: str, height: int | None) -> None:
    block = parse_block((conformance_dir / "bitcoin" / "blocks" / name).read_bytes())
    assert bip34_height(block, network) == height


def _with_coinbase_script(block: Block, script: bytes) -> Block:
    coinbase = block.transactions[0]
    txin = dataclasses.replace(coinbase.inputs[0], script_sig=script)
    return dataclasses.replace(block, transactions=(dataclasses.replace(coinbase, inputs=(txin,)),))


@pytest.mark.parametrize(
    ("script", "network", "height"),
    [
        (bytes.fromhex("03") + (227_930).to_bytes(3, "little"), "mainnet", None),  # below mainnet's activation
        (bytes.fromhex("03") + (227_931).to_bytes(3, "little"), "mainnet", 227_931),
        (bytes.fromhex("55"), "regtest", 5),  # OP_5: heights 1-16 on the test networks
        (bytes.fromhex("0400ffffff"), "mainnet", None),  # a negative script number
        (bytes.fromhex("020a00"), "regtest", None),  # not minimally encoded
        (bytes.fromhex("0a") + bytes(10), "mainnet", None),  # a push too long to be a height
        (b"", "mainnet", None),
    ],
)
def test_coinbase_heights_are_checked(conformance_dir: Path, script: bytes, network: str, height: int | None) -> None:
    block = parse_block((conformance_dir / "bitcoin" / "blocks" / "block413567.raw").read_bytes())
    assert bip34_height(_with_coinbase_script(block, script), network) == height


@pytest.mark.parametrize(
    ("bits", "work"),
    [
        (0x1D00FFFF, 0x100010001),  # difficulty 1 (the genesis target): 2^256 / (0xffff * 2^208 + 1)
        (0x207FFFFF, 2),  # regtest: half of all hashes meet the target
        (0x1D80FFFF, 0),  # sign bit set: a negative target is invalid
        (0x1D000000, 0),  # zero mantissa
    ],
)
def test_block_work_is_cores_block_proof(bits: int, work: int) -> None:
    assert block_work(bits) == work


def _chain(prefix: str, parent: str, length: int, bits: int = 0x207FFFFF) -> list[HeaderLink]:
    links = []
    for i in range(length):
        links.append(HeaderLink(f"{prefix}{i}", parent, bits))
        parent = links[-1].hash
    return links


def test_the_best_chain_is_the_most_work_branch() -> None:
    main = _chain("a", GENESIS_PARENT, 6)  # a0..a5
    fork = _chain("b", "a2", 4)  # b0..b3 at heights 3..6: longer
    chain = best_chain(reversed(main + fork))  # arrival order does not matter
    assert chain.tip_hash == "b3" and chain.tip_height == 6
    assert [chain.heights[h] for h in ("a0", "a1", "a2", "b0", "b3")] == [0, 1, 2, 3, 6]
    assert "a3" not in chain.heights and "a5" not in chain.heights  # stale


def test_more_work_beats_more_blocks() -> None:
    main = _chain("a", GENESIS_PARENT, 5)
    heavy = _chain("h", "a1", 1, bits=0x1D00FFFF)  # one block with far more work than three regtest blocks
    chain = best_chain(main + heavy)
    assert chain.tip_hash == "h0" and chain.tip_height == 2


def test_blocks_that_do_not_reach_genesis_have_no_height() -> None:
    chain = best_chain(_chain("x", "ff" * 32, 3))
    assert chain.heights == {} and chain.tip_hash is None
    assert best_chain([]).tip_height is None


def test_complete_height_is_the_first_gap() -> None:
    assert complete_height([0, 1, 2, 4]) == 2
    assert complete_height(range(10)) == 9
    assert complete_height([1, 2, 3]) is None
    assert complete_height([]) is None


def test_a_long_chain_is_walked_without_recursion() -> None:
    links = _chain("n", GENESIS_PARENT, 50_000)
    assert best_chain(links).tip_height == 49_999
