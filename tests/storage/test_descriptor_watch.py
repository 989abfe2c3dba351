"""Watched wallets on both engines (migration 0010): their derived addresses count against the
same per-account watch cap as watched addresses, kept by triggers on add, rescan and removal."""

from __future__ import annotations

from datetime import UTC, datetime

from chains.environment import Environment
from storage.models import Plan, WatchedDescriptor
from storage.sql_scans import SqlScanStore
from tests.storage.test_pages_and_caps import NOW, _accounts, _entry


def _wallet(n: int, derived: int, account: str = "usr_1") -> WatchedDescriptor:
    return WatchedDescriptor(
        f"wdw_{n}", account, Environment.LIVE, f"wpkh(key{n}/<0;1>/*)#checksum", None, 20, derived, None, None, NOW
    )


async def test_wallets_share_the_watch_cap_with_addresses(database) -> None:
    await _accounts(database, "usr_1", "usr_2")
    scans = SqlScanStore(database)
    wallets = scans.descriptor_watch()
    for n in range(10):
        assert await scans.watch(_entry(n), cap=100) is not None
    assert await wallets.add(_wallet(1, 91), cap=100) is None  # 10 + 91 > 100: refused, nothing stored
    assert await wallets.add(_wallet(1, 40), cap=100) is not None
    same = await wallets.add(
        WatchedDescriptor("wdw_x", "usr_1", Environment.LIVE, _wallet(1, 0).descriptor, None, 20, 99, None, None, NOW),
        cap=100,
    )
    assert same is not None and same.id == "wdw_1"  # already watched: answered as stored, never recounted
    assert await scans.watch_count("usr_1") == 50
    assert await wallets.add(_wallet(2, 50), cap=100) is not None  # exactly the cap
    assert await scans.watch(_entry(50), cap=100) is None  # the addresses' cap sees the wallets
    assert await wallets.count_besides(_wallet(2, 0)) == 50
    assert await wallets.rescanned("wdw_2", 30, '{"usedAddresses": 1}', datetime(2026, 11, 22, tzinfo=UTC))
    assert await scans.watch_count("usr_1") == 80
    assert await wallets.remove("usr_1", Environment.LIVE, "wdw_1")
    assert not await wallets.remove("usr_2", Environment.LIVE, "wdw_2")  # not usr_2's
    assert await scans.watch_count("usr_1") == 40
    assert not await wallets.rescanned("wdw_1", 5, "{}", NOW)  # removed meanwhile

    ((entry, plan),) = await wallets.everyone()
    assert (entry.id, entry.derived_addresses, entry.summary, plan) == ("wdw_2", 30, '{"usedAddresses": 1}', Plan.FREE)
    assert entry.scanned_at == datetime(2026, 11, 22, tzinfo=UTC)
    assert [w.id for w in await wallets.page("usr_1", Environment.LIVE)] == ["wdw_2"]
    assert await wallets.find("usr_1", Environment.LIVE, entry.descriptor) == entry
    assert await wallets.find("usr_1", Environment.TEST, entry.descriptor) is None


async def test_wallets_page_by_keyset(database) -> None:
    await _accounts(database, "usr_1")
    wallets = SqlScanStore(database).descriptor_watch()
    for n in (3, 1, 2, 0):
        assert await wallets.add(_wallet(n, 1), cap=100) is not None
    first = await wallets.page("usr_1", Environment.LIVE, limit=3)
    assert [w.id for w in first] == ["wdw_0", "wdw_1", "wdw_2"]
    rest = await wallets.page("usr_1", Environment.LIVE, (first[-1].created_at, first[-1].id), 3)
    assert [w.id for w in rest] == ["wdw_3"]
    assert await wallets.page("usr_1", Environment.TEST) == []
