"""An event loop on its own thread, so synchronous Dagster code can drive async clients.

Chain clients, price oracles and the group-commit writer are async. A Dagster asset body is
synchronous, and the code that streams Parquet batches is too; ``LoopThread`` runs one
event loop for the duration of an asset, and ``ordered`` keeps a bounded number of
coroutines in flight while yielding their results in submission order.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class LoopThread:
    """A running event loop on a daemon thread; ``run`` blocks on a coroutine's result."""

    def __init__(self, name: str = "qday-pipeline-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._started = False

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def __enter__(self) -> LoopThread:
        self._thread.start()
        self._started = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the loop; a ``concurrent.futures.Future`` of its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and return its result (its exception is raised here)."""
        return self.submit(coro).result()

    def close(self) -> None:
        """Cancel what is still pending, stop the loop and join the thread."""
        if not self._started:
            self.loop.close()
            return

        async def cancel_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(cancel_rest(), self.loop).result(timeout=30)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()
        self._started = False


def ordered(loop: LoopThread, work: Callable[[T], Awaitable[R]], items: Iterable[T], concurrency: int) -> Iterator[R]:
    """``work(item)`` for each item with at most ``concurrency`` in flight, results in
    item order. On an error (or when the consumer stops early) the rest is cancelled."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")

    async def call(item: T) -> R:
        return await work(item)

    pending: deque[Future[R]] = deque()
    try:
        for item in items:
            pending.append(loop.submit(call(item)))
            if len(pending) >= concurrency:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
