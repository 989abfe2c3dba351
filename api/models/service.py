"""Models of the service's own endpoints (health)."""

from __future__ import annotations

from typing import Literal

import msgspec


class HealthOut(msgspec.Struct, rename="camel", kw_only=True):
    """Liveness and the versions a client may want to log."""

    status: Literal["ok"]
    version: str
    api_version: Literal["v1"]
