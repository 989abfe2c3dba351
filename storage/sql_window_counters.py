"""Rate-limit counters several API workers or nodes share: (bucket, window start, count)
rows, in their own SQLite file or in an unlogged PostgreSQL table.

``admit`` counts a request only when it fits every one of its buckets, in one transaction
that locks its buckets first, so counts are exact across processes and nodes. The rows
hold nothing durable (a lost window only resets counts): the SQLite file is written with
``synchronous = OFF`` and the PostgreSQL table is ``UNLOGGED`` (not in the write-ahead
log), so neither costs a disk flush per request. Rows of windows long past are pruned
every thousand calls. The table is made here rather than by a migration for that reason:
it is a shared cache, not state.
"""

from __future__ import annotations

import asyncio
import json

from storage.database import Database, Tx

_PRUNE_EVERY = 1000
_TABLE = {
    "sqlite": "CREATE TABLE IF NOT EXISTS rate_windows (bucket TEXT PRIMARY KEY, start INTEGER NOT NULL,"
    " count INTEGER NOT NULL) WITHOUT ROWID",
    "postgresql": "CREATE UNLOGGED TABLE IF NOT EXISTS rate_windows (bucket TEXT PRIMARY KEY, start BIGINT NOT NULL,"
    " count BIGINT NOT NULL)",
}
_UPSERT = (
    "INSERT INTO rate_windows (bucket, start, count) VALUES (?, ?, 1)"
    " ON CONFLICT (bucket) DO UPDATE SET"
    " count = CASE WHEN rate_windows.start = excluded.start THEN rate_windows.count + 1 ELSE 1 END,"
    " start = excluded.start"
)


#: PostgreSQL: the ``admit`` calls of one event-loop pass in one call of this function, one
#: round trip for all of them (the statement is its own transaction; the transaction-scoped
#: locks end with it). Every bucket of the batch is locked first, in sorted order, so two
#: batches never wait for each other in a cycle; then each request is counted in turn, as
#: the SQL below counts one, each seeing the ones before it.
_PG_ADMIT_FUNCTION = """
CREATE OR REPLACE FUNCTION qday_admit_many(requests jsonb, prune_before bigint, prune boolean)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    each_bucket text;
    request jsonb;
    names text[];
    window_start bigint;
    lim bigint;
    counts bigint[];
    answers jsonb := '[]'::jsonb;
BEGIN
    FOR each_bucket IN
        SELECT DISTINCT b FROM jsonb_array_elements(requests) AS r(v), jsonb_array_elements_text(r.v -> 0) AS b
        ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('rate:' || each_bucket, 0));
    END LOOP;
    FOR request IN SELECT e.v FROM jsonb_array_elements(requests) WITH ORDINALITY AS e(v, i) ORDER BY e.i LOOP
        names := ARRAY(SELECT jsonb_array_elements_text(request -> 0));
        window_start := (request ->> 1)::bigint;
        lim := (request ->> 2)::bigint;
        SELECT array_agg(COALESCE(w.count, 0) ORDER BY u.i) INTO counts
          FROM unnest(names) WITH ORDINALITY AS u(name, i)
          LEFT JOIN rate_windows w ON w.bucket = u.name AND w.start = window_start;
        IF (SELECT max(c) FROM unnest(counts) AS c) < lim THEN
            INSERT INTO rate_windows AS r (bucket, start, count)
            SELECT DISTINCT u, window_start, 1 FROM unnest(names) AS u
            ON CONFLICT (bucket) DO UPDATE SET
                count = CASE WHEN r.start = excluded.start THEN r.count + 1 ELSE 1 END, start = excluded.start;
        END IF;
        answers := answers || jsonb_build_array(to_jsonb(counts));
    END LOOP;
    IF prune THEN
        DELETE FROM rate_windows WHERE start < prune_before;
    END IF;
    RETURN answers;
END;
$$
"""
#: Most ``admit`` calls in one PostgreSQL round trip.
_MAX_BATCH = 256
_Request = tuple[tuple[str, ...], int, int, int, "asyncio.Future[list[int]]"]


class SqlWindowCounters:
    """Atomic per-window counters (``WindowCounters``) on a database; ``open`` makes the table."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._calls = 0
        self._pending: list[_Request] = []
        self._flushing: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, db: Database) -> SqlWindowCounters:
        """Counters on ``db``, their table created when missing."""

        async def create(tx: Tx) -> None:
            await tx.lock("rate_windows")  # nodes starting together: one creates, the others see it
            await tx.execute(_TABLE[db.dialect])
            if db.dialect == "postgresql":
                await tx.execute(_PG_ADMIT_FUNCTION)

        await db.write(create)
        return cls(db)

    async def admit(self, buckets: tuple[str, ...], start: int, limit: int, prune_before: int) -> list[int]:
        """Each bucket's count in the window starting at ``start`` before this call; one is
        added to every bucket when all of them were below ``limit``, to none otherwise (a
        refused request uses up no bucket). One transaction holding its buckets' locks
        (taken in one order, so two requests never wait for each other in a cycle); on
        PostgreSQL the calls of one event-loop pass share one call of ``qday_admit_many``,
        one round trip."""
        distinct = sorted(set(buckets))
        self._calls += 1
        prune = self._calls % _PRUNE_EVERY == 0
        if self._db.dialect == "postgresql":
            return await self._batched(buckets, start, limit, prune_before)

        async def admit(tx: Tx) -> list[int]:
            for bucket in distinct:
                await tx.lock(f"rate:{bucket}")
            marks = ",".join("?" * len(distinct))
            rows = await tx.fetch_all(
                f"SELECT bucket, count FROM rate_windows WHERE start = ? AND bucket IN ({marks})", (start, *distinct)
            )
            found = {row[0]: int(row[1]) for row in rows}
            before = [found.get(bucket, 0) for bucket in buckets]
            if max(before) < limit:
                await tx.execute_many(_UPSERT, [(bucket, start) for bucket in distinct])
            if prune:
                await tx.execute("DELETE FROM rate_windows WHERE start < ?", (prune_before,))
            return before

        return await self._db.write(admit)

    async def _batched(self, buckets: tuple[str, ...], start: int, limit: int, prune_before: int) -> list[int]:
        """Queue one ``admit`` for the next round trip; its counts once that is back. The
        first call of an event-loop pass starts the flush, which runs at the next pass, so
        the calls of one pass share a round trip; calls arriving during a round trip share
        the next one."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[list[int]] = loop.create_future()
        self._pending.append((buckets, start, limit, prune_before, answer))
        if self._flushing is None or self._flushing.done():
            self._flushing = loop.create_task(self._flush())
        return await answer

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:_MAX_BATCH], self._pending[_MAX_BATCH:]
            requests = [[list(buckets), start, limit] for buckets, start, limit, _, _ in batch]
            self._calls += 1
            try:
                row = await self._db.fetch_one(
                    "SELECT qday_admit_many(?::jsonb, ?::bigint, ?::boolean)",
                    (json.dumps(requests), min(r[3] for r in batch), self._calls % _PRUNE_EVERY == 0),
                )
                if row is None:  # a function always answers one row
                    raise RuntimeError("qday_admit_many answered nothing")
                answers = [[int(count) for count in counts] for counts in row[0]]
            except Exception as exc:  # noqa: BLE001 - handed to every caller of the batch
                for *_, answer in batch:
                    if not answer.done():
                        answer.set_exception(exc)
                continue
            for (*_, answer), counts in zip(batch, answers, strict=True):
                if not answer.done():
                    answer.set_result(counts)
