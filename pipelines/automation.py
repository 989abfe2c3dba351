"""Jobs, schedules and the new-address sensor.

- ``rescore_watched`` (job, ``CHAIN_DAY`` partitions): the five rescoring assets and their
  checks. ``rescore_daily`` runs it at 02:00 UTC for every chain, for today's date.
- ``chain_readiness_job`` / ``chain_readiness_daily``: the readiness snapshot at 01:30 UTC.
- ``score_new_watched`` (job) and ``new_watched_sensor``: every 30 s the sensor reads the
  watch-list entries created since its cursor and asks for a run scoring just those, so a
  new address is served within about a minute. A large burst (a bulk import) asks for
  the affected chains' daily partitions instead, which is cheaper than many small runs.

All jobs use the in-process executor (a small job takes ~5 s instead of ~12 s
multiprocess, and nothing forks after Polars has run).
"""

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunConfig,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    build_schedule_from_partitioned_job,
    define_asset_job,
    in_process_executor,
    sensor,
)

from pipelines.assets import (
    RESCORING_ASSETS,
    NewWatchConfig,
    chain_readiness,
    newly_watched_scores,
)
from pipelines.resources import ClockResource, OperationalStoreResource
from storage.models import WatchedAddress

rescore_job = define_asset_job(
    "rescore_watched",
    selection=AssetSelection.assets(*RESCORING_ASSETS),
    executor_def=in_process_executor,
    description="Rescore every watched address of one chain for one day; publish the results.",
)
readiness_job = define_asset_job(
    "chain_readiness_job",
    selection=AssetSelection.assets(chain_readiness),
    executor_def=in_process_executor,
)
new_addresses_job = define_asset_job(
    "score_new_watched",
    selection=AssetSelection.assets(newly_watched_scores),
    executor_def=in_process_executor,
    description="Score watch-list entries the sensor found (run config lists them).",
)

rescore_schedule = build_schedule_from_partitioned_job(
    rescore_job,
    name="rescore_daily",
    hour_of_day=2,
    minute_of_hour=0,
    default_status=DefaultScheduleStatus.RUNNING,
    description="02:00 UTC: one run per chain for today's partition.",
)
readiness_schedule = build_schedule_from_partitioned_job(
    readiness_job,
    name="chain_readiness_daily",
    hour_of_day=1,
    minute_of_hour=30,
    default_status=DefaultScheduleStatus.RUNNING,
)

SENSOR_INTERVAL_SECONDS = 30
OVERLAP = timedelta(seconds=10)
"""Entries are re-read this far behind the cursor: an entry whose ``created_at`` was taken
before a writer waited for the SQLite lock (busy timeout 5 s) commits after later ones."""
INITIAL_LOOKBACK = timedelta(hours=1)
"""With no cursor yet (first start) the sensor takes entries of the last hour; older ones
are left to the daily run instead of starting one run per address ever watched."""
RUN_SIZE = 500
"""Entries per sensor run."""
BURST = 5_000
"""Above this many new entries in one tick, rescore the affected chains' partitions."""


@dataclass(frozen=True, slots=True)
class WatchCursor:
    """The newest ``created_at`` handled, and the ids handled within ``OVERLAP`` of it."""

    after: datetime | None
    seen: frozenset[str]

    @classmethod
    def parse(cls, text: str | None) -> "WatchCursor":
        if not text:
            return cls(None, frozenset())
        data = json.loads(text)
        return cls(datetime.fromisoformat(data["after"]) if data["after"] else None, frozenset(data["seen"]))

    def dump(self) -> str:
        return json.dumps({"after": self.after.isoformat() if self.after else None, "seen": sorted(self.seen)})

    def read_from(self, now: datetime) -> datetime:
        """Where the next read starts."""
        return self.after - OVERLAP if self.after is not None else now - INITIAL_LOOKBACK

    def advance(self, entries: list[WatchedAddress]) -> "WatchCursor":
        """The cursor after handling ``entries`` (plus everything it already covered)."""
        newest = max([e.created_at for e in entries] + ([self.after] if self.after else []), default=None)
        if newest is None:
            return self
        window = newest - OVERLAP
        keep = {e.id for e in entries if e.created_at > window}
        if self.after is not None and self.after > window:
            keep |= self.seen  # some of them may still be inside the new window
        return WatchCursor(newest, frozenset(keep))


def _run_key(ids: list[str]) -> str:
    return "new-" + hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:32]


@sensor(
    jobs=[new_addresses_job, rescore_job],
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    name="new_watched_sensor",
    description="Scores addresses added to any watch list since the last tick.",
)
def new_watched_sensor(
    context: SensorEvaluationContext, operational_store: OperationalStoreResource, clock: ClockResource
):
    cursor = WatchCursor.parse(context.cursor)
    now = clock.now()
    with operational_store.open(writer=False) as op:
        candidates = op.watched(created_after=cursor.read_from(now))
    fresh = [e for e in candidates if e.id not in cursor.seen]
    next_cursor = cursor.advance(fresh) if cursor.after is not None or fresh else WatchCursor(now, frozenset())
    if not fresh:
        return SensorResult(skip_reason=SkipReason("no new watched addresses"), cursor=next_cursor.dump())
    requests = []
    if len(fresh) > BURST:
        today = now.date().isoformat()
        burst = (next_cursor.after or now).isoformat()  # advanced past the fresh entries, so set
        for chain in sorted({e.chain for e in fresh}):
            requests.append(
                RunRequest(
                    job_name=rescore_job.name,
                    partition_key=f"{chain}|{today}",
                    run_key=f"burst-{chain}-{burst}",
                )
            )
    else:
        for start in range(0, len(fresh), RUN_SIZE):
            chunk = fresh[start : start + RUN_SIZE]
            ids = [e.id for e in chunk]
            oldest = min(e.created_at for e in chunk) - timedelta(seconds=1)
            config = NewWatchConfig(watch_ids=ids, created_after=oldest.isoformat())
            requests.append(
                RunRequest(
                    job_name=new_addresses_job.name,
                    run_key=_run_key(ids),
                    run_config=RunConfig(ops={newly_watched_scores.op.name: config}),
                    tags={"qday/new_entries": str(len(ids))},
                )
            )
    context.log.info(f"{len(fresh)} new watched address(es): {len(requests)} run request(s)")
    return SensorResult(run_requests=requests, cursor=next_cursor.dump())
