"""GET /v1/ready: 200 while the operational store takes a read and a write, 503 SRV_002
naming the failed probe otherwise (a PostgreSQL server stopped under a running node; a SQLite
writer stuck past the probe's timeout), while /v1/health, liveness, still answers."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from services.settings import load_settings
from storage.database import Tx
from tests.api.test_envelope import assert_error
from tests.postgres import MISSING_POSTGRES, PostgresServer, postgres_bin
from tests.support import ManualClock, client_for, engine_env, running_app


async def test_a_serving_node_is_ready_on_either_engine(client, app) -> None:
    r = await client.get("/v1/ready")  # no credential
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["status"] == "ready" and data["engine"] == app.ctx.database.dialect
    assert data["readMs"] >= 0 and data["writeMs"] >= 0


async def test_a_stopped_postgresql_server_makes_the_node_not_ready(tmp_path: Path) -> None:
    if postgres_bin() is None:
        pytest.skip(MISSING_POSTGRES)
    with PostgresServer(tmp_path / "pg") as server:
        url = server.create_database("qday_ready")
        settings = load_settings(engine_env(url), data_dir=tmp_path / "data")
        async with running_app(settings, ManualClock()) as app, client_for(app) as client:
            assert (await client.get("/v1/ready")).status_code == 200
            server.stop()
            error = assert_error(await client.get("/v1/ready"), 503, "SRV_002")
            assert error["details"] == {"engine": "postgresql", "probe": "read"}
            assert str(server.port) not in error["message"] and "127.0.0.1" not in error["message"]
            assert (await client.get("/v1/health")).status_code == 200  # alive, not ready


async def test_a_stuck_writer_makes_the_node_not_ready(tmp_path: Path) -> None:
    settings = load_settings({}, data_dir=tmp_path)
    release = threading.Event()

    async def stuck(tx: Tx) -> None:  # holds SQLite's group-commit thread until released
        release.wait(30)

    async with running_app(settings, ManualClock()) as app, client_for(app) as client:
        held = asyncio.ensure_future(app.ctx.database.write(stuck))
        try:
            error = assert_error(await client.get("/v1/ready"), 503, "SRV_002")
            assert error["details"] == {"engine": "sqlite", "probe": "write"}
            assert "longer than 2 s" in error["message"]
        finally:
            release.set()
            await held
        assert (await client.get("/v1/ready")).status_code == 200  # ready again once the writer is free
