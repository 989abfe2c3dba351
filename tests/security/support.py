"""Helpers of the security tests: accounts and API keys on a real server."""

from __future__ import annotations

import httpx

PASSWORD = "hostile-tests correct horse"


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
