"""Block heights without a node: BIP-34 coinbase heights, chain work and the best chain (pure).

Bitcoin Core's block files hold blocks in arrival order and say nothing of heights. A block's
height is its distance from the genesis block along ``prev_block`` links; when several blocks
claim the same parent (a stale block, a reorg), the best chain is the one with the most
cumulative proof of work (``GetBlockProof``: ``2^256 / (target + 1)`` per block), as Core
chooses it. Blocks that do not link back to genesis (a partial set of files) have no height
from links; BIP-34 blocks (version 2 and later, past the activation height) carry their
height as the first push of the coinbase scriptSig, which is used as a fallback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from chains.bitcoin.tx import Block

GENESIS_PARENT = "00" * 32
"""The ``prev_block`` of a genesis block."""

#: Height from which each network's coinbases must carry BIP-34 heights (Core's ``BIP34Height``).
BIP34_ACTIVATION = MappingProxyType({"mainnet": 227_931, "testnet3": 21_111, "testnet4": 1, "signet": 1, "regtest": 1})

_MAX_HEIGHT = 2**31 - 1


def bip34_height(block: Block, network: str) -> int | None:
    """The height a BIP-34 block states in its coinbase (the first scriptSig push, a minimal
    little-endian script number), or None when the block cannot be a BIP-34 block: version 1,
    no coinbase, a first push that is not a minimally encoded positive number, or a value
    below the network's activation height (early coinbases push arbitrary bytes first)."""
    if block.header.version < 2 or not block.transactions:
        return None
    inputs = block.transactions[0].inputs
    if len(inputs) != 1 or not inputs[0].is_coinbase:
        return None
    script = inputs[0].script_sig
    if not script:
        return None
    size = script[0]
    if 0x51 <= size <= 0x60:  # OP_1 .. OP_16 (heights 1-16 on the test networks)
        value = size - 0x50
    elif 1 <= size <= 5 and len(script) > size:
        data = script[1 : 1 + size]
        if data[-1] & 0x80 or (size > 1 and data[-1] == 0 and not data[-2] & 0x80):
            return None  # negative or not minimal
        value = int.from_bytes(data, "little")
    else:
        return None
    if value < BIP34_ACTIVATION.get(network, 1) or value > _MAX_HEIGHT:
        return None
    return value


def block_work(bits: int) -> int:
    """The expected number of hashes behind a block of compact target ``bits``
    (``2^256 // (target + 1)``, Core's ``GetBlockProof``); 0 for an invalid target."""
    exponent, mantissa = bits >> 24, bits & 0x007FFFFF
    if bits & 0x00800000 or mantissa == 0:
        return 0  # negative or zero target
    target = mantissa << (8 * (exponent - 3)) if exponent >= 3 else mantissa >> (8 * (3 - exponent))
    if target == 0 or target.bit_length() > 256:
        return 0
    return (1 << 256) // (target + 1)


@dataclass(frozen=True, slots=True)
class HeaderLink:
    """What the best-chain walk needs of one block: its hash, its parent's, its target."""

    hash: str
    prev_hash: str
    bits: int


@dataclass(frozen=True, slots=True)
class BestChain:
    """The best chain through a set of blocks: height by block hash, its tip, and the
    cumulative work of the tip. Empty when no block links back to a genesis block."""

    heights: Mapping[str, int]
    tip_hash: str | None
    tip_height: int | None
    work: int


def best_chain(links: Iterable[HeaderLink]) -> BestChain:
    """The most-work chain from a genesis block (``prev_hash`` all zeros) through ``links``.

    Runs in time linear in the number of blocks (an iterative walk, no recursion); blocks
    whose ancestry does not reach a genesis block are not in it. Ties keep the first tip
    found by the walk (Core keeps the one it received first, which block files do not record
    reliably; an equal-work fork is a few blocks at the tip and resolves with the next block)."""
    children: dict[str, list[HeaderLink]] = {}
    for link in links:
        children.setdefault(link.prev_hash, []).append(link)
    best: tuple[int, int, str] | None = None  # (work, height, hash)
    parent: dict[str, str] = {}
    stack = [(link, 0, block_work(link.bits)) for link in children.get(GENESIS_PARENT, [])]
    while stack:
        link, height, work = stack.pop()
        if best is None or work > best[0]:
            best = (work, height, link.hash)
        for child in children.get(link.hash, []):
            if child.hash not in parent:
                parent[child.hash] = link.hash
                stack.append((child, height + 1, work + block_work(child.bits)))
    if best is None:
        return BestChain(MappingProxyType({}), None, None, 0)
    work, height, tip = best
    heights: dict[str, int] = {}
    cursor = tip
    for h in range(height, -1, -1):
        heights[cursor] = h
        cursor = parent.get(cursor, GENESIS_PARENT)
    return BestChain(MappingProxyType(heights), tip, height, work)


def complete_height(heights: Iterable[int]) -> int | None:
    """The highest ``h`` such that every height 0..h is present, or None without height 0:
    up to where an index built from these blocks has seen every block."""
    present = set(heights)
    if 0 not in present:
        return None
    h = 0
    while h + 1 in present:
        h += 1
    return h
