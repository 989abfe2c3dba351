"""Fixtures of the dashboard's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from core.ids import new_id
from tests.dashboard.support import PASSWORD, browser


@pytest.fixture
async def signed_in(app: Any) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A browser logged in to a new account; its email."""
    async with browser(app) as b:
        email = f"{new_id('dash')}@example.com"
        r = await b.post("/register", data={"email": email, "password": PASSWORD})
        assert r.status_code == 303 and r.headers["location"] == "/portfolio", r.text
        yield b, email
