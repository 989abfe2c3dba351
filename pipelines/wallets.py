"""The daily rescoring of watched wallets (descriptors and extended public keys).

``watched_wallets`` (one partition per day) derives, scans and summarises every tenant's
watched wallets with the scan endpoint's code (``services.descriptor_watch``), each within
what its plan's watch cap leaves it; publishes the used addresses' results (``source``
``pipeline``) and records each wallet's summary in the operational store; and writes one
``wallet_risk`` row per wallet for analysts. A wallet scan needs the chain clients
themselves (its coins): with a recorded snapshot as the chain source the asset says so and
writes nothing. A wallet whose chain fails does not stop the others; the run then fails,
naming them, so that Dagster shows it and a retry rescans the day.
"""

from datetime import date, datetime

import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetSelection,
    DefaultScheduleStatus,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
    build_schedule_from_partitioned_job,
    define_asset_job,
    in_process_executor,
)

from chains.environment import Environment
from chains.errors import ChainError
from chains.registry import Chain
from pipelines.assets import DAILY_PARTITIONS
from pipelines.resources import (
    AnalyticsResource,
    ChainDataResource,
    ClockResource,
    OperationalStoreResource,
    PriceResource,
)
from services.descriptor_scans import DescriptorScanService
from services.descriptor_watch import DescriptorWatchService, Rescan
from services.exposure_index import ExposureIndex
from services.pricing import KnownPrices
from storage.analytics import TABLES
from storage.bitcoin_index import BitcoinIndexStore

WALLETS = "wallets"


def wallet_row(rescan: Rescan, day: date, run_id: str) -> dict[str, object]:
    """The ``wallet_risk`` row of one rescanned wallet."""
    summary = rescan.answer["summary"]
    entry = rescan.entry
    return {
        "environment": entry.environment.value,
        "account_id": entry.account_id,
        "watch_id": entry.id,
        "descriptor": entry.descriptor,
        "used_addresses": summary["usedAddresses"],
        "derived_addresses": summary["derivedAddresses"],
        "balance_sat": summary["balanceSat"],
        "exposed_balance_sat": summary["exposedBalanceSat"],
        "balance_at_risk_usd": summary["balanceAtRiskUsd"],
        "risk_value": summary["riskValue"],
        "risk_score": summary["riskScore"],
        "exposure_complete": rescan.answer["exposureComplete"],
        "lookup_rounds": summary["lookupRounds"],
        "scanned_at": datetime.fromisoformat(rescan.answer["scannedAt"]),
        "scan_date": day,
        "run_id": run_id,
    }


@asset(partitions_def=DAILY_PARTITIONS, group_name=WALLETS, kinds={"sqlite", "parquet"})
def watched_wallets(
    context: AssetExecutionContext,
    operational_store: OperationalStoreResource,
    chain_data: ChainDataResource,
    prices: PriceResource,
    analytics: AnalyticsResource,
    clock: ClockResource,
) -> MaterializeResult:
    """Rescore every watched wallet (module docstring)."""
    day = date.fromisoformat(context.partition_key)
    store = analytics.store()
    index = ExposureIndex(BitcoinIndexStore(store.root))
    rows: list[dict[str, object]] = []
    failed: dict[str, str] = {}
    published = 0
    # one loop: the wallet scans read the store (PostgreSQL connections belong to a loop)
    with chain_data.open() as source, operational_store.open(loop=source.loop) as op, prices.open() as price_source:
        observer = source.observer(index, chain_data.family_wait_seconds)
        if observer is None:
            return MaterializeResult(metadata={"skipped": "the chain source is a snapshot: wallet scans need clients"})
        valued = [env for env in Environment if prices.valued(env, Chain.BITCOIN)]
        found = price_source.native_prices(Chain.BITCOIN, valued) if valued else {}
        known = KnownPrices({(env, Chain.BITCOIN): price for env, price in found.items()})
        scans = DescriptorScanService(op.scans, observer, known, clock)
        wallets = op.scans.descriptor_watch()
        watch = DescriptorWatchService(scans, wallets, clock, operational_store.enterprise_watch_cap)
        for entry, plan in op.run(wallets.everyone()):
            try:
                rescan = source.run(watch.rescan(entry, plan))
            except ChainError as exc:
                failed[entry.id] = str(exc)
                context.log.warning(f"wallet {entry.id} not rescored: {exc}")
                continue
            if not op.run(watch.record(rescan)):
                continue  # removed meanwhile: nothing to publish
            published += op.publish(rescan.records)[0]
            rows.append(wallet_row(rescan, day, context.run.run_id))
    frame = pl.DataFrame(rows, schema=TABLES["wallet_risk"].schema)
    store.write_frame("wallet_risk", store.daily_file("wallet_risk", day), frame)
    if failed:  # the others are published; a retry of the day rescans every wallet
        raise Failure(
            description=f"{len(failed)} wallet(s) not rescored: their chain data was unavailable",
            metadata={"failed": MetadataValue.json(failed), "wallets": len(rows), "published": published},
        )
    return MaterializeResult(
        metadata={
            "wallets": len(rows),
            "published": published,
        }
    )


wallets_job = define_asset_job(
    "rescore_wallets",
    selection=AssetSelection.assets(watched_wallets),
    executor_def=in_process_executor,
    description="Derive, scan and summarise every watched wallet for one day.",
)
wallets_schedule = build_schedule_from_partitioned_job(
    wallets_job,
    name="rescore_wallets_daily",
    hour_of_day=3,
    minute_of_hour=0,
    default_status=DefaultScheduleStatus.RUNNING,
    description="03:00 UTC: every watched wallet rescored (after the addresses' 02:00 run).",
)
