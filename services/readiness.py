"""Readiness: whether this node can serve requests that touch the operational store, for a
load balancer or an orchestrator deciding where to send traffic (liveness is ``/v1/health``,
which answers as long as the process does).

A node is ready when a read and an empty write transaction both finish within the timeout:
the read shows the store answers (on PostgreSQL, a pooled connection to the server); the
write shows it takes writes (SQLite: the group-commit writer is alive and gets the write
lock; PostgreSQL: a transaction begins and commits). Neither changes a row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from storage.database import Database, Dialect, Tx
from storage.errors import StoreUnavailable

#: Seconds each probe may take before the node counts as not ready.
PROBE_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class Readiness:
    """A ready node's engine and how long each probe took, in milliseconds."""

    engine: Dialect
    read_ms: float
    write_ms: float


class NotReady(StoreUnavailable):
    """A probe failed or took longer than its timeout; ``details`` say which."""


async def _empty_write(tx: Tx) -> None:
    await tx.fetch_one("SELECT 1")


async def check_readiness(database: Database, timeout: float = PROBE_TIMEOUT) -> Readiness:
    """Probe ``database`` with one read and one empty write transaction, each bounded by
    ``timeout`` seconds; raises ``NotReady`` naming the probe that failed."""
    probes: tuple[tuple[str, Callable[[], Awaitable[object]]], ...] = (
        ("read", lambda: database.fetch_one("SELECT 1")),
        ("write", lambda: database.write(_empty_write)),
    )
    timings: list[float] = []
    for probe, run in probes:
        started = time.perf_counter()
        try:
            await asyncio.wait_for(run(), timeout)
        except TimeoutError:
            raise NotReady(
                f"operational store: the {probe} probe took longer than {timeout:g} s",
                engine=database.dialect,
                probe=probe,
            ) from None
        except StoreUnavailable as exc:
            raise NotReady(
                f"operational store: the {probe} probe failed", engine=database.dialect, probe=probe
            ) from exc
        timings.append(round((time.perf_counter() - started) * 1000, 3))
    return Readiness(database.dialect, *timings)
