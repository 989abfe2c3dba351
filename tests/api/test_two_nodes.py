"""Two ``qday serve`` nodes on one PostgreSQL database, over real HTTP (issue 18).

Each node has its own data directory and the same ``QDAY_SECRET_KEY``; everything
operational lives in PostgreSQL. What one node does, the other sees: accounts, sessions and
keys; rate limits counted across both; a deleted key or an ended session refused by the
other within a second; the same scan asked of both at once reaching the chain once; and a
node killed with SIGKILL in the middle of writes loses none it acknowledged.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import polars as pl
import pytest
from dagster import materialize

from pipelines.assets import RESCORING_ASSETS
from pipelines.resources import SnapshotChainDataResource
from pipelines.sources import write_snapshot
from storage.models import Plan
from storage.postgres_db import PostgresDatabase
from storage.sql_accounts import SqlStore
from tests.databases import new_postgres_database
from tests.faultproxy import FaultProxy
from tests.pipelines.support import DataDir, evm_address, evm_observation, partition
from tests.postgres import PostgresServer
from tests.support import ServerProcess, Tenant, make_tenant

pytestmark = pytest.mark.slow

SECRET = "5e" * 32
#: Revocation must reach the other node within this (issue 18).
REVOCATION_SECONDS = 1.0


class Cluster:
    """Two nodes on one database, and its URL."""

    def __init__(self, a: ServerProcess, b: ServerProcess, url: str, proxy: FaultProxy) -> None:
        self.a = a
        self.b = b
        self.url = url
        self.proxy = proxy

    def client(self, node: ServerProcess, ip: str) -> httpx.AsyncClient:
        """A client of one node, seen as coming from ``ip`` (the nodes trust loopback as a
        proxy): each test has rate-limit buckets of its own."""
        return httpx.AsyncClient(base_url=node.base_url, timeout=30, headers={"X-Forwarded-For": ip})

    async def set_plan(self, email: str, plan: Plan) -> None:
        """Change a plan straight in the database, as ``qday admin set-plan`` does."""
        db = await PostgresDatabase.open(self.url, pool_size=1)
        try:
            await SqlStore(db).set_plan(email, plan)
        finally:
            await db.aclose()


@pytest.fixture(scope="module")
def cluster(
    postgres_server: PostgresServer, postgres_template: str, anvil, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Two nodes sharing a fresh database; the Ethereum endpoint (anvil) behind a proxy that
    counts the requests the nodes send it."""
    name, url = new_postgres_database(postgres_server, postgres_template)
    proxy = FaultProxy(anvil.url).start()
    env = {
        "QDAY_DATABASE_URL": url,
        "QDAY_SECRET_KEY": SECRET,
        "QDAY_ETHEREUM_RPC_URL": proxy.url,
        "QDAY_TEST_ETHEREUM_RPC_URL": proxy.url,
        "QDAY_FAMILY_CHAINS": "ethereum",
        "QDAY_TRUSTED_PROXIES": "127.0.0.1",
    }
    root = tmp_path_factory.mktemp("two-nodes")
    a = ServerProcess(root / "node-a", env=env)
    try:
        b = ServerProcess(root / "node-b", env=env)
    except BaseException:
        a.stop()
        raise
    try:
        yield Cluster(a, b, url, proxy)
    finally:
        a.stop()
        b.stop()
        proxy.stop()
        postgres_server.drop_database(name)


async def _tenant(cluster: Cluster, ip: str, keys: tuple[str, ...] = ("secret_live",)) -> Tenant:
    async with cluster.client(cluster.a, ip) as a:
        return await make_tenant(a, keys)


async def test_an_account_made_on_one_node_logs_in_and_works_on_the_other(cluster: Cluster) -> None:
    tenant = await _tenant(cluster, "10.18.0.1")
    async with cluster.client(cluster.b, "10.18.0.1") as b:
        r = await b.post("/v1/auth/login", json={"email": tenant.email, "password": tenant.password})
        assert r.status_code == 200, r.text
        session = r.json()["data"]["token"]
        made = await b.post(
            "/v1/auth/api-keys",
            json={"name": "made-on-b", "type": "secret", "environment": "test"},
            headers={"Authorization": f"Bearer {session}"},
        )
        assert made.status_code == 201, made.text
        key = made.json()["data"]["key"]
    async with cluster.client(cluster.a, "10.18.0.1") as a:
        listed = await a.get("/v1/auth/api-keys", headers={"Authorization": f"Bearer {key}"})
        assert listed.status_code == 200, listed.text
        names = {k["name"] for k in listed.json()["data"]}
        assert "made-on-b" in names
        # the key made on A at registration works on B too (the same keyed hash on both nodes)
    async with cluster.client(cluster.b, "10.18.0.1") as b:
        r = await b.get("/v1/auth/api-keys", headers=tenant.auth("secret_live"))
        assert r.status_code == 200, r.text


