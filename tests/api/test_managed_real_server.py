"""Managed custody over real HTTP: two worker processes sharing one token, what
reaches the disk and the server log, and the first start that creates its own
SoftHSM2 token under the data directory (what `make run` does)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys

import httpx
import pytest

import pqc
from services.custody.softhsm import SoftHsmLayout, open_softhsm
from tests.custody.support import (
    files_containing,
    managed_seeds,
    requires_softhsm,
    secret_patterns,
    shared_softhsm_conf,
)
from tests.support import REPO_ROOT, ServerProcess

shared_softhsm_conf()
pytestmark = [pytest.mark.slow, requires_softhsm]


def _pro_tenant(server: ServerProcess, ip: str) -> str:
    email = f"custody-{ip}@example.com"
    with httpx.Client(base_url=server.base_url, headers={"X-Forwarded-For": ip}, timeout=30) as c:
        assert c.post("/v1/auth/register", json={"email": email, "password": "p" * 16}).status_code == 201
        session = c.post("/v1/auth/login", json={"email": email, "password": "p" * 16}).json()["data"]["token"]
        key = c.post(
            "/v1/auth/api-keys",
            json={"name": "k", "type": "secret", "environment": "live"},
            headers={"Authorization": f"Bearer {session}"},
        ).json()["data"]["key"]
    conn = sqlite3.connect(server.data_dir / "qday.sqlite", timeout=10)
    with conn:
        conn.execute("UPDATE accounts SET plan = 'pro' WHERE email = ?", (email,))
    conn.close()
    return key


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    """Two workers on the process's shared throw-away token."""
    proc = ServerProcess(
        tmp_path_factory.mktemp("managed-real"),
        workers=2,
        env={"QDAY_TRUSTED_PROXIES": "127.0.0.1", "QDAY_LOG_LEVEL": "DEBUG", "QDAY_ACCESS_LOG": "true"},
    )
    yield proc
    proc.stop()


def test_concurrent_managed_signing_on_two_workers_leaks_nothing(two_workers):
    server = two_workers
    key = _pro_tenant(server, "127.8.0.1")
    headers = {"X-API-Key": key, "X-Forwarded-For": "127.8.0.1"}

    async def burst():
        async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60) as c:
            made = await asyncio.gather(
                *(
                    c.post("/v1/keys/generate", json={"algorithm": alg, "chain": "ethereum", "custody": "managed"})
                    for alg in ["ml-dsa-65", "ml-dsa-44"] * 3
                )
            )
            keys = [r.json()["data"] for r in made]
            signed = await asyncio.gather(
                *(
                    c.post(
                        "/v1/sign/managed", json={"key_id": k["id"], "message": f"{i:04x}", "algorithm": k["algorithm"]}
                    )
                    for i in range(5)
                    for k in keys
                )
            )
            return made, keys, signed

    made, keys, signed = asyncio.run(burst())
    assert [r.status_code for r in made] == [201] * 6
    assert [r.status_code for r in signed] == [200] * 30
    by_id = {k["id"]: k for k in keys}
    for r in signed:
        data = r.json()["data"]
        pqc.verify(
            data["algorithm"],
            bytes.fromhex(by_id[data["keyId"]]["publicKey"]),
            bytes.fromhex(r.request.content.decode().split('"message":"')[1].split('"')[0]),
            bytes.fromhex(data["signature"]),
        )
    backend = open_softhsm(shared_softhsm_conf())
    try:
        seeds = managed_seeds(server.data_dir / "qday.sqlite", backend._unwrap)
    finally:
        backend.close()
    assert set(seeds) == set(by_id)
    patterns = [p for key_id, seed in seeds.items() for p in secret_patterns(seed, by_id[key_id]["algorithm"])]
    assert files_containing(server.data_dir, patterns) == []  # database, WAL, secrets and server.log
    assert "/v1/sign/managed" in server.log_path.read_text()  # the access log was on
    for r in [*made, *signed]:
        assert [p for p in patterns if p in r.content] == []


_SIGN_AFTER_RESTART = """
import sqlite3, sys
from services.custody.factory import open_custody_backend
from services.settings import load_settings
from pqc import Algorithm
from services.custody.backend import binding_for
settings = load_settings(data_dir=sys.argv[1])
conn = sqlite3.connect(settings.operational_db)
key_id, account, env, alg, ref = conn.execute(
    "SELECT id, account_id, environment, algorithm, key_ref FROM managed_keys"
).fetchone()
backend = open_custody_backend(settings)
print(backend.sign(Algorithm(alg), ref, binding_for(key_id, account, env, alg), b"after restart", b"").hex())
"""


def test_first_start_creates_its_own_token_and_a_restart_reuses_it(tmp_path):
    data_dir = tmp_path / "var"
    server = ServerProcess(data_dir, env={"SOFTHSM2_CONF": "", "QDAY_TRUSTED_PROXIES": "127.0.0.1"})
    try:
        key = _pro_tenant(server, "127.8.1.1")
        headers = {"Authorization": f"Bearer {key}", "X-Forwarded-For": "127.8.1.1"}
        made = httpx.post(
            f"{server.base_url}/v1/keys/generate",
            headers=headers,
            timeout=30,
            json={"algorithm": "ml-dsa-65", "chain": "bitcoin", "custody": "managed"},
        ).json()["data"]
        r = httpx.post(
            f"{server.base_url}/v1/sign/managed",
            headers=headers,
            timeout=30,
            json={"key_id": made["id"], "message": "c0ffee", "algorithm": "ml-dsa-65"},
        )
        assert r.status_code == 200, r.text
    finally:
        server.stop()
    layout = SoftHsmLayout(data_dir / "softhsm")
    for path in (layout.directory, layout.tokens, layout.conf, layout.user_pin, layout.so_pin):
        assert path.exists() and path.stat().st_mode & 0o077 == 0, path
    assert str(layout.tokens) in layout.conf.read_text() and len(list(layout.tokens.iterdir())) == 1
    # A new process (what a restart is to the token) opens the same token and wrapping key.
    done = subprocess.run(
        [sys.executable, "-c", _SIGN_AFTER_RESTART, str(data_dir)],
        cwd=REPO_ROOT,
        timeout=60,
        capture_output=True,
        text=True,
        env={**os.environ, "SOFTHSM2_CONF": ""},
    )
    assert done.returncode == 0, done.stderr
    pqc.verify("ml-dsa-65", bytes.fromhex(made["publicKey"]), b"after restart", bytes.fromhex(done.stdout.strip()))
    assert len(list(layout.tokens.iterdir())) == 1
