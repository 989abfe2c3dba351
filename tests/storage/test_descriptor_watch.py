"""Watched wallets on SQLite (migration 0010): their derived addresses count against the same
per-account watch cap as watched addresses, kept by triggers on add, rescan and removal."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from chains.environment import Environment
from storage.models import Plan, WatchedDescriptor
from storage.scans_sqlite import SqliteScanStore
from storage.sqlite_db import open_database
from tests.storage.test_pages_and_caps import NOW, _accounts, _entry


def _wallet(n: int, derived: int, account: str = "usr_1") -> WatchedDescriptor:
    return WatchedDescriptor(
        f"wdw_{n}", account, Environment.LIVE, f"wpkh(key{n}/<0;1>/*)#checksum", None, 20, derived, None, None, NOW
    )


def test_wallets_share_the_watch_cap_with_addresses(tmp_path) -> None:
    conn = open_database(tmp_path / "db.sqlite")
    _accounts(conn, "usr_1", "usr_2")
    scans = SqliteScanStore(conn)
    wallets = scans.descriptor_watch()

    async def run() -> None:
        for n in range(10):
            assert await scans.watch(_entry(n), cap=100) is not None
        assert await wallets.add(_wallet(1, 91), cap=100) is None  # 10 + 91 > 100: refused, nothing stored
        assert await wallets.add(_wallet(1, 40), cap=100) is not None
        same = await wallets.add(
            WatchedDescriptor(
                "wdw_x", "usr_1", Environment.LIVE, _wallet(1, 0).descriptor, None, 20, 99, None, None, NOW
            ),
            cap=100,
        )
        assert same is not None and same.id == "wdw_1"  # already watched: answered as stored, never recounted
        assert scans.watch_count("usr_1") == 50
        assert await wallets.add(_wallet(2, 50), cap=100) is not None  # exactly the cap
        assert await scans.watch(_entry(50), cap=100) is None  # the addresses' cap sees the wallets
        assert wallets.count_besides(_wallet(2, 0)) == 50
        assert await wallets.rescanned("wdw_2", 30, '{"usedAddresses": 1}', datetime(2026, 11, 22, tzinfo=UTC))
        assert scans.watch_count("usr_1") == 80
        assert await wallets.remove("usr_1", Environment.LIVE, "wdw_1")
        assert not await wallets.remove("usr_2", Environment.LIVE, "wdw_2")  # not usr_2's
        assert scans.watch_count("usr_1") == 40
        assert not await wallets.rescanned("wdw_1", 5, "{}", NOW)  # removed meanwhile

    asyncio.run(run())
    ((entry, plan),) = wallets.everyone()
    assert (entry.id, entry.derived_addresses, entry.summary, plan) == ("wdw_2", 30, '{"usedAddresses": 1}', Plan.FREE)
    assert entry.scanned_at == datetime(2026, 11, 22, tzinfo=UTC)
    assert [w.id for w in wallets.page("usr_1", Environment.LIVE)] == ["wdw_2"]
    assert wallets.find("usr_1", Environment.LIVE, entry.descriptor) == entry
    assert wallets.find("usr_1", Environment.TEST, entry.descriptor) is None
