"""Following a Bitcoin Core node's tip into the exposure index, in ranges of heights.

The blocks a node serves over JSON-RPC go into parts of ``RANGE_SIZE`` heights
(``rpc/<start>-<end>``, ``storage.bitcoin_index``), so a range is the unit a Dagster partition
materialises and a reorg rewrites. Syncing a range asks the node for the hashes of its heights
(one batched ``getblockhash``), keeps the blocks the part already holds under the same hash,
fetches the others (batched ``getblock <hash> 0``, a window at a time) and writes the part anew:
a range that grew by a block, or lost its top blocks to a reorg, costs only what changed.

Where a reorg starts is found from the top: the stored hashes of the highest heights are
compared with the node's, a window at a time, down to the first height that still matches;
every range from there up is synced. Blocks a node serves come from its active chain at the
moment of the call; a reorg during a sync is found by the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from chains.bitcoin.revelations import block_revelations
from chains.bitcoin.tx import Block
from chains.clients.bitcoin_core import ChainTip
from storage.bitcoin_index import RPC, BitcoinIndexStore, ChainState

RANGE_SIZE = 1_000
"""Heights per part (and per Dagster partition)."""

FETCH_WINDOW = 32
"""Blocks fetched and held at once (a full 4 MB block is ~8 MB of hex on the wire)."""

_COMPARE_WINDOW = 100


class BlockSource(Protocol):
    """What the follower needs of a node (``chains.clients.bitcoin_core.BitcoinCoreClient``)."""

    async def tip(self) -> ChainTip:
        """Height, hash and network of the node's best block."""
        ...

    async def block_hashes(self, heights: Sequence[int]) -> list[str]:
        """The active chain's hashes at ``heights``."""
        ...

    async def blocks(self, hashes: Sequence[str]) -> list[Block]:
        """The blocks with ``hashes``, parsed and checked against their hashes."""
        ...


def range_of(height: int, size: int = RANGE_SIZE) -> tuple[int, int]:
    """The first and last height of the range holding ``height``."""
    start = height - height % size
    return start, start + size - 1


def part_name(start: int, end: int) -> str:
    """The part (and partition) name of a range: zero-padded so names sort by height."""
    return f"{start:09d}-{end:09d}"


def parse_part(name: str) -> tuple[int, int]:
    """The range of a part name (``ValueError`` for anything ``part_name`` does not make)."""
    start, _, end = name.partition("-")
    if len(start) != 9 or len(end) != 9 or not (start.isdigit() and end.isdigit()) or int(end) < int(start):
        raise ValueError(f"not a height-range part: {name!r}")
    return int(start), int(end)


@dataclass(frozen=True, slots=True)
class RangeReport:
    """What syncing one range did: blocks fetched from the node, kept from the part, and
    whether the part was already up to date."""

    part: str
    fetched: int
    kept: int
    unchanged: bool


@dataclass(frozen=True, slots=True)
class FollowPlan:
    """The ranges to sync to reach the node's tip: ``first`` is where following began (the
    node-fed parts hold no lower height), ``from_height`` the lowest height whose stored
    block is missing or differs from the node's (a reorg's fork point + 1)."""

    tip: ChainTip
    first: int
    from_height: int
    ranges: tuple[tuple[int, int], ...]
    reorg: bool


@dataclass(slots=True)
class FollowReport:
    """One pass of the follower: its plan, each range's report, the index state after."""

    plan: FollowPlan
    ranges: list[RangeReport] = field(default_factory=list)
    state: ChainState | None = None


def stored_heights(index: BitcoinIndexStore, network: str) -> dict[int, bytes]:
    """Block hash by height of every block the node-fed parts hold."""
    found: dict[int, bytes] = {}
    for part in index.parts(network, RPC):
        found.update(index.part_heights(network, RPC, part))
    return found


async def plan_follow(
    node: BlockSource, index: BitcoinIndexStore, *, start_height: int | None = None, size: int = RANGE_SIZE
) -> FollowPlan:
    """The ranges to sync now. Without node-fed parts yet, following starts at
    ``start_height``, else just past the height up to which block files made the index
    complete, else at genesis."""
    tip = await node.tip()
    stored = stored_heights(index, tip.network)
    if stored:
        first = min(min(stored), start_height if start_height is not None else min(stored))
    elif start_height is not None:
        first = start_height
    else:
        state = index.chain_state(tip.network)
        first = state.complete_to + 1 if state is not None and state.complete_to is not None else 0
    top = max(stored, default=first - 1)
    from_height, reorg = min(top + 1, tip.height + 1), top > tip.height
    height = min(top, tip.height)
    while height >= first:  # walk down while the node's hashes differ from ours
        low = max(first, height - _COMPARE_WINDOW + 1)
        hashes = await node.block_hashes(range(low, height + 1))
        window = zip(range(low, height + 1), hashes, strict=True)
        differ = [h for h, node_hash in window if stored.get(h) != bytes.fromhex(node_hash)]
        if not differ:
            break
        from_height, reorg = min(differ), reorg or any(h in stored for h in differ)
        if len(differ) < height - low + 1:
            break
        height = low - 1
    from_height = max(from_height, first)
    last = max(tip.height, top)
    ranges: list[tuple[int, int]] = []
    start = range_of(from_height, size)[0]
    while start <= last:
        ranges.append((start, start + size - 1))
        start += size
    return FollowPlan(tip, first, from_height, tuple(ranges), reorg)


async def sync_range(
    node: BlockSource, index: BitcoinIndexStore, network: str, span: tuple[int, int], tip_height: int, first: int = 0
) -> RangeReport:
    """Make the part of the heights ``span`` (first, last) hold the node's active chain from
    ``first`` up to ``tip_height`` (a part wholly above the tip, after a reorg to a shorter
    chain, is removed)."""
    start, end = span
    part = part_name(start, end)
    heights = list(range(max(start, first), min(end, tip_height) + 1))
    if not heights:
        index.remove_part(network, RPC, part)
        return RangeReport(part, 0, 0, unchanged=False)
    hashes = [bytes.fromhex(h) for h in await node.block_hashes(heights)]
    have = index.part_heights(network, RPC, part)
    keep = [h for height, h in zip(heights, hashes, strict=True) if have.get(height) == h]
    if len(keep) == len(heights) == len(have):
        return RangeReport(part, 0, len(keep), unchanged=True)
    missing = [(height, h.hex()) for height, h in zip(heights, hashes, strict=True) if have.get(height) != h]
    with index.writer(network, RPC, part, keep=keep) as writer:
        for low in range(0, len(missing), FETCH_WINDOW):
            window = missing[low : low + FETCH_WINDOW]
            blocks = await node.blocks([h for _, h in window])
            for (height, _), block in zip(window, blocks, strict=True):
                rows = list(block_revelations(block, height))
                writer.add_block(block.header, len(block.transactions), height, rows, None)
    return RangeReport(part, len(missing), len(keep), unchanged=False)


async def follow_once(
    node: BlockSource,
    index: BitcoinIndexStore,
    *,
    start_height: int | None = None,
    size: int = RANGE_SIZE,
    progress: Callable[[RangeReport], None] = lambda report: None,
) -> FollowReport:
    """One pass: plan, sync each range (calling ``progress`` after each), relink the network."""
    index.ensure_layout()
    plan = await plan_follow(node, index, start_height=start_height, size=size)
    report = FollowReport(plan)
    for span in plan.ranges:
        report.ranges.append(await sync_range(node, index, plan.tip.network, span, plan.tip.height, plan.first))
        progress(report.ranges[-1])
    report.state = index.link(plan.tip.network)
    return report
