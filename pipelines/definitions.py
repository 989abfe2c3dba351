"""The Dagster code location of qday: ``dagster_home/workspace.yaml`` loads ``defs`` here.

``build_definitions`` wires the assets, checks, jobs, schedules and sensors to resources
built from the qday settings (``QDAY_*`` variables and ``QDAY_CONFIG``, as for the API):
the operational store (PostgreSQL at ``database_url``, else the SQLite file of
``data_dir``) and the analytics folder of ``data_dir``, the chain
endpoints of the ``[chains]`` table and the chains looked up for key families
(``family_chains``), and the wall clock. Tests pass other resources (snapshots, fixed
prices, a stopped clock).
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import Definitions, EnvVar, definitions, in_process_executor

from pipelines.assets import ALL_ASSETS, ALL_CHECKS
from pipelines.automation import (
    new_addresses_job,
    new_watched_sensor,
    observe_job,
    observe_schedule,
    observed_families_sensor,
    readiness_job,
    readiness_schedule,
    readiness_sensor,
    rescore_job,
    score_job,
)
from pipelines.bitcoin import BitcoinNodeResource, bitcoin_block_range, bitcoin_index_job, bitcoin_tip_sensor
from pipelines.resources import (
    AnalyticsResource,
    ChainDataResource,
    ClockResource,
    EndpointChainDataResource,
    OperationalStoreResource,
    OraclePriceResource,
    PriceResource,
)
from pipelines.wallets import wallets_job, wallets_schedule, watched_wallets
from services.settings import Settings, load_settings


def _database_url(settings: Settings) -> str | EnvVar:
    """The PostgreSQL URL for the operational store resource: read from the environment at
    run time when that is where it came from, so its password never shows in Dagster's
    run configuration."""
    if settings.database_url and os.environ.get("QDAY_DATABASE_URL") == settings.database_url:
        return EnvVar("QDAY_DATABASE_URL")
    return settings.database_url


def analytics_dir(settings: Settings) -> Path:
    """The analytics folder of a data directory."""
    return settings.analytics_dir


def build_definitions(
    settings: Settings | None = None,
    *,
    chain_data: ChainDataResource | None = None,
    prices: PriceResource | None = None,
    bitcoin_node: BitcoinNodeResource | None = None,
) -> Definitions:
    """Every pipeline definition, with resources for ``settings`` (default: ``load_settings()``)."""
    settings = settings or load_settings()
    resources = {
        "chain_data": chain_data
        or EndpointChainDataResource(
            family_chains=list(settings.family_chains), family_wait_seconds=settings.family_wait_seconds
        ),
        "prices": prices or OraclePriceResource(),
        "operational_store": OperationalStoreResource(
            database=str(settings.operational_db.resolve()),
            database_url=_database_url(settings),
            synchronous=settings.sqlite_synchronous,
            enterprise_watch_cap=settings.enterprise_watch_cap,
        ),
        "analytics": AnalyticsResource(root=str(analytics_dir(settings))),
        "bitcoin_node": bitcoin_node or BitcoinNodeResource(),
        "clock": ClockResource(),
    }
    return Definitions(
        assets=[*ALL_ASSETS, bitcoin_block_range, watched_wallets],
        asset_checks=ALL_CHECKS,
        jobs=[observe_job, score_job, rescore_job, readiness_job, new_addresses_job, bitcoin_index_job, wallets_job],
        schedules=[observe_schedule, readiness_schedule, wallets_schedule],
        sensors=[new_watched_sensor, observed_families_sensor, readiness_sensor, bitcoin_tip_sensor],
        resources=resources,
        executor=in_process_executor,
    )


@definitions
def defs() -> Definitions:
    """Loaded by the Dagster webserver and daemon (lazily, in their code server)."""
    return build_definitions()
