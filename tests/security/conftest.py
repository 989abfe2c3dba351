"""Fixtures of the security tests: the session's in-process app (tests/api's set-up)."""

from __future__ import annotations

from tests.api.conftest import app, client, clock, tenant  # noqa: F401  (re-exported fixtures)
