"""Models of the service's own endpoints (health, readiness)."""

from __future__ import annotations

from typing import Literal

import msgspec


class HealthOut(msgspec.Struct, rename="camel", kw_only=True):
    """Liveness and the versions a client may want to log."""

    status: Literal["ok"]
    version: str
    api_version: Literal["v1"]


class ReadyOut(msgspec.Struct, rename="camel", kw_only=True):
    """A node ready for traffic: its operational store's engine and how long a read and an
    empty write transaction took (milliseconds)."""

    status: Literal["ready"]
    engine: Literal["sqlite", "postgresql"]
    read_ms: float
    write_ms: float
