"""Fixtures of the pipeline tests: a data directory with accounts, anvil, a loopback
Esplora server (on its own event-loop thread, since Dagster runs synchronously), and
the resources to hand to ``materialize``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chains.codecs.detect import parse_address
from chains.environment import Environment
from chains.observation import AccountType, Exposure, Observation
from core.ids import new_id
from pipelines.resources import (
    AnalyticsResource,
    OperationalStoreResource,
    SnapshotChainDataResource,
    StaticPriceResource,
)
from pipelines.runner import LoopThread
from pipelines.sources import write_snapshot
from storage.analytics import AnalyticsStore
from storage.models import Account, Plan, WatchedAddress
from storage.scans_sqlite import SqliteScanStore
from storage.sqlite import SqliteStore, open_database, ts
from tests.chain_clients.loopback import Loopback

TODAY = datetime.now(UTC).date()


def partition(chain: str) -> str:
    """Today's ``CHAIN_DAY`` key of ``chain``."""
    return f"{chain}|{TODAY.isoformat()}"


@pytest.fixture(autouse=True)
def _quiet_dagster() -> None:
    logging.getLogger("dagster").setLevel(logging.WARNING)


@dataclass
class DataDir:
    """A data directory with two accounts and the resources of a run on it."""

    root: Path

    @property
    def db(self) -> Path:
        return self.root / "qday.sqlite"

    @property
    def analytics(self) -> AnalyticsStore:
        return AnalyticsStore(self.root / "analytics")

    def resources(self, **chain_data) -> dict[str, object]:
        return {
            "operational_store": OperationalStoreResource(database=str(self.db)),
            "analytics": AnalyticsResource(root=str(self.root / "analytics")),
            "prices": StaticPriceResource(),
            **chain_data,
        }

    def connect(self):
        return open_database(self.db)

    def account(self, email: str) -> str:
        conn = self.connect()
        try:
            store = SqliteStore(conn)
            found = store.account_by_email(email)
            if found is not None:
                return found[0].id
            account = Account(new_id("usr"), email, None, Plan.FREE, datetime.now(UTC))
            asyncio.run(store.create_account(account, "not-a-real-hash"))
            return account.id
        finally:
            conn.close()

    def watch(
        self,
        account_id: str,
        chain: str,
        address: str,
        environment: Environment = Environment.LIVE,
        label: str | None = None,
        created_at: datetime | None = None,
    ) -> WatchedAddress:
        conn = self.connect()
        try:
            entry = WatchedAddress(
                new_id("wat"), account_id, environment, chain, address, label, created_at or datetime.now(UTC)
            )
            return asyncio.run(SqliteScanStore(conn).watch(entry))
        finally:
            conn.close()

    def results(self) -> list[tuple]:
        conn = self.connect()
        try:
            return conn.execute(
                "SELECT account_id, environment, chain, address, result, risk_value, scanned_at,"
                " source FROM scan_results ORDER BY account_id, environment, chain, address"
            ).fetchall()
        finally:
            conn.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> DataDir:
    root = tmp_path / "data"
    root.mkdir()
    open_database(root / "qday.sqlite").close()
    return DataDir(root)


@dataclass
class ThreadedLoopback:
    """A ``Loopback`` server running on its own event-loop thread."""

    server: Loopback
    loop: LoopThread

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="session")
def esplora() -> Iterator[ThreadedLoopback]:
    loop = LoopThread("loopback").__enter__()
    server = loop.run(Loopback().start())
    yield ThreadedLoopback(server, loop)
    loop.run(server.stop())
    loop.close()


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
        symbol="ETH" if chain == "ethereum" else "POL",
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


@pytest.fixture
def snapshot_world(data_dir: DataDir, tmp_path: Path):
    """``count`` watched Ethereum addresses (account a@…) with a replay snapshot of them."""

    def make(count: int = 20, account: str = "a@example.com", start: int = 1) -> tuple[DataDir, dict]:
        account_id = data_dir.account(account)
        observations = []
        conn = data_dir.connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            store = SqliteScanStore(conn)
            for n in range(start, start + count):
                address = evm_address(n)
                created = datetime.now(UTC) - timedelta(minutes=10)
                conn.execute(
                    "INSERT INTO watchlist VALUES (?,?,?,?,?,?,?)",
                    (new_id("wat"), account_id, "live", "ethereum", address, None, ts(created)),
                )
                observations.append(evm_observation(address, balance=n * 10**17, nonce=n % 7))
            conn.execute("COMMIT")
            assert len(store.watchlist(account_id, Environment.LIVE)) >= count
        finally:
            conn.close()
        snapshot = tmp_path / f"snapshot-{start}-{count}.jsonl"
        write_snapshot(snapshot, observations)
        return data_dir, data_dir.resources(chain_data=SnapshotChainDataResource(snapshot_file=str(snapshot)))

    return make
