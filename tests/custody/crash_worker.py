"""Creates managed keys in a loop until killed (``test_crash_during_creation``).

Usage: python -m tests.custody.crash_worker DB_PATH ACCOUNT_ID
Prints one line per committed key; the test SIGKILLs it at random moments.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from chains.environment import Environment
from core.clock import SystemClock
from services.accounts import Principal
from services.custody.lifecycle import ManagedCustodyService
from storage.models import Account, Plan
from storage.sql_managed_keys import SqlManagedKeyStore
from storage.sqlite_engine import SqliteDatabase
from tests.custody.support import shared_softhsm_conf


async def main(db_path: Path, account_id: str) -> None:
    from services.custody.softhsm import open_softhsm

    db = SqliteDatabase(db_path)
    service = ManagedCustodyService(SqlManagedKeyStore(db), open_softhsm(shared_softhsm_conf()), SystemClock())
    account = Account(account_id, f"{account_id}@example.com", None, Plan.PRO, datetime(2026, 1, 1, tzinfo=UTC))
    principal = Principal(account, "secret", "key_crash", Environment.LIVE)
    print("ready", flush=True)
    while True:
        key = await service.create(principal, "ml-dsa-44", "ethereum")
        print(key.id, flush=True)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
