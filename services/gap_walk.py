"""The gap-limit walk over a wallet's branches, shared by Bitcoin descriptor scans and EVM
account scans. No I/L of its own: the caller derives and looks up.

A branch is derived until ``gap_limit`` consecutive children have no history after the last
used one (BIP-44's gap limit). Each round looks up, in one call, every open branch's next
window: what the gap rule still needs or, when more, as many children as the branch has
found used so far. A wallet of n used children thus takes L(log n) rounds, not n / gap, and
looks up at most about twice what the rule needs. At most ``max_derived`` children are
derived over all branches; a walk stopped there says so (``truncated``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

B = TypeVar("B")  # a branch
D = TypeVar("D")  # a derived child
L = TypeVar("L")  # what a lookup said about it


@dataclass(slots=True)
class _Progress(Generic[B]):
    """How far one branch has gone: the next index to derive and the last used one."""

    branch: B
    ranged: bool
    next: int = 0
    last_used: int = -1
    used: int = 0
    done: bool = False


@dataclass(frozen=True, slots=True)
class Walk(Generic[D, L]):
    """What a walk found: the used children with their lookups, every child derived (in
    derivation order), the lookup rounds it took, and whether it stopped at its budget
    before every branch reached its gap."""

    used: tuple[tuple[D, L], ...]
    derived: tuple[D, ...]
    rounds: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class Branches(Generic[B, D, L]):
    """How to walk one kind of wallet: whether a branch is ranged (a branch that is not is
    one child, index 0), how to derive children, which branch and index a child is, how to
    look a batch up (one round), and whether a lookup shows the child used."""

    ranged: Callable[[B], bool]
    derive: Callable[[B, range], list[D]]
    position: Callable[[D], tuple[B, int]]
    lookup: Callable[[list[D]], Awaitable[list[L]]]
    used: Callable[[L], bool]


async def gap_walk(branches: Sequence[B], how: Branches[B, D, L], gap_limit: int, max_derived: int) -> Walk[D, L]:
    """Walk ``branches`` to their gap (module docstring)."""
    progress = [_Progress(branch, how.ranged(branch)) for branch in branches]
    used: list[tuple[D, L]] = []
    derived: list[D] = []
    rounds = 0
    truncated = False
    while not all(p.done for p in progress):
        batch: list[D] = []
        for p in progress:
            if p.done:
                continue
            end = max(p.last_used + gap_limit + 1, p.next + p.used) if p.ranged else 1
            end = min(end, p.next + max_derived - len(derived) - len(batch))
            if end <= p.next:
                truncated = True
                p.done = True
                continue
            batch += how.derive(p.branch, range(p.next, end))
            p.next = end
        if not batch:
            break
        found = await how.lookup(batch)
        rounds += 1
        derived += batch
        for child, lookup in zip(batch, found, strict=True):
            if how.used(lookup):
                used.append((child, lookup))
                branch, index = how.position(child)
                p = next(p for p in progress if p.branch is branch)
                p.last_used = max(p.last_used, index)
                p.used += 1
        for p in progress:
            p.done = p.done or not p.ranged or p.next > p.last_used + gap_limit
    return Walk(tuple(used), tuple(derived), rounds, truncated)