async def test_a_burst_across_both_nodes_gets_exactly_the_plans_limit(cluster: Cluster) -> None:
    tenant = await _tenant(cluster, "10.18.0.2")
    headers = tenant.auth("secret_live")
    async with cluster.client(cluster.a, "10.18.0.2") as a, cluster.client(cluster.b, "10.18.0.2") as b:
        first = await a.get("/v1/auth/api-keys", headers=headers)
        assert first.status_code == 200
        limit = int(first.headers["x-ratelimit-limit"])  # free plan, account group: 60 a minute
        if int(first.headers["x-ratelimit-reset"]) - time.time() < 20:  # not across a window's end
            await asyncio.sleep(max(0.0, int(first.headers["x-ratelimit-reset"]) - time.time()) + 0.5)
            first = await a.get("/v1/auth/api-keys", headers=headers)
            assert first.status_code == 200
        sem = asyncio.Semaphore(8)

        async def hit(n: int) -> int:
            async with sem:
                return (await (a if n % 2 else b).get("/v1/auth/api-keys", headers=headers)).status_code

        codes = await asyncio.gather(*(hit(n) for n in range(limit + 20)))
    assert codes.count(200) == limit - 1  # the first request above counted too
    assert codes.count(429) == 21


async def test_a_key_deleted_on_one_node_is_refused_by_the_other_within_a_second(cluster: Cluster) -> None:
    tenant = await _tenant(cluster, "10.18.0.3", ("secret_live", "secret_test"))
    doomed = tenant.keys["secret_test"]
    async with cluster.client(cluster.a, "10.18.0.3") as a, cluster.client(cluster.b, "10.18.0.3") as b:
        used = await b.get("/v1/auth/api-keys", headers=tenant.auth("secret_test"))
        assert used.status_code == 200  # node B now holds the key in its credential cache
        deleted = await a.delete(f"/v1/auth/api-keys/{doomed['id']}", headers=tenant.auth("session"))
        assert deleted.status_code == 204
        started = time.monotonic()
        while True:
            r = await b.get("/v1/auth/api-keys", headers=tenant.auth("secret_test"))
            if r.status_code == 401:
                break
            assert time.monotonic() - started < REVOCATION_SECONDS, "node B still accepts the deleted key"
            await asyncio.sleep(0.02)
    assert r.json()["error"]["code"] == "AUTH_002"
    assert time.monotonic() - started < REVOCATION_SECONDS


async def test_a_session_ended_on_one_node_is_refused_by_the_other_within_a_second(cluster: Cluster) -> None:
    tenant = await _tenant(cluster, "10.18.0.4")
    session = {"Authorization": f"Bearer {tenant.session}"}
    async with cluster.client(cluster.a, "10.18.0.4") as a, cluster.client(cluster.b, "10.18.0.4") as b:
        assert (await b.get("/v1/auth/api-keys", headers=session)).status_code == 200
        assert (await a.post("/v1/auth/logout", headers=session)).status_code == 204
        started = time.monotonic()
        while (r := await b.get("/v1/auth/api-keys", headers=session)).status_code != 401:
            assert time.monotonic() - started < REVOCATION_SECONDS, "node B still accepts the ended session"
            await asyncio.sleep(0.02)
        assert "logged out" in r.json()["error"]["message"]
        again = await a.post("/v1/auth/login", json={"email": tenant.email, "password": tenant.password})
        assert again.status_code == 200  # logging out ends one session, not the account


async def test_the_same_scan_on_both_nodes_asks_the_chain_once(cluster: Cluster, anvil) -> None:
    tenant = await _tenant(cluster, "10.18.0.5", ("secret_test",))
    await cluster.set_plan(tenant.email, Plan.PRO)
    headers = tenant.auth("secret_test")  # the test environment: anvil's chain id is not checked
    solo, pair = anvil.new_account(10**18), anvil.new_account(10**18)
    cluster.proxy.set_mode("slow", delay=0.3)  # each chain request takes a while: the scans overlap
    try:
        async with cluster.client(cluster.a, "10.18.0.5") as a, cluster.client(cluster.b, "10.18.0.5") as b:
            before = cluster.proxy.forwarded
            r = await a.post("/v1/scan/wallet", json={"address": solo.address, "chain": "ethereum"}, headers=headers)
            assert r.status_code == 200, r.text
            one_scan = cluster.proxy.forwarded - before
            assert one_scan > 0
            before = cluster.proxy.forwarded
            body = {"address": pair.address, "chain": "ethereum"}
            first, second = await asyncio.gather(
                a.post("/v1/scan/wallet", json=body, headers=headers),
                b.post("/v1/scan/wallet", json=body, headers=headers),
            )
    finally:
        cluster.proxy.set_mode("pass")
    assert first.status_code == second.status_code == 200, (first.text, second.text)
    assert cluster.proxy.forwarded - before == one_scan  # not twice
    assert first.json()["data"]["address"] == second.json()["data"]["address"]
    assert sorted([first.json()["data"]["cached"], second.json()["data"]["cached"]]) == [False, True]


