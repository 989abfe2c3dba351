"""Running CPU-heavy work (password hashing, key generation, signing) off the
event loop, so one slow request never stalls the others; and stopping the background
loops (webhook delivery, the chain-head follower) cleanly."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Executor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


async def run_blocking(executor: Executor, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``fn`` in ``executor`` and await its result."""
    loop = asyncio.get_running_loop()
    if kwargs:
        return await loop.run_in_executor(executor, lambda: fn(*args, **kwargs))
    return await loop.run_in_executor(executor, fn, *args)


#: Verifications measured under ~0.5 ms on this hardware (docs/crypto.md): ML-DSA
#: and SLH-DSA-SHA2. A thread hand-off costs about as much as they do, so they run
#: on the loop; SLH-DSA-SHAKE verification (1-2 ms) and all key generation do not.
_INLINE_VERIFY = {"ml-dsa-44", "ml-dsa-65", "ml-dsa-87", "slh-dsa-sha2-128s"}


async def run_verification(
    executor: Executor, algorithm: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs
) -> R:
    """Run a signature check inline when it is cheap for ``algorithm``, else off the loop."""
    if algorithm in _INLINE_VERIFY:
        return fn(*args, **kwargs)
    return await run_blocking(executor, fn, *args, **kwargs)


async def stop_task(task: asyncio.Task[None] | None) -> None:
    """Cancel a background loop's task and wait until it has stopped (None: nothing)."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
