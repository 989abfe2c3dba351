"""Identifiers of the form ``<prefix>_<random>`` used by every resource."""

from __future__ import annotations

import os
import threading

_ID_BYTES = 15
_POOL_BYTES = _ID_BYTES * 256


class _RandomPool:
    """Operating-system randomness read a few kilobytes at a time.

    ``os.urandom`` releases the GIL, and every release on the event loop's thread
    lets another thread run first; reading once per 256 identifiers instead of
    once per identifier removes that stall from the request path. Bytes are
    never handed out twice, and a forked child starts with an empty pool.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer = b""
        self._offset = 0
        os.register_at_fork(after_in_child=self._discard)

    def _discard(self) -> None:
        self._lock = threading.Lock()
        self._buffer, self._offset = b"", 0

    def take(self, n: int) -> bytes:
        """``n`` fresh random bytes."""
        with self._lock:
            if self._offset + n > len(self._buffer):
                self._buffer, self._offset = os.urandom(max(_POOL_BYTES, n)), 0
            start = self._offset
            self._offset += n
            return self._buffer[start : self._offset]


_pool = _RandomPool()


def new_id(prefix: str) -> str:
    """A fresh random identifier such as ``usr_3f9c…``: 120 random bits as 30
    lower-case hex digits (``base64.b32encode`` is pure Python and 10x slower)."""
    return f"{prefix}_{_pool.take(_ID_BYTES).hex()}"
