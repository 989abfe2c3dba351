"""The loop inside the server that destroys managed keys whose waiting period is
over (``ManagedCustodyService.purge_due``; ``qday admin purge-keys`` runs the same
from outside). Concurrent runs are safe: each key is destroyed by exactly one of them."""

from __future__ import annotations

import asyncio
import logging

from services.custody.lifecycle import ManagedCustodyService

log = logging.getLogger("qday.custody")


class PurgeLoop:
    """``ManagedCustodyService.purge_due`` now and then every ``interval_seconds`` on
    the running event loop (0: never)."""

    def __init__(self, service: ManagedCustodyService, interval_seconds: float) -> None:
        self._service = service
        self._interval = interval_seconds
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the loop on the running event loop (once; nothing when the interval is 0)."""
        if self._interval > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._forever())

    async def _forever(self) -> None:
        while True:
            try:
                await self._service.purge_due()
            except Exception as exc:  # noqa: BLE001 - retried at the next tick
                log.warning("managed-key purge failed: %s", type(exc).__name__)
            await asyncio.sleep(self._interval)

    def close(self) -> None:
        """Stop the loop."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
