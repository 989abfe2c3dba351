"""Jobs, schedules and sensors.

- ``observe_watched`` (job, ``CHAIN_DAY`` partitions): the observe phase of a chain's day
  (watch list, family targets, observations and ``key_exposure``, prices).
  ``observe_daily`` runs it at 02:00 UTC for every chain, for today's date.
- ``score_watched`` (job, ``CHAIN_DAY``): the score phase (key-family linkage, scores and
  their checks, published results). ``observed_families_sensor`` asks for it once every
  observe run of the chain's family group for that day has finished (succeeded or
  failed: a failed chain is reported unavailable), and again whenever one of them has
  observed since the chain was last scored.
- ``rescore_watched`` (job, ``CHAIN_DAY``): both phases in one run, by hand (``make
  rescore``); its links see what the other chains of the group observed so far that day.
- ``chain_readiness_job`` / ``chain_readiness_daily``: the readiness snapshot at 01:30 UTC;
  ``chain_readiness_sensor`` asks for today's snapshot whenever it is missing, so the table
  is filled within a minute of the first start (and of midnight), not at the next 01:30.
- ``score_new_watched`` (job) and ``new_watched_sensor``: every 30 s the sensor reads the
  watch-list entries created since its cursor and asks for a run scoring just those, so a
  new address is served within about a minute. A large burst (a bulk import) asks for
  the observe runs of the affected chains' family groups instead (the new addresses'
  siblings are observed there), which is cheaper than many small runs.

All jobs use the in-process executor (a small job takes ~5 s instead of ~12 s
multiprocess, and nothing forks after Polars has run).
"""

import hashlib
import json
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    AssetSelection,
    DagsterInstance,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunConfig,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    build_schedule_from_partitioned_job,
    define_asset_job,
    in_process_executor,
    sensor,
)

from chains.keys import family_group
from chains.registry import CHAINS, Chain
from pipelines.assets import (
    OBSERVE_ASSETS,
    RESCORING_ASSETS,
    SCORE_ASSETS,
    NewWatchConfig,
    chain_readiness,
    newly_watched_scores,
)
from pipelines.resources import ClockResource, OperationalStoreResource
from storage.models import WatchedAddress

observe_job = define_asset_job(
    "observe_watched",
    selection=AssetSelection.assets(*OBSERVE_ASSETS),
    executor_def=in_process_executor,
    description="Observe one chain's watched addresses and the siblings there of every watched key, for one day.",
)
score_job = define_asset_job(
    "score_watched",
    selection=AssetSelection.assets(*SCORE_ASSETS),
    executor_def=in_process_executor,
    description="Link one chain's observations of a day to their key families, score and publish them.",
)
rescore_job = define_asset_job(
    "rescore_watched",
    selection=AssetSelection.assets(*RESCORING_ASSETS),
    executor_def=in_process_executor,
    description="Observe and score one chain's day in one run; publish the results.",
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

observe_schedule = build_schedule_from_partitioned_job(
    observe_job,
    name="observe_daily",
    hour_of_day=2,
    minute_of_hour=0,
    default_status=DefaultScheduleStatus.RUNNING,
    description="02:00 UTC: one observe run per chain for today's partition (the sensor then scores).",
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


READINESS_SENSOR_INTERVAL_SECONDS = 30


@sensor(
    job=readiness_job,
    minimum_interval_seconds=READINESS_SENSOR_INTERVAL_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    name="chain_readiness_sensor",
    description="Asks for today's chain_readiness snapshot when it is missing (first start, a new day).",
)
def readiness_sensor(context: SensorEvaluationContext, clock: ClockResource):
    today = clock.today().isoformat()
    if _latest(context.instance, chain_readiness.key.to_user_string(), today) is not None:
        return SkipReason(f"chain_readiness of {today} is there")
    # one request per day: the run key makes a repeated request a no-op while it runs, and a
    # failed run waits for the 01:30 schedule (or a run by hand) instead of looping
    return RunRequest(partition_key=today, run_key=f"readiness-{today}")


@sensor(
    jobs=[new_addresses_job, observe_job],
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
        groups = {c for e in fresh for c in family_group(Chain(e.chain))}
        for chain in (c for c in CHAINS if c in groups):
            requests.append(
                RunRequest(
                    job_name=observe_job.name,
                    partition_key=f"{chain.value}|{today}",
                    run_key=f"burst-{chain.value}-{burst}",
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


# --- the score phase --------------------------------------------------------------------

OBSERVING_JOBS = frozenset({observe_job.name, rescore_job.name})
"""Jobs whose runs observe a chain's day (a score run waits for them)."""
UNFINISHED = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]


def _latest(instance: DagsterInstance, asset: str, partition: str) -> int | None:
    """The storage id of the asset partition's latest materialization (None: never)."""
    found = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[partition]), limit=1
    )
    return found.records[0].storage_id if found.records else None


def _observing(instance: DagsterInstance, partition: str) -> bool:
    """True while a run observing the partition is queued or running."""
    runs = instance.get_run_records(RunsFilter(tags={"dagster/partition": partition}, statuses=UNFINISHED))
    return any(run.dagster_run.job_name in OBSERVING_JOBS for run in runs)


def score_requests(instance: DagsterInstance, day: date) -> list[RunRequest]:
    """The score runs ``day`` needs: a chain whose own observations and prices are there,
    whose family group has no observe run unfinished, and that was not scored since the
    group's latest ``key_exposure`` (or its prices). The run key names that latest
    materialization, so each change asks for one run."""
    keys = {chain: f"{chain.value}|{day.isoformat()}" for chain in CHAINS}
    observing = {chain: _observing(instance, key) for chain, key in keys.items()}
    members = {chain: _latest(instance, "key_exposure", key) for chain, key in keys.items()}
    requests = []
    for chain, key in keys.items():
        prices = _latest(instance, "native_prices", key)
        group = family_group(chain)
        if members[chain] is None or prices is None or any(observing[c] for c in group):
            continue
        stamp = max([prices, *(found for c in group if (found := members[c]) is not None)])
        scored = _latest(instance, "address_risk", key)
        if scored is None or scored < stamp:
            requests.append(RunRequest(job_name=score_job.name, partition_key=key, run_key=f"score-{key}-{stamp}"))
    return requests


@sensor(
    jobs=[score_job],
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    name="observed_families_sensor",
    description="Scores a chain's day once the observe runs of its key-family group have finished.",
)
def observed_families_sensor(context: SensorEvaluationContext, clock: ClockResource):
    today = clock.today()
    requests = [r for day in (today - timedelta(days=1), today) for r in score_requests(context.instance, day)]
    if not requests:
        return SensorResult(skip_reason=SkipReason("no chain day waiting to be scored"))
    context.log.info(f"score runs: {', '.join(str(r.partition_key) for r in requests)}")
    return SensorResult(run_requests=requests)
