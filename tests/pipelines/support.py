"""Helpers of the pipeline tests (plain functions and classes, imported by the tests):
a data directory with accounts and the resources of a run on it, recorded observations,
addresses and partition keys. The fixtures are in ``tests/pipelines/fixtures.py``."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from chains.codecs.detect import parse_address
from chains.environment import Environment
from chains.observation import AccountType, Exposure, ExposureEvidence, Observation
from chains.registry import CHAINS, Chain
from core.ids import new_id
from pipelines.resources import (
    AnalyticsResource,
    FixedClockResource,
    OperationalStoreResource,
    StaticPriceResource,
)
from pipelines.runner import LoopThread
from storage.analytics import AnalyticsStore
from storage.database import Database
from storage.engines import open_database
from storage.models import Account, Plan, WatchedAddress
from storage.sql_accounts import SqlStore
from storage.sql_scans import SqlScanStore
from storage.sqlite_db import open_connection
from tests.chain_clients.loopback import Loopback
from tests.observations import observation

T = TypeVar("T")


def partition(chain: str, day: date) -> str:
    """The ``CHAIN_DAY`` key of ``chain`` on ``day`` (``ethereum|2026-11-22``)."""
    return f"{chain}|{day.isoformat()}"


@dataclass
class DataDir:
    """A data directory with two accounts and the resources of a run on it; the runs'
    clock is stopped at ``now`` (the ``pipeline_now`` fixture). The operational store is
    the SQLite file ``db``, or the PostgreSQL database at ``database_url``."""

    root: Path
    now: datetime
    database_url: str = ""

    @property
    def today(self) -> date:
        """The date of the runs' clock: the partition a run observes."""
        return self.now.date()

    @property
    def db(self) -> Path:
        return self.root / "qday.sqlite"

    @property
    def analytics(self) -> AnalyticsStore:
        return AnalyticsStore(self.root / "analytics")

    def resources(self, **chain_data) -> dict[str, object]:
        return {
            "operational_store": OperationalStoreResource(database=str(self.db), database_url=self.database_url),
            "analytics": AnalyticsResource(root=str(self.root / "analytics")),
            "prices": StaticPriceResource(),
            "clock": FixedClockResource(at=self.now.isoformat()),
            **chain_data,
        }

    def connect(self) -> sqlite3.Connection:
        """A raw connection to the operational SQLite file (migrations applied), for SQL of
        the test's own."""
        return open_connection(self.db)

    def run(self, call: Callable[[Database], Coroutine[Any, Any, T]]) -> T:
        """``call`` on the operational database, opened for it on an event loop of its own
        and closed after (the pipeline tests are plain functions: no loop runs in their thread)."""

        async def opened() -> T:
            db = await open_database(self.database_url, self.db, pool_size=2)
            try:
                return await call(db)
            finally:
                await db.aclose()

        return asyncio.run(opened())

    def account(self, email: str) -> str:
        async def find_or_create(db: Database) -> str:
            store = SqlStore(db)
            found = await store.account_by_email(email)
            if found is not None:
                return found[0].id
            account = Account(new_id("usr"), email, None, Plan.FREE, datetime.now(UTC))
            await store.create_account(account, "not-a-real-hash")
            return account.id

        return self.run(find_or_create)

    def watch(
        self,
        account_id: str,
        chain: str,
        address: str,
        environment: Environment = Environment.LIVE,
        label: str | None = None,
        created_at: datetime | None = None,
    ) -> WatchedAddress:
        """Watch an address as the API does (``created_at``: the wall clock by default)."""
        entry = WatchedAddress(
            new_id("wat"), account_id, environment, chain, address, label, created_at or datetime.now(UTC)
        )

        async def watch(db: Database) -> WatchedAddress:
            stored = await SqlScanStore(db).watch(entry)
            assert stored is not None  # no cap
            return stored

        return self.run(watch)

    def results(self) -> list[tuple]:
        conn = self.connect()
        try:
            return conn.execute(
                "SELECT account_id, environment, chain, address, result, risk_value, scanned_at,"
                " source FROM scan_results ORDER BY account_id, environment, chain, address"
            ).fetchall()
        finally:
            conn.close()


@dataclass
class ThreadedLoopback:
    """A ``Loopback`` server running on its own event-loop thread."""

    server: Loopback
    loop: LoopThread

    @property
    def url(self) -> str:
        return self.server.url


def evm_observation(
    address: str,
    balance: int,
    nonce: int,
    environment: Environment = Environment.LIVE,
    chain: str = "ethereum",
    observed_at: datetime | None = None,
) -> tuple[Environment, Observation]:
    """A recorded EVM observation (what ``EvmClient`` reports for an EOA)."""
    canonical = str(parse_address(address, chain))
    return environment, Observation(
        chain=chain,
        address=canonical,
        address_type="eoa",
        account_type=AccountType.EOA,
        balance=balance,
        decimals=18,
        symbol=CHAINS[Chain(chain)].symbol,
        tx_count=nonce,
        outbound_tx_count=nonce,
        exposure=Exposure.EXPOSED_AT_REST if nonce else Exposure.EXPOSED_ON_SPEND,
        public_key=None,
        address_reuse_count=max(nonce - 1, 0),
        first_activity=None,
        last_activity=None,
        source="evm-jsonrpc",
        height=100,
        observed_at=observed_at or datetime.now(UTC) - timedelta(seconds=5),
    )


def evm_address(n: int) -> str:
    return str(parse_address("0x" + f"{n:040x}", "ethereum"))


def btc_observation(
    address: str,
    balance: int,
    spent: int = 0,
    evidence: tuple[ExposureEvidence, ...] = (),
    environment: Environment = Environment.LIVE,
    observed_at: datetime | None = None,
) -> tuple[Environment, Observation]:
    """A recorded Bitcoin observation (what ``EsploraClient`` reports for a key-hash
    address): exposed at rest once ``spent`` spends revealed the key, with the client's
    ``evidence``."""
    typed = parse_address(address, "bitcoin", environment.network)
    funded = 1 if balance or spent else 0
    return environment, Observation(
        chain="bitcoin",
        address=str(typed),
        address_type=typed.address_type,
        account_type=AccountType.UTXO_SCRIPT,
        balance=balance,
        decimals=8,
        symbol="BTC",
        tx_count=funded + spent,
        outbound_tx_count=spent,
        exposure=Exposure.EXPOSED_AT_REST if spent else Exposure.EXPOSED_ON_SPEND,
        public_key=None,
        address_reuse_count=0,
        first_activity=None,
        last_activity=None,
        source="esplora",
        height=900_000,
        observed_at=observed_at or datetime.now(UTC) - timedelta(seconds=5),
        evidence=evidence,
    )


def cosmos_observation(
    address: str, balance: int = 0, environment: Environment = Environment.LIVE, observed_at: datetime | None = None
) -> tuple[Environment, Observation]:
    """A recorded Cosmos account that never signed (no key stored on chain)."""
    typed = parse_address(address, "cosmos", environment.network)
    return environment, observation(
        "cosmos",
        address=str(typed),
        balance=balance,
        tx_count=1 if balance else 0,
        source="cosmos-lcd",
        height=20_000_000,
        observed_at=observed_at or datetime.now(UTC) - timedelta(seconds=5),
    )
