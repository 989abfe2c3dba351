"""Rate-limit counters shared by several API workers: one SQLite file of
(bucket, window start, count) rows.

The file holds nothing durable (a lost window only resets counts), so it is
written with ``synchronous = OFF``. Rows of windows long past are pruned every
thousand calls.
"""

from __future__ import annotations

from pathlib import Path

from storage.sqlite_db import connect, write_transaction

_PRUNE_EVERY = 1000


class SqliteWindowCounters:
    """Atomic per-window counters in their own SQLite file (``WindowCounters``)."""

    def __init__(self, path: Path) -> None:
        self._conn = connect(path, synchronous="OFF")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS windows (bucket TEXT PRIMARY KEY, start INTEGER NOT NULL,"
            " count INTEGER NOT NULL) WITHOUT ROWID"
        )
        self._calls = 0

    def count(self, buckets: tuple[str, ...], start: int, prune_before: int) -> list[int]:
        """Add one to each bucket's count in the window starting at ``start`` (a bucket
        last counted in another window starts again at 1); the new counts, in one
        transaction. Now and then forgets windows that started before ``prune_before``."""
        counts = []
        with write_transaction(self._conn) as c:
            for bucket in buckets:
                (count,) = c.execute(
                    "INSERT INTO windows (bucket, start, count) VALUES (?, ?, 1)"
                    " ON CONFLICT (bucket) DO UPDATE SET"
                    " count = CASE WHEN start = excluded.start THEN count + 1 ELSE 1 END,"
                    " start = excluded.start RETURNING count",
                    (bucket, start),
                ).fetchone()
                counts.append(count)
            self._calls += 1
            if self._calls % _PRUNE_EVERY == 0:
                c.execute("DELETE FROM windows WHERE start < ?", (prune_before,))
        return counts

    def close(self) -> None:
        """Release the connection."""
        self._conn.close()
