"""Running CPU-heavy work (password hashing, key generation, signing) off the
event loop, so one slow request never stalls the others."""

from __future__ import annotations

import asyncio
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
