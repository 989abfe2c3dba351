"""No password, API key, session token or private key ever reaches the logs or the data
directory: one real server at DEBUG with its access log on, a full round of traffic, then
every file under the data directory (SQLite database, -wal and -shm files, the server log,
SoftHSM2 token files, any Parquet) is searched for each secret, raw and in hex and base64.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time

import httpx
import pytest

from tests.custody.support import (
    files_containing,
    managed_seeds,
    requires_softhsm,
    secret_patterns,
    shared_softhsm_conf,
)
from tests.security.support import PASSWORD, create_api_key, register_and_login
from tests.support import REPO_ROOT

pytestmark = pytest.mark.slow


def _encodings(secret: bytes) -> list[bytes]:
    return [
        secret,
        secret.hex().encode(),
        secret.hex().upper().encode(),
        base64.b64encode(secret),
        base64.urlsafe_b64encode(secret).rstrip(b"="),
    ]


def _text_secret(value: str) -> list[bytes]:
    return [value.encode(), base64.b64encode(value.encode())]


def _api_key_patterns(key: str) -> list[bytes]:
    """The whole key string and its random part (what would identify it in a dump)."""
    return _text_secret(key) + [key.rsplit("_", 1)[1].encode()]


def _self_custody_patterns(data: dict) -> list[bytes]:
    decode = bytes.fromhex if data["format"] == "hex" else base64.b64decode
    private, seed = decode(data["privateKey"]), decode(data["seed"])
    # Secret-only parts: ML-DSA's K (bytes 32-64; rho before it is public), SLH-DSA's SK.seed.
    secret_part = private[32:64] if data["algorithm"].startswith("ml-dsa") else private[:32]
    return [*_encodings(seed), *_encodings(secret_part), data["privateKey"].encode()]


def _managed_patterns(server, email: str, key: str) -> list[bytes]:
    """Make the account Pro (`qday admin set-plan`), create and use two managed keys, and return
    the patterns of their seeds and derived secrets."""
    from services.custody.softhsm import open_softhsm

    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "admin", "set-plan", email, "pro", "--data-dir", str(server.data_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    headers = {"X-API-Key": key}
    algorithms = {}
    for algorithm in ("ml-dsa-44", "ml-dsa-65"):
        r = httpx.post(
            f"{server.base_url}/v1/keys/generate",
            headers=headers,
            timeout=60,
            json={"algorithm": algorithm, "chain": "ethereum", "custody": "managed"},
        )
        assert r.status_code == 201, r.text
        key_id = r.json()["data"]["id"]
        algorithms[key_id] = algorithm
        r = httpx.post(
            f"{server.base_url}/v1/sign/managed",
            headers=headers,
            timeout=60,
            json={"key_id": key_id, "message": "c0ffee", "algorithm": algorithm},
        )
        assert r.status_code == 200, r.text
    backend = open_softhsm(shared_softhsm_conf())
    try:
        seeds = managed_seeds(server.data_dir / "qday.sqlite", backend._unwrap)
    finally:
        backend.close()
    assert set(algorithms) <= set(seeds)
    return [p for key_id, algorithm in algorithms.items() for p in secret_patterns(seeds[key_id], algorithm)]


def test_no_secret_reaches_the_logs_or_the_data_directory(hostile_server):
    server = hostile_server
    email = f"secrets-{time.monotonic_ns()}@example.com"
    session = register_and_login(server.base_url, email)
    secret = create_api_key(server.base_url, session)
    publishable = create_api_key(server.base_url, session, "publishable", "test")
    rotated = httpx.post(
        f"{server.base_url}/v1/auth/api-keys/{secret['id']}/rotate",
        headers={"Authorization": f"Bearer {session}"},
        timeout=60,
    )
    assert rotated.status_code == 201, rotated.text
    new_key = rotated.json()["data"]["key"]
    headers = {"Authorization": f"Bearer {new_key}"}
    assert httpx.get(f"{server.base_url}/v1/auth/api-keys", headers={"X-API-Key": secret["key"]}).status_code == 200
    patterns = [*_text_secret(PASSWORD), *_text_secret(session.rsplit(".", 1)[1])]
    for key in (secret["key"], publishable["key"], new_key):
        patterns += _api_key_patterns(key)
    for algorithm, fmt in (("ml-dsa-44", "hex"), ("ml-dsa-65", "base64"), ("slh-dsa-128s", "hex")):
        r = httpx.post(
            f"{server.base_url}/v1/keys/generate",
            headers=headers,
            timeout=60,
            json={"algorithm": algorithm, "chain": "ethereum", "format": fmt},
        )
        assert r.status_code == 201, r.text
        patterns += _self_custody_patterns(r.json()["data"])
    log = (server.data_dir / "server.log").read_text(errors="replace")
    assert "/v1/auth/login" in log and "/v1/keys/generate" in log  # the access log did record the traffic
    stored = {p.name for p in server.data_dir.glob("qday.sqlite*")}
    assert {"qday.sqlite", "qday.sqlite-wal", "qday.sqlite-shm"} <= stored, stored  # the WAL is searched too
    assert files_containing(server.data_dir, [email.encode()])  # the search does see what is stored
    assert files_containing(server.data_dir, patterns) == []


@requires_softhsm
def test_no_managed_seed_reaches_the_logs_or_the_data_directory(hostile_server):
    email = f"secrets-managed-{time.monotonic_ns()}@example.com"
    key = create_api_key(hostile_server.base_url, register_and_login(hostile_server.base_url, email))["key"]
    patterns = _managed_patterns(hostile_server, email, key)
    assert files_containing(hostile_server.data_dir, patterns) == []
