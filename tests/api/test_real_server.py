"""The API over real HTTP: `qday serve` in a subprocess with two worker processes.

Covers what the in-process client cannot: limits shared by workers under
concurrency, the admin CLI changing a running server's plans, and what ends up
on disk and in the logs.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable

import httpx
import pytest

from tests.support import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow
_ip_numbers = iter(range(1, 250))
#: The server's rate-limit window: an hour, so a burst almost never straddles two windows
#: (and when one does, ``_in_one_window`` repeats it at the start of the next one).
WINDOW_SECONDS = 3600


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Two workers; 127.0.0.1 is a trusted proxy so each test can act from its own
    X-Forwarded-For address (a header value only: no traffic leaves loopback)."""
    proc = ServerProcess(
        tmp_path_factory.mktemp("real-server"),
        workers=2,
        env={"QDAY_TRUSTED_PROXIES": "127.0.0.1", "QDAY_RATE_WINDOW_SECONDS": str(WINDOW_SECONDS)},
    )
    yield proc
    proc.stop()


def _as_ip() -> dict[str, str]:
    return {"X-Forwarded-For": f"127.9.0.{next(_ip_numbers)}"}


def _in_one_window(burst: Callable[[], list[httpx.Response]]) -> list[httpx.Response]:
    """The responses of a burst (from a fresh address each time) all counted in one window.

    A window turned over mid-burst when the responses disagree on ``X-RateLimit-Reset``; the
    burst is then run once more, which starts right after that turn, with a whole window
    ahead of it: no waiting on the wall clock."""
    responses = burst()
    if len({r.headers["x-ratelimit-reset"] for r in responses}) > 1:
        responses = burst()
    assert len({r.headers["x-ratelimit-reset"] for r in responses}) == 1
    return responses


def _assert_counted_exactly(responses: list[httpx.Response], allowed: int, limit: int, allowed_status: int) -> None:
    """``allowed`` requests passed, each seeing its own count (no count lost or doubled between
    workers), and every refusal is a 429 with headers and a Retry-After within the window."""
    statuses = [r.status_code for r in responses]
    assert statuses.count(allowed_status) == allowed
    assert statuses.count(429) == len(responses) - allowed
    passed = [r for r in responses if r.status_code == allowed_status]
    assert sorted(int(r.headers["x-ratelimit-remaining"]) for r in passed) == list(range(limit - allowed, limit))
    reset = int(responses[0].headers["x-ratelimit-reset"])
    assert reset % WINDOW_SECONDS == 0
    for r in responses:
        assert r.headers["x-ratelimit-limit"] == str(limit)
        if r.status_code == 429:
            assert r.json()["error"]["code"] == "RATE_001"
            assert r.headers["x-ratelimit-remaining"] == "0"
            retry_after = int(r.headers["retry-after"])
            assert 1 <= retry_after <= WINDOW_SECONDS
            assert abs(reset - time.time() - retry_after) < 60  # the seconds left in the window


def _tenant(base: str, headers: dict[str, str]) -> tuple[str, str, str]:
    email = f"real{time.monotonic_ns()}@example.com"
    password = "correct horse battery staple"
    with httpx.Client(base_url=base, headers=headers, timeout=30) as c:
        assert c.post("/v1/auth/register", json={"email": email, "password": password}).status_code == 201
        session = c.post("/v1/auth/login", json={"email": email, "password": password}).json()["data"]["token"]
        key = c.post(
            "/v1/auth/api-keys",
            json={"name": "k", "type": "secret", "environment": "live"},
            headers={"Authorization": f"Bearer {session}"},
        ).json()["data"]["key"]
    return email, password, key


async def _burst(base: str, n: int, method: str, path: str, headers: dict[str, str], json=None) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=n)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as c:
        return list(await asyncio.gather(*(c.request(method, path, headers=headers, json=json) for _ in range(n))))


def test_exactly_the_ip_limit_succeeds_under_concurrency(server):
    def burst() -> list[httpx.Response]:
        body = {"email": "nobody@example.com", "password": "x" * 12}
        return asyncio.run(_burst(server.base_url, 30, "POST", "/v1/auth/login", _as_ip(), json=body))

    _assert_counted_exactly(_in_one_window(burst), allowed=10, limit=10, allowed_status=401)


def test_exactly_the_key_limit_succeeds_under_concurrency(server):
    def burst() -> list[httpx.Response]:
        ip = _as_ip()
        _, _, key = _tenant(server.base_url, ip)
        headers = {**ip, "Authorization": f"Bearer {key}"}
        return asyncio.run(_burst(server.base_url, 100, "GET", "/v1/auth/api-keys", headers))

    _assert_counted_exactly(_in_one_window(burst), allowed=60, limit=60, allowed_status=200)


def test_admin_set_plan_takes_effect_on_a_running_server(server):
    ip = _as_ip()
    email, _, key = _tenant(server.base_url, ip)
    headers = {**ip, "Authorization": f"Bearer {key}"}
    assert httpx.get(f"{server.base_url}/v1/auth/api-keys", headers=headers).headers["x-ratelimit-limit"] == "60"
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "admin", "set-plan", email, "builder", "--data-dir", str(server.data_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "builder" in done.stdout
    assert httpx.get(f"{server.base_url}/v1/auth/api-keys", headers=headers).headers["x-ratelimit-limit"] == "300"


def test_admin_set_plan_unknown_email_fails_cleanly(server):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "admin",
            "set-plan",
            "ghost@example.com",
            "pro",
            "--data-dir",
            str(server.data_dir),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "no account" in done.stderr


def test_oversized_body_over_real_http(server):
    r = httpx.post(
        f"{server.base_url}/v1/auth/register",
        content=b"x" * 200_000,
        headers={**_as_ip(), "content-type": "application/json"},
    )
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "REQ_004"


def test_keys_and_passwords_never_reach_disk_or_logs(server):
    email, password, key = _tenant(server.base_url, _as_ip())
    httpx.get(f"{server.base_url}/v1/auth/api-keys", headers={**_as_ip(), "Authorization": f"Bearer {key}"})
    secret_part = key.rsplit("_", 1)[1]
    for path in server.data_dir.rglob("*"):
        if path.is_file() and path.name != "master.key":
            content = path.read_bytes()
            assert secret_part.encode() not in content, path
            assert password.encode() not in content, path
    # The master secret is owner-only.
    assert (server.data_dir / "secrets" / "master.key").stat().st_mode & 0o077 == 0


def test_generated_private_keys_never_reach_disk_or_logs(server):
    ip = _as_ip()
    _, _, key = _tenant(server.base_url, ip)
    headers = {**ip, "Authorization": f"Bearer {key}"}
    secrets = []
    for algorithm in ("ml-dsa-44", "ml-dsa-65", "slh-dsa-128s"):
        r = httpx.post(
            f"{server.base_url}/v1/keys/generate",
            json={"algorithm": algorithm, "chain": "ethereum"},
            headers=headers,
            timeout=30,
        )
        assert r.status_code == 201, r.text
        data = r.json()["data"]
        private = bytes.fromhex(data["privateKey"])
        # Secret-only parts: ML-DSA's K (bytes 32-64; rho before it is public), SLH-DSA's SK.seed.
        secret_part = private[32:64] if algorithm.startswith("ml-dsa") else private[:32]
        secrets += [bytes.fromhex(data["seed"]), secret_part, data["seed"].encode(), secret_part.hex().encode()]
    for path in server.data_dir.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            for secret in secrets:
                assert secret not in content, path
