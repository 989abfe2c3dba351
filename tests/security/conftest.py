"""Fixtures of the security tests: the session's in-process app (tests/api's set-up) and one
real ``qday serve`` shared by the tests that need real HTTP, real argon2 and real logs."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.api.conftest import app, client, clock, tenant  # noqa: F401  (re-exported fixtures)
from tests.custody.support import shared_softhsm_conf
from tests.support import ServerProcess

PASSWORD = "hostile-tests correct horse"


@pytest.fixture(scope="session")
def hostile_server(tmp_path_factory) -> Iterator[ServerProcess]:
    """One worker, production argon2 parameters, DEBUG logging and access log on (so the log
    has the most to leak), limits scaled up so that fuzzing and timing reach the handlers;
    managed custody on the process's throw-away SoftHSM2 token when SoftHSM2 is installed."""
    shared_softhsm_conf()
    proc = ServerProcess(
        tmp_path_factory.mktemp("hostile-server"),
        env={"QDAY_RATE_LIMIT_MULTIPLIER": "1000", "QDAY_LOG_LEVEL": "DEBUG", "QDAY_ACCESS_LOG": "true"},
    )
    yield proc
    proc.stop()


def register_and_login(base_url: str, email: str, password: str = PASSWORD) -> str:
    """Register an account on a real server and return a session token."""
    with httpx.Client(base_url=base_url, timeout=60) as c:
        r = c.post("/v1/auth/register", json={"email": email, "password": password})
        assert r.status_code == 201, r.text
        r = c.post("/v1/auth/login", json={"email": email, "password": password})
        assert r.status_code == 200, r.text
        return r.json()["data"]["token"]


def create_api_key(base_url: str, session: str, key_type: str = "secret", environment: str = "live") -> dict:
    """A new API key's creation data (full key string included)."""
    r = httpx.post(
        f"{base_url}/v1/auth/api-keys",
        json={"name": f"{key_type}-{environment}", "type": key_type, "environment": environment},
        headers={"Authorization": f"Bearer {session}"},
        timeout=60,
    )
    assert r.status_code == 201, r.text
    return r.json()["data"]
