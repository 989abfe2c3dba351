"""One watch-list entry looked up by its address, on either engine: what the dashboard's
detail page of an address asks to know whether (and since when, under which label) the tenant
watches it. The unique key (account, environment, chain, address) makes it one index read."""

from __future__ import annotations

from chains.environment import Environment
from storage.database import Database
from storage.models import WatchedAddress
from storage.sql import dt


class SqlAddressDetail:
    """Watch-list reads by address for one tenant and environment."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def watched(
        self, account_id: str, environment: Environment, chain: str, address: str
    ) -> WatchedAddress | None:
        """The tenant's entry for the address in the environment (None: not watched there)."""
        row = await self._db.fetch_one(
            "SELECT id, label, created_at FROM watchlist WHERE account_id = ? AND environment = ? AND chain = ?"
            " AND address = ?",
            (account_id, environment.value, chain, address),
        )
        if row is None:
            return None
        return WatchedAddress(row[0], account_id, environment, chain, address, row[1], dt(row[2]))
