"""What the chain-head follower keeps (migration 0013, ``alert_state``): the last seen key
exposure and balance of each watched address, updated with the events a change raises in
one transaction (``storage.sql_webhooks.add_event``), so no change is stored without its
alert, nor an alert sent for a change not stored."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chains.environment import Environment
from storage.database import Database, Tx
from storage.sql import dt, ts
from storage.sql_webhooks import add_event
from storage.webhook_records import EventType, OutboxEvent


@dataclass(frozen=True, slots=True)
class AlertState:
    """A watched address as last seen by the tenant watching it: key on chain or not (with
    the evidence), balance in base units, at which block of its chain, and when."""

    account_id: str
    chain: str
    address: str
    exposed: bool
    balance: int
    evidence: tuple[dict[str, Any], ...]
    block_height: int
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Watcher:
    """One tenant watching one address (an entry of the watch list)."""

    account_id: str
    chain: str
    address: str


class SqlAlertStateStore:
    """The follower's view of watched addresses on an operational database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def any_watched(self, environment: Environment, chains: Sequence[str]) -> bool:
        """Whether anybody watches an address of ``environment`` on ``chains`` (one index
        probe: what an idle node asks every poll instead of reading the watch list)."""
        if not chains:
            return False
        row = await self._db.fetch_one(
            f"SELECT 1 FROM watchlist WHERE chain IN ({', '.join('?' * len(chains))}) AND environment = ? LIMIT 1",
            (*chains, environment.value),
        )
        return row is not None

    async def listening(self, environment: Environment, event_type: EventType) -> set[str]:
        """The accounts of ``environment`` with an enabled webhook endpoint subscribed to
        ``event_type`` (work only they would hear of is skipped for the others)."""
        rows = await self._db.fetch_all(
            "SELECT account_id, events FROM webhooks WHERE environment = ? AND disabled_at IS NULL",
            (environment.value,),
        )
        return {account_id for account_id, events in rows if event_type.value in json.loads(events)}

    async def watchers(self, environment: Environment, chains: Sequence[str]) -> list[Watcher]:
        """Every watch-list entry of ``environment`` on ``chains``, all tenants."""
        if not chains:
            return []
        rows = await self._db.fetch_all(
            "SELECT account_id, chain, address FROM watchlist WHERE environment = ?"
            f" AND chain IN ({', '.join('?' * len(chains))}) ORDER BY chain, address, account_id",
            (environment.value, *chains),
        )
        return [Watcher(*row) for row in rows]

    async def states(self, environment: Environment) -> dict[tuple[str, str, str], AlertState]:
        """The last seen state of every watched address of ``environment`` by (account,
        chain, address)."""
        rows = await self._db.fetch_all(
            "SELECT account_id, chain, address, exposed, balance, evidence, block_height, updated_at FROM alert_state"
            " WHERE environment = ?",
            (environment.value,),
        )
        return {
            (r[0], r[1], r[2]): AlertState(
                r[0], r[1], r[2], bool(r[3]), int(r[4]), tuple(json.loads(r[5] or "[]")), int(r[6]), dt(r[7])
            )
            for r in rows
        }

    async def record(
        self, environment: Environment, states: Sequence[AlertState], events: Sequence[OutboxEvent]
    ) -> int:
        """Store ``states`` (new or changed) and put ``events`` in the webhook outbox, in one
        transaction; the deliveries made."""

        async def record(tx: Tx) -> int:
            if states:
                await self._upsert(tx, environment, states)
            deliveries = 0
            for event in events:
                deliveries += len(await add_event(tx, event))
            return deliveries

        return await self._db.write(record)

    @staticmethod
    async def _upsert(tx: Tx, environment: Environment, states: Sequence[AlertState]) -> None:
        await tx.execute_many(
            "INSERT INTO alert_state (account_id, environment, chain, address, exposed, balance, evidence,"
            " block_height, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (account_id, environment, chain, address) DO UPDATE SET"
            " exposed = excluded.exposed, balance = excluded.balance, evidence = excluded.evidence,"
            " block_height = excluded.block_height, updated_at = excluded.updated_at",
            [
                (
                    s.account_id,
                    environment.value,
                    s.chain,
                    s.address,
                    int(s.exposed),
                    str(s.balance),
                    json.dumps(list(s.evidence)),
                    s.block_height,
                    ts(s.updated_at),
                )
                for s in states
            ],
        )
