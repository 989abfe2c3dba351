"""Rate-limit counters shared by several API workers: one SQLite file of
(bucket, window start, count) rows.

``admit`` counts a request only when it fits every one of its buckets. The file holds nothing
durable (a lost window only resets counts), so it is written with
``synchronous = OFF``. Rows of windows long past are pruned every thousand calls.
"""

from __future__ import annotations

from pathlib import Path

from storage.sqlite_db import Connection, connect, write_transaction

_PRUNE_EVERY = 1000
_UPSERT = (
    "INSERT INTO windows (bucket, start, count) VALUES (?, ?, 1)"
    " ON CONFLICT (bucket) DO UPDATE SET"
    " count = CASE WHEN start = excluded.start THEN count + 1 ELSE 1 END,"
    " start = excluded.start RETURNING count"
)


class SqliteWindowCounters:
    """Atomic per-window counters in their own SQLite file (``WindowCounters``)."""

    def __init__(self, path: Path) -> None:
        self._conn = connect(path, synchronous="OFF")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS windows (bucket TEXT PRIMARY KEY, start INTEGER NOT NULL,"
            " count INTEGER NOT NULL) WITHOUT ROWID"
        )
        self._calls = 0

    def admit(self, buckets: tuple[str, ...], start: int, limit: int, prune_before: int) -> list[int]:
        """Each bucket's count in the window starting at ``start`` before this call; one is
        added to every bucket when all of them were below ``limit``, to none otherwise (a
        refused request uses up no bucket). One transaction, so exact across processes."""
        with write_transaction(self._conn) as c:
            marks = ",".join("?" * len(buckets))
            found = dict(
                c.execute(
                    f"SELECT bucket, count FROM windows WHERE start = ? AND bucket IN ({marks})", (start, *buckets)
                )
            )
            before = [found.get(bucket, 0) for bucket in buckets]
            if max(before) < limit:
                for bucket in dict.fromkeys(buckets):
                    c.execute(_UPSERT, (bucket, start)).fetchone()
            self._prune(c, prune_before)
        return before

    def _prune(self, c: Connection, prune_before: int) -> None:
        self._calls += 1
        if self._calls % _PRUNE_EVERY == 0:
            c.execute("DELETE FROM windows WHERE start < ?", (prune_before,))

    def close(self) -> None:
        """Release the connection."""
        self._conn.close()
