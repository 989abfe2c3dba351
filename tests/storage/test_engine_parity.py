"""Repositories that behave the same on both engines (the ``database`` fixture): what a
write reports, errors in the store's terms, SQL text that differs between the drivers'
parameter styles, managed keys with their chained audit log, attestations, scan results,
scan leases and the watch-list export."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from chains.environment import Environment
from storage.database import Database, Tx
from storage.errors import ConstraintViolation
from storage.models import (
    Account,
    Attestation,
    AttestationChallenge,
    KeyOrigin,
    KeyScanResult,
    ManagedKey,
    ManagedKeyEvent,
    ManagedKeyState,
    ManagedKeyUsage,
    Plan,
    PqKey,
    ScanLease,
    ScanResult,
    WatchedAddress,
)
from storage.sql_accounts import SqlStore
from storage.sql_attestations import SqlAttestationStore
from storage.sql_managed_keys import SqlManagedKeyStore
from storage.sql_scans import WATCH_EXPORT_COLUMNS, SqlScanStore

NOW = datetime(2026, 11, 21, tzinfo=UTC)
_ACCOUNT_INSERT = (
    "INSERT INTO accounts (id, email, name, plan, password_hash, created_at) VALUES (?,?,NULL,'free','h',?)"
)


async def accounts(db: Database, *ids: str) -> None:
    """Create accounts ``ids`` (emails ``<id>@example.com``, free plan)."""
    store = SqlStore(db)
    for account_id in ids:
        await store.create_account(Account(account_id, f"{account_id}@example.com", None, Plan.FREE, NOW), "h")


def managed_key(n: int, account: str = "usr_1") -> ManagedKey:
    """An active managed key ``mk_<n>`` created at NOW."""
    return ManagedKey(
        f"mk_{n}",
        account,
        Environment.LIVE,
        "ml-dsa-44",
        "ethereum",
        bytes([n]) * 32,
        f"fp{n}",
        "embedded",
        "wrap_1",
        b"wrapped-seed-%d" % n,
        ManagedKeyState.ACTIVE,
        NOW,
    )


def key_event(
    event_id: str, key_id: str, kind: str, state: ManagedKeyState, at: datetime = NOW, account: str = "usr_1"
) -> ManagedKeyEvent:
    """An audit-log event of a managed key (its hashes are the store's to set)."""
    return ManagedKeyEvent(event_id, key_id, account, Environment.LIVE, kind, state, "api_key:key_1", None, at, "{}")


def _result(address: str, data_as_of: datetime, risk: int) -> ScanResult:
    return ScanResult(
        "usr_1", Environment.LIVE, "ethereum", address, "{}", risk, "W1", "v1", data_as_of, data_as_of, "pipeline"
    )


async def test_save_results_counts_the_rows_it_wrote(database):
    await accounts(database, "usr_1")
    store = SqlScanStore(database)
    assert await store.save_results([_result("0xa", NOW, 10), _result("0xb", NOW, 20)]) == 2
    later, earlier = NOW + timedelta(hours=1), NOW - timedelta(hours=1)
    # 0xa: newer chain data replaces; 0xb: older chain data (a slow run) is neither written nor counted
    assert await store.save_results([_result("0xa", later, 30), _result("0xb", earlier, 90)]) == 1
    assert await store.save_results([_result("0xa", later, 40)]) == 1  # the same data_as_of: a rescore replaces
    assert await store.save_results([]) == 0
    a = await store.latest_result("usr_1", Environment.LIVE, "ethereum", "0xa")
    b = await store.latest_result("usr_1", Environment.LIVE, "ethereum", "0xb")
    assert (a and a.risk_value, a and a.data_as_of) == (40, later)
    assert (b and b.risk_value, b and b.data_as_of) == (20, NOW)
    assert await store.latest_result("usr_1", Environment.TEST, "ethereum", "0xa") is None


async def test_key_scan_results_replace_the_stored_one(database):
    await accounts(database, "usr_1")
    store = SqlScanStore(database)
    first = KeyScanResult("usr_1", Environment.LIVE, "key:02ab", '{"risk": 1}', NOW, NOW)
    await store.save_key_result(first)
    assert await store.latest_key_result("usr_1", Environment.LIVE, "key:02ab") == first
    second = replace(first, result='{"risk": 2}', scanned_at=NOW + timedelta(minutes=1))
    await store.save_key_result(second)
    assert await store.latest_key_result("usr_1", Environment.LIVE, "key:02ab") == second
    assert await store.latest_key_result("usr_1", Environment.TEST, "key:02ab") is None


async def test_a_broken_constraint_is_constraint_violation_and_nothing_of_the_write_is_kept(database):
    async def duplicate(tx: Tx) -> None:
        await tx.execute(_ACCOUNT_INSERT, ("usr_1", "a@example.com", "t"))
        await tx.execute(_ACCOUNT_INSERT, ("usr_2", "a@example.com", "t"))

    async def duplicate_many(tx: Tx) -> None:
        await tx.execute_many(_ACCOUNT_INSERT, [("usr_3", "b@example.com", "t"), ("usr_3", "c@example.com", "t")])

    for operation in (duplicate, duplicate_many):
        with pytest.raises(ConstraintViolation):
            await database.write(operation)
    assert await database.fetch_all("SELECT id FROM accounts") == []


async def test_a_constraint_broken_by_a_statement_read_back_is_constraint_violation(database):
    """``UPDATE … RETURNING`` and ``INSERT … RETURNING`` run through ``Tx.fetch_one``
    (``SqlStore.set_plan``, managed keys' transitions): a constraint they break is the
    store's ``ConstraintViolation`` there too, not a driver's error."""
    await accounts(database, "usr_1")
    with pytest.raises(ConstraintViolation):
        await database.write(
            lambda tx: tx.fetch_one(_ACCOUNT_INSERT + " RETURNING id", ("usr_2", "usr_1@example.com", "t"))
        )
    with pytest.raises(ConstraintViolation):
        await database.write(lambda tx: tx.fetch_all("UPDATE accounts SET plan = 'gold' RETURNING id"))
    assert await database.fetch_all("SELECT id, plan FROM accounts") == [("usr_1", "free")]


async def test_percent_signs_and_question_marks_in_quoted_text_are_text(database):
    await accounts(database, "usr_1", "usr_2")
    rows = await database.fetch_all(
        "SELECT id, '100% sure?' FROM accounts WHERE email LIKE '%@example.com' AND id <> ? ORDER BY id", ("usr_2",)
    )
    assert rows == [("usr_1", "100% sure?")]
    assert await database.write(lambda tx: tx.fetch_one("SELECT 'it''s 5%, ok?', ?", (7,))) == ("it's 5%, ok?", 7)


async def test_managed_keys_live_destroy_and_chain_their_audit_log(database):
    await accounts(database, "usr_1")
    store = SqlManagedKeyStore(database)
    registration = PqKey(
        "pqk_1", "usr_1", Environment.LIVE, "ml-dsa-44", "ethereum", bytes([1]) * 32, "fp1", KeyOrigin.GENERATED, NOW
    )
    await store.create(managed_key(1), key_event("mke_1", "mk_1", "created", ManagedKeyState.ACTIVE), registration)
    await store.create(managed_key(2), key_event("mke_2", "mk_2", "created", ManagedKeyState.ACTIVE), None)
    assert await store.get("usr_1", Environment.LIVE, "mk_1") == managed_key(1)
    assert await store.get("usr_1", Environment.TEST, "mk_1") is None
    attestations = SqlAttestationStore(database)
    assert await attestations.pq_key_by_fingerprint("usr_1", Environment.LIVE, "ml-dsa-44", "fp1") == registration

    requested, due = NOW + timedelta(hours=1), NOW + timedelta(days=8)
    pending = ManagedKeyState.PENDING_DELETION
    scheduled = await store.schedule_deletion(
        "usr_1", Environment.LIVE, "mk_1", requested, due, key_event("mke_3", "mk_1", "deletion_scheduled", pending)
    )
    assert scheduled is not None and (scheduled.state, scheduled.deletion_scheduled_at) == (pending, due)
    again = key_event("mke_x", "mk_1", "deletion_scheduled", pending)
    assert await store.schedule_deletion("usr_1", Environment.LIVE, "mk_1", requested, due, again) is None
    active = ManagedKeyState.ACTIVE
    cancelled = await store.cancel_deletion(
        "usr_1", Environment.LIVE, "mk_1", key_event("mke_4", "mk_1", "deletion_cancelled", active)
    )
    assert cancelled is not None and cancelled.state is active and cancelled.deletion_scheduled_at is None
    await store.schedule_deletion(
        "usr_1", Environment.LIVE, "mk_1", requested, due, key_event("mke_5", "mk_1", "deletion_scheduled", pending)
    )
    assert await store.due_for_destruction(due - timedelta(seconds=1), 10) == []
    assert [k.id for k in await store.due_for_destruction(due, 10)] == ["mk_1"]
    destroyed_event = key_event("mke_6", "mk_1", "destroyed", ManagedKeyState.DESTROYED, due)
    assert await store.destroy("mk_1", due, destroyed_event)
    assert not await store.destroy("mk_1", due, replace(destroyed_event, id="mke_y"))  # once
    destroyed = await store.get("usr_1", Environment.LIVE, "mk_1")
    assert destroyed is not None and destroyed.key_ref is None and destroyed.destroyed_at == due
    await store.release_space()

    events = await store.events("usr_1", Environment.LIVE, "mk_1")
    assert [e.id for e in events] == ["mke_1", "mke_3", "mke_4", "mke_5", "mke_6"]
    assert [e.id for e in await store.events("usr_1", Environment.LIVE, "mk_1", "mke_3", 2)] == ["mke_4", "mke_5"]
    assert await store.events("usr_1", Environment.LIVE, "mk_1", "mke_2") == []  # another key's event
    assert events[0].prev_hash == bytes(32)
    assert await store.verify_event_chain("usr_1")


async def test_signatures_count_only_while_the_key_is_active(database):
    await accounts(database, "usr_1")
    store = SqlManagedKeyStore(database)
    for n in (1, 2):
        event = key_event(f"mke_{n}", f"mk_{n}", "created", ManagedKeyState.ACTIVE)
        await store.create(managed_key(n), event, None)
    pending = ManagedKeyState.PENDING_DELETION
    await store.schedule_deletion(
        "usr_1",
        Environment.LIVE,
        "mk_1",
        NOW,
        NOW + timedelta(days=8),
        key_event("mke_3", "mk_1", "deletion_scheduled", pending),
    )
    assert not await store.count_signature("mk_1", "2026-11")  # pending deletion: not counted
    for _ in range(3):
        assert await store.count_signature("mk_2", "2026-11")
    await store.uncount_signature("mk_2", "2026-11")  # a signing that failed
    assert await store.count_signature("mk_2", "2026-12")
    usage = await store.usage("usr_1", Environment.LIVE, "2026-11", NOW, NOW + timedelta(days=30))
    assert usage == [
        ManagedKeyUsage("mk_1", "ml-dsa-44", pending, 0),
        ManagedKeyUsage("mk_2", "ml-dsa-44", ManagedKeyState.ACTIVE, 2),
    ]


async def test_reclaim_gives_back_the_space_of_erased_rows(database):
    await database.reclaim("managed_keys")


async def test_attestations_consume_their_challenge_once(database):
    await accounts(database, "usr_1")
    store = SqlAttestationStore(database)
    key = PqKey("pqk_1", "usr_1", Environment.LIVE, "ml-dsa-44", "ethereum", b"\x01", "fp", KeyOrigin.REGISTERED, NOW)
    assert await store.add_pq_key(key) == key
    assert await store.add_pq_key(replace(key, id="pqk_2", created_at=NOW + timedelta(seconds=1))) == key
    other = replace(key, id="pqk_3", fingerprint="fp3", created_at=NOW + timedelta(seconds=2))
    assert await store.add_pq_key(other) == other
    assert await store.list_pq_keys("usr_1", Environment.LIVE) == [key, other]
    assert await store.list_pq_keys("usr_1", Environment.LIVE, (key.created_at, key.id), 1) == [other]
    assert await store.list_pq_keys("usr_1", Environment.TEST) == []

    statement = "I, usr_1, attest"
    digest = hashlib.sha256(statement.encode()).digest()
    challenge = AttestationChallenge(
        "atc_1", "usr_1", Environment.LIVE, statement, digest, NOW + timedelta(minutes=5), NOW
    )
    await store.add_challenge(challenge)
    assert await store.challenge_by_statement("usr_1", Environment.LIVE, digest) == challenge
    assert await store.challenge_by_statement("usr_1", Environment.TEST, digest) is None
    attestation = Attestation(
        "att_1", "usr_1", Environment.LIVE, "pqk_1", b"message", b"\x02" * 33, "02ab", "ecdsa-secp256k1",
        b"sig", hashlib.sha256(b"sig").digest(), b"\x01", "ml-dsa-44", b"", b"pq-sig",
        hashlib.sha256(b"pq-sig").digest(), "ethereum", "{}", "atc_1", NOW + timedelta(minutes=1),
    )  # fmt: skip
    used_at = NOW + timedelta(minutes=1)
    assert await store.add_attestation(attestation, used_at)
    assert not await store.add_attestation(replace(attestation, id="att_2"), used_at)  # the challenge is used
    stored = await store.challenge_by_statement("usr_1", Environment.LIVE, digest)
    assert stored is not None and stored.used_at == used_at
    assert await store.get_attestation("usr_1", Environment.LIVE, "att_1") == attestation
    assert await store.get_attestation("usr_1", Environment.LIVE, "att_2") is None
    assert await store.get_attestation("usr_1", Environment.TEST, "att_1") is None

    late = replace(challenge, id="atc_2", statement_hash=hashlib.sha256(b"late").digest())
    await store.add_challenge(late)
    assert not await store.add_attestation(
        replace(attestation, id="att_3", challenge_id="atc_2"), NOW + timedelta(hours=1)
    )
    assert await store.add_attestation(replace(attestation, id="att_4", challenge_id=None), NOW)  # no challenge


async def test_a_scan_lease_is_held_until_it_expires_or_is_released(database):
    store = SqlScanStore(database)
    ttl = timedelta(minutes=1)
    assert await store.take_lease("scan:0xa", "node_a", NOW, ttl) is None  # taken now
    later = NOW + timedelta(seconds=1)
    assert await store.take_lease("scan:0xa", "node_a", later, ttl) is None  # its own already
    held = ScanLease("scan:0xa", "node_a", later, later + ttl)
    assert await store.lease("scan:0xa") == held  # renewed by asking again (the alert follower's heartbeat)
    assert await store.take_lease("scan:0xa", "node_b", NOW + timedelta(seconds=30), ttl) == held
    assert await store.take_lease("scan:0xa", "node_b", NOW + ttl, ttl) == held  # not expired yet
    assert await store.take_lease("scan:0xa", "node_b", later + ttl, ttl) is None  # expired: taken over
    lease = await store.lease("scan:0xa")
    assert lease is not None and lease.holder == "node_b"
    await store.release_lease("scan:0xa", "node_a")  # not node_a's any more: nothing
    assert await store.lease("scan:0xa") == lease
    await store.release_lease("scan:0xa", "node_b")
    assert await store.lease("scan:0xa") is None


async def test_a_chains_watch_list_exports_in_order_a_chunk_at_a_time(database):
    await accounts(database, "usr_1", "usr_2")
    store = SqlScanStore(database)
    addresses = ["0xB", "0xa", "0x_", "0xA", "0xb"]
    for n, address in enumerate(addresses):
        for account, environment in (("usr_2", Environment.LIVE), ("usr_1", Environment.TEST)):
            entry = WatchedAddress(f"wat_{account}_{n}", account, environment, "ethereum", address, None, NOW)
            await store.watch(entry)
    await store.watch(WatchedAddress("wat_btc", "usr_1", Environment.LIVE, "bitcoin", "bc1q", None, NOW))
    chunks = [chunk async for chunk in store.export_watchlist("ethereum", chunk=4)]
    assert [len(chunk) for chunk in chunks] == [4, 4, 2]
    rows = [tuple(row) for chunk in chunks for row in chunk]
    assert len(rows[0]) == len(WATCH_EXPORT_COLUMNS)
    # (environment, address, account) in byte order on both engines, whatever the server's collation
    order = [(row[2], row[4], row[1]) for row in rows]
    assert order == sorted(order, key=lambda key: tuple(part.encode() for part in key))
    assert {row[3] for row in rows} == {"ethereum"}
    assert rows[0] == ("wat_usr_2_3", "usr_2", "live", "ethereum", "0xA", None, "2026-11-21T00:00:00.000000+00:00")