def test_a_pipeline_run_publishes_to_the_database_both_nodes_serve(cluster: Cluster, tmp_path: Path) -> None:
    """While both nodes serve, the daily rescoring of one chain-day runs against the same
    database and publishes there; node B then answers a scan of the watched address from
    that result, without asking the chain (whose live endpoint here is anvil with the wrong
    chain id: a fetch would be SCAN_004)."""
    tenant = asyncio.run(_tenant(cluster, "10.18.0.7"))
    pipeline = DataDir(tmp_path / "pipeline", datetime.now(UTC), cluster.url)
    pipeline.root.mkdir()
    account = pipeline.account(tenant.email)  # the account node A registered
    address = evm_address(0x18)
    pipeline.watch(account, "ethereum", address, created_at=datetime.now(UTC) - timedelta(minutes=5))
    snapshot = tmp_path / "snapshot.jsonl"
    write_snapshot(snapshot, [evm_observation(address, balance=7 * 10**17, nonce=2)])
    resources = pipeline.resources(chain_data=SnapshotChainDataResource(snapshot_file=str(snapshot)))
    run = materialize(RESCORING_ASSETS, partition_key=partition("ethereum", pipeline.today), resources=resources)
    assert run.success
    r = httpx.post(
        f"{cluster.b.base_url}/v1/scan/wallet",
        json={"address": address, "chain": "ethereum"},
        headers={**tenant.auth("secret_live"), "X-Forwarded-For": "10.18.0.7"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    risk = pl.read_parquet(pipeline.analytics.daily_file("address_risk", pipeline.today, "ethereum"))
    assert data["cached"] is True and data["address"] == address
    assert data["riskValue"] == risk.filter(pl.col("address") == address)["risk_value"].item()
    assert not list(pipeline.root.rglob("qday.sqlite*"))


def test_no_operational_state_in_the_nodes_data_directories(cluster: Cluster) -> None:
    for node in (cluster.a, cluster.b):
        found = sorted(p.name for p in Path(node.data_dir).rglob("*.sqlite*"))
        assert found == [], f"{node.data_dir}: {found}"
        assert not (Path(node.data_dir) / "secrets").exists()  # the shared QDAY_SECRET_KEY is used


async def test_a_node_killed_during_writes_loses_no_acknowledged_write(
    postgres_server: PostgresServer, postgres_template: str, tmp_path: Path
) -> None:
    name, url = new_postgres_database(postgres_server, postgres_template)
    env = {"QDAY_DATABASE_URL": url, "QDAY_SECRET_KEY": SECRET}
    victim = ServerProcess(tmp_path / "victim", env=env)
    survivor = ServerProcess(tmp_path / "survivor", env=env)
    try:
        async with httpx.AsyncClient(base_url=victim.base_url, timeout=30) as v:
            tenant = await make_tenant(v)
        db = await PostgresDatabase.open(url, pool_size=1)
        try:
            await SqlStore(db).set_plan(tenant.email, Plan.PRO)
        finally:
            await db.aclose()
        await asyncio.sleep(1.1)  # the plan change reaches the nodes' credential caches
        acknowledged: list[str] = []
        stop = asyncio.Event()

        async def writer(n: int) -> None:
            async with httpx.AsyncClient(base_url=victim.base_url, timeout=30) as v:
                i = 0
                while not stop.is_set():
                    address = "0x" + os.urandom(20).hex()
                    try:
                        r = await v.post(
                            "/v1/watchlist",
                            json={"address": address, "chain": "ethereum", "label": f"w{n}-{i}"},
                            headers=tenant.auth("secret_live"),
                        )
                    except httpx.HTTPError:
                        return  # the node is gone: this write was never acknowledged
                    if r.status_code == 201:
                        acknowledged.append(r.json()["data"]["id"])
                    i += 1

        writers = [asyncio.create_task(writer(n)) for n in range(6)]
        while len(acknowledged) < 30:
            await asyncio.sleep(0.05)
        os.killpg(victim.process.pid, signal.SIGKILL)
        killed_at = datetime.now(UTC)
        await asyncio.wait_for(asyncio.gather(*writers), timeout=60)
        stop.set()
        found: set[str] = set()
        async with httpx.AsyncClient(base_url=survivor.base_url, timeout=30) as s:
            cursor = None
            while True:
                params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
                r = await s.get("/v1/watchlist", params=params, headers=tenant.auth("secret_live"))
                assert r.status_code == 200, r.text
                page = r.json()
                found.update(entry["id"] for entry in page["data"])
                cursor = page["meta"].get("nextCursor")
                if not cursor:
                    break
        missing = [i for i in acknowledged if i not in found]
        assert not missing, f"{len(missing)} acknowledged writes lost after SIGKILL at {killed_at}"
        assert len(acknowledged) >= 30
    finally:
        victim.stop()
        survivor.stop()
        postgres_server.drop_database(name)
