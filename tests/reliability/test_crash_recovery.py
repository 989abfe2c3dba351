"""kill -9 in the middle of attestation and key-management traffic: every request
that was acknowledged with a 2xx is there after a restart, nothing is half
written, and the service starts cleanly on the same data directory."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import time

import httpx
import pytest

import pqc
from tests.signing import eip191_signature, public_key
from tests.support import ServerProcess

pytestmark = pytest.mark.slow
ENV = {"QDAY_RATE_LIMIT_MULTIPLIER": "10000", "QDAY_SECRET_KEY": "ab" * 32}


def _setup(base: str) -> tuple[str, str, dict]:
    with httpx.Client(base_url=base, timeout=30) as c:
        c.post("/v1/auth/register", json={"email": "crash@example.com", "password": "p" * 16})
        session = c.post("/v1/auth/login", json={"email": "crash@example.com", "password": "p" * 16}).json()["data"][
            "token"
        ]
        key = c.post(
            "/v1/auth/api-keys",
            json={"name": "main", "type": "secret", "environment": "live"},
            headers={"Authorization": f"Bearer {session}"},
        ).json()["data"]["key"]
        generated = c.post(
            "/v1/keys/generate",
            json={"algorithm": "ml-dsa-44", "chain": "ethereum"},
            headers={"Authorization": f"Bearer {key}"},
        ).json()["data"]
    return session, key, generated


async def _traffic(
    base: str, session: str, key: str, generated: dict, acked: dict[str, list[str]], stop_at: float
) -> None:
    ecdsa_key = os.urandom(32)
    seed = bytes.fromhex(generated["seed"])

    async def attest(client: httpx.AsyncClient, n: int) -> None:
        message = f"crash test {n}".encode()
        body = {
            "message": message.hex(),
            "ecdsaSignature": eip191_signature(ecdsa_key, message).hex(),
            "ecdsaPublicKey": public_key(ecdsa_key).hex(),
            "pqcSignature": pqc.sign("ml-dsa-44", seed, message).hex(),
            "pqcPublicKey": generated["publicKey"],
            "algorithm": "ml-dsa-44",
        }
        r = await client.post("/v1/sign/hybrid", json=body, headers={"Authorization": f"Bearer {key}"})
        if r.status_code == 201:
            acked["attestations"].append(r.json()["data"]["id"])

    async def new_key(client: httpx.AsyncClient, n: int) -> None:
        r = await client.post(
            "/v1/auth/api-keys",
            json={"name": f"k{n}", "type": "secret", "environment": "live"},
            headers={"Authorization": f"Bearer {session}"},
        )
        if r.status_code == 201:
            acked["keys"].append(r.json()["data"]["key"])

    async def worker(job, offset: int) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:
            n = offset
            while time.monotonic() < stop_at:
                try:
                    await job(client, n)
                except httpx.HTTPError:
                    return  # the server is gone
                n += 100

    await asyncio.gather(*(worker(attest, i) for i in range(3)), *(worker(new_key, 50 + i) for i in range(2)))


def test_acknowledged_writes_survive_kill_9(tmp_path):
    server = ServerProcess(tmp_path / "data", env=ENV)
    try:
        session, key, generated = _setup(server.base_url)
        acked: dict[str, list[str]] = {"attestations": [], "keys": []}
        stop_at = time.monotonic() + 10

        async def run() -> None:
            traffic = asyncio.create_task(_traffic(server.base_url, session, key, generated, acked, stop_at))
            await asyncio.sleep(1.5)
            os.killpg(server.process.pid, signal.SIGKILL)  # mid-traffic, no shutdown path
            await asyncio.wait_for(traffic, timeout=30)

        asyncio.run(run())
        server.process.wait(timeout=10)
    finally:
        server.stop()
    assert len(acked["attestations"]) > 5 and len(acked["keys"]) > 2, acked

    db = sqlite3.connect(tmp_path / "data" / "qday.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()

    restarted = ServerProcess(tmp_path / "data", env=ENV)
    try:
        with httpx.Client(base_url=restarted.base_url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as c:
            for attestation_id in acked["attestations"]:
                r = c.post("/v1/verify", json={"attestationId": attestation_id})
                assert r.status_code == 200, r.text
                assert r.json()["data"]["valid"] is True
            for new_key in acked["keys"]:
                assert c.get("/v1/auth/api-keys", headers={"Authorization": f"Bearer {new_key}"}).status_code == 200
    finally:
        restarted.stop()
