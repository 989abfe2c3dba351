"""The managed-key lifecycle on the service, with a manual clock: the 7-day
window, irreversible destruction, the append-only audit log, monthly usage."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

import pqc
from api.errors import code_of
from chains.environment import Environment
from cli.main import purge_due_keys
from core.errors import DomainError
from services.custody.billing import month_bounds
from services.custody.errors import CustodyIntegrityError
from services.custody.lifecycle import ManagedCustodyService
from services.settings import SettingsError, load_settings
from storage.database import Database
from storage.errors import ConstraintViolation
from storage.models import ManagedKeyState, Plan
from storage.sql_managed_keys import SqlManagedKeyStore
from storage.sqlite_db import split_statements
from tests.custody.support import add_principal, execute, requires_softhsm
from tests.support import REPO_ROOT, ManualClock

DAY = 86400
SECRET = "ab" * 32  # the secret key every node of a PostgreSQL store shares


def _code(excinfo) -> str:
    return code_of(excinfo.value)


@requires_softhsm
async def test_seven_day_window_then_irreversible_destruction(service, store, principal, clock, database):
    kept = await service.create(principal, "ml-dsa-65", "ethereum", "req_1")
    doomed = await service.create(principal, "ml-dsa-44", "bitcoin", "req_2")
    requested = clock.now()
    for key in (kept, doomed):
        pending = await service.schedule_deletion(principal, key.id, "req_3")
        assert pending.state is ManagedKeyState.PENDING_DELETION
        assert pending.deletion_scheduled_at == requested + timedelta(days=7)
        with pytest.raises(DomainError) as refused:
            await service.sign(principal, key.id, key.algorithm, b"m", b"")
        assert _code(refused) == "CUS_002"
        with pytest.raises(DomainError) as again:
            await service.schedule_deletion(principal, key.id)
        assert _code(again) == "CUS_006"

    clock.advance(6 * DAY + 23 * 3600 + 3599)  # one second before the date
    assert await service.purge_due() == []
    assert (await service.get(principal, doomed.id)).state is ManagedKeyState.PENDING_DELETION
    restored = await service.cancel_deletion(principal, kept.id, "req_4")
    assert restored.state is ManagedKeyState.ACTIVE and restored.deletion_scheduled_at is None
    signed = await service.sign(principal, kept.id, "ml-dsa-65", b"still mine", b"")
    pqc.verify("ml-dsa-65", kept.public_key, b"still mine", signed.signature)
    with pytest.raises(DomainError) as not_pending:
        await service.cancel_deletion(principal, kept.id)
    assert _code(not_pending) == "CUS_006"

    clock.advance(1)  # exactly 7 days
    assert await service.purge_due() == [doomed.id]
    assert await service.purge_due() == []  # idempotent
    gone = await service.get(principal, doomed.id)
    assert gone.state is ManagedKeyState.DESTROYED and gone.key_ref is None and gone.destroyed_at == clock.now()
    assert gone.public_key == doomed.public_key  # the public half stays, for old signatures
    row = await database.fetch_one("SELECT key_ref, state FROM managed_keys WHERE id = ?", (doomed.id,))
    assert row == (None, "destroyed")
    for action in (
        lambda: service.cancel_deletion(principal, doomed.id),
        lambda: service.schedule_deletion(principal, doomed.id),
    ):
        with pytest.raises(DomainError) as final:
            await action()
        assert _code(final) == "CUS_005"
    with pytest.raises(DomainError) as cannot_sign:
        await service.sign(principal, doomed.id, "ml-dsa-44", b"m", b"")
    assert _code(cannot_sign) == "CUS_005"
    assert (await service.get(principal, kept.id)).state is ManagedKeyState.ACTIVE

    events = [
        (e.type, e.state.value, e.actor.split(":")[0]) for e in (await service.events(principal, doomed.id)).items
    ]
    assert events == [
        ("created", "active", "api_key"),
        ("deletion_scheduled", "pending_deletion", "api_key"),
        ("destroyed", "destroyed", "system"),
    ]
    kept_events = (await service.events(principal, kept.id)).items
    assert [e.type for e in kept_events] == ["created", "deletion_scheduled", "deletion_cancelled"]
    assert [e.request_id for e in kept_events] == ["req_1", "req_3", "req_4"]
    assert await store.verify_event_chain(principal.account.id)


@requires_softhsm
async def test_audit_log_and_destruction_cannot_be_rewritten(service, store, principal, clock, database):
    key = await service.create(principal, "ml-dsa-65", "ethereum")
    await service.schedule_deletion(principal, key.id)
    clock.advance(7 * DAY)
    await service.purge_due()
    rewrites: list[tuple[str, tuple[object, ...]]] = [
        ("UPDATE managed_key_events SET actor = 'nobody'", ()),
        ("DELETE FROM managed_key_events", ()),
        ("UPDATE managed_keys SET state = 'active' WHERE id = ?", (key.id,)),
        ("UPDATE managed_keys SET key_ref = ? WHERE id = ?", (b"\x00", key.id)),
        ("DELETE FROM managed_keys WHERE id = ?", (key.id,)),
    ]
    if database.dialect == "postgresql":  # a statement SQLite does not have, which fires no row trigger
        rewrites.append(("TRUNCATE managed_key_events", ()))
    for statement, args in rewrites:
        with pytest.raises(ConstraintViolation):
            await execute(database, statement, args)
    # A history rewritten with the triggers dropped no longer chains.
    assert await store.verify_event_chain(principal.account.id)
    on_table = " ON managed_key_events" if database.dialect == "postgresql" else ""
    await execute(database, f"DROP TRIGGER managed_key_events_no_update{on_table}")
    await execute(
        database, "UPDATE managed_key_events SET actor = 'api_key:someone_else' WHERE type = 'deletion_scheduled'"
    )
    assert not await store.verify_event_chain(principal.account.id)


@requires_softhsm
async def test_tenants_and_environments_are_isolated(service, principal, database):
    key = await service.create(principal, "ml-dsa-65", "ethereum")
    stranger = await add_principal(database)
    same_account_test = type(principal)(principal.account, "secret", "key_test", Environment.TEST)
    for other in (stranger, same_account_test):
        for read in (service.get, service.events):
            with pytest.raises(DomainError) as hidden:
                await read(other, key.id)
            assert _code(hidden) == "REQ_005"
        for change in (service.schedule_deletion, service.cancel_deletion):
            with pytest.raises(DomainError) as hidden:
                await change(other, key.id)
            assert _code(hidden) == "REQ_005"
        with pytest.raises(DomainError) as hidden:
            await service.sign(other, key.id, "ml-dsa-65", b"m", b"")
        assert _code(hidden) == "REQ_005"
    assert (await service.get(principal, key.id)).state is ManagedKeyState.ACTIVE


@requires_softhsm
async def test_plans_and_algorithms(service, database):
    for plan in (Plan.FREE, Plan.BUILDER):
        with pytest.raises(DomainError) as gated:
            await service.create(await add_principal(database, plan), "ml-dsa-65", "ethereum")
        assert _code(gated) == "CUS_001"
    for plan in (Plan.PRO, Plan.ENTERPRISE):
        made = await service.create(await add_principal(database, plan), "ml-dsa-87", "solana")
        assert made.algorithm == "ml-dsa-87"
    pro = await add_principal(database)
    for name, code in (("slh-dsa-128s", "CUS_003"), ("slh-dsa-shake-128s", "CUS_003"), ("rsa", "PQC_001")):
        with pytest.raises(Exception) as refused:
            await service.create(pro, name, "ethereum")
        assert code_of(refused.value) == code
    with pytest.raises(DomainError) as chain:
        await service.create(pro, "ml-dsa-65", "cosmos")
    assert _code(chain) == "GEN_001"
    key = await service.create(pro, "ml-dsa-65", "ethereum")
    with pytest.raises(DomainError) as mismatch:
        await service.sign(pro, key.id, "ml-dsa-44", b"m", b"")
    assert _code(mismatch) == "REQ_001"
    with pytest.raises(DomainError) as long_context:
        await service.sign(pro, key.id, "ml-dsa-65", b"m", bytes(256))
    assert _code(long_context) == "REQ_001"
    # A downgraded account keeps its keys (read, delete) but cannot sign.
    await execute(database, "UPDATE accounts SET plan = 'free' WHERE id = ?", (pro.account.id,))
    downgraded = type(pro)(
        type(pro.account)(pro.account.id, pro.account.email, None, Plan.FREE, pro.account.created_at),
        "secret",
        pro.credential_id,
        pro.environment,
    )
    with pytest.raises(DomainError) as gated:
        await service.sign(downgraded, key.id, "ml-dsa-65", b"m", b"")
    assert _code(gated) == "CUS_001"
    assert (await service.schedule_deletion(downgraded, key.id)).state is ManagedKeyState.PENDING_DELETION


@requires_softhsm
async def test_usage_per_key_per_month_across_the_boundary(store, backend, database):
    clock = ManualClock(datetime(2026, 11, 30, 23, 59, 0, tzinfo=UTC))
    service = ManagedCustodyService(store, backend, clock)
    principal = await add_principal(database)
    a = await service.create(principal, "ml-dsa-65", "ethereum")
    b = await service.create(principal, "ml-dsa-44", "ethereum")
    for _ in range(3):
        await service.sign(principal, a.id, "ml-dsa-65", b"november", b"")
    await service.sign(principal, b.id, "ml-dsa-44", b"november", b"")
    clock.advance(120)  # 2026-12-01T00:01Z
    for _ in range(2):
        await service.sign(principal, a.id, "ml-dsa-65", b"december", b"")
    november, december = await service.usage(principal, "2026-11"), await service.usage(principal)
    assert december.month == "2026-12"
    assert {k.key_id: k.signatures for k in november.keys} == {a.id: 3, b.id: 1}
    assert {k.key_id: k.signatures for k in december.keys} == {a.id: 2, b.id: 0}
    assert (november.signatures, november.key_months, november.signature_blocks, november.billable_units) == (
        4,
        2,
        1,
        3,
    )
    assert (await service.usage(principal, "2026-10")).keys == []
    # Another environment of the same account counts separately.
    test_env = type(principal)(principal.account, "secret", "key_t", Environment.TEST)
    assert (await service.usage(test_env, "2026-11")).signatures == 0
    # ceil(signatures / 10,000) blocks.
    await execute(
        database, "UPDATE managed_key_usage SET signatures = 10001 WHERE key_id = ? AND month = '2026-12'", (a.id,)
    )
    blocked = await service.usage(principal)
    assert (blocked.signature_blocks, blocked.billable_units) == (2, 4)
    # A key destroyed in December still counts as a December key-month, not in January.
    await service.schedule_deletion(principal, b.id)
    clock.advance(7 * DAY)
    await service.purge_due()
    assert b.id in {k.key_id for k in (await service.usage(principal, "2026-12")).keys}
    assert (await service.usage(principal, "2027-01")).key_months == 1
    for month in ("2026-13", "26-11", "2026-1", "x"):
        with pytest.raises(DomainError):
            await service.usage(principal, month)
    assert month_bounds("2026-12") == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))


@requires_softhsm
async def test_signature_racing_a_deletion_is_not_returned(store, backend, clock, database, monkeypatch):
    service = ManagedCustodyService(store, backend, clock)
    principal = await add_principal(database)
    key = await service.create(principal, "ml-dsa-65", "ethereum")
    original_sign, original_count = backend.sign, store.count_signature
    signatures: list[bytes] = []

    def sign(*args):
        signatures.append(original_sign(*args))
        return signatures[-1]

    async def delete_then_count(key_id: str, month: str) -> bool:
        # Without an executor the count starts once the signing is done, so the
        # deletion lands between signing and counting.
        assert signatures
        await service.schedule_deletion(principal, key.id)
        return await original_count(key_id, month)

    monkeypatch.setattr(backend, "sign", sign)
    monkeypatch.setattr(store, "count_signature", delete_then_count)
    with pytest.raises(DomainError) as refused:
        await service.sign(principal, key.id, "ml-dsa-65", b"m", b"")
    assert _code(refused) == "CUS_002"
    assert (await service.usage(principal)).signatures == 0


@requires_softhsm
async def test_failed_signing_takes_its_count_back(store, backend, clock, database):
    executor = ThreadPoolExecutor(max_workers=2)  # the API's way: counting overlaps signing
    service = ManagedCustodyService(store, backend, clock, executor)
    principal = await add_principal(database)
    key = await service.create(principal, "ml-dsa-65", "ethereum")
    signed = await service.sign(principal, key.id, "ml-dsa-65", b"counted", b"ctx")
    pqc.verify("ml-dsa-65", key.public_key, b"counted", signed.signature, b"ctx")

    def broken(*_args):
        raise CustodyIntegrityError("injected")

    backend.sign = broken
    try:
        with pytest.raises(CustodyIntegrityError):
            await service.sign(principal, key.id, "ml-dsa-65", b"never made", b"")
    finally:
        del backend.sign
        executor.shutdown()
    assert (await service.usage(principal)).signatures == 1


def test_waiting_period_is_never_below_seven_days(sqlite_database, clock):
    with pytest.raises(SettingsError):
        load_settings({"QDAY_DELETION_WAIT_DAYS": "6"})
    assert load_settings({"QDAY_DELETION_WAIT_DAYS": "30"}).deletion_wait_days == 30
    with pytest.raises(ValueError):
        ManagedCustodyService(SqlManagedKeyStore(sqlite_database), None, clock, deletion_wait_days=6)


async def test_without_a_backend_managed_operations_are_unavailable(store, clock, principal):
    service = ManagedCustodyService(store, None, clock)
    with pytest.raises(Exception) as unavailable:
        await service.create(principal, "ml-dsa-65", "ethereum")
    assert code_of(unavailable.value) == "CUS_004"


@requires_softhsm
async def test_purge_keys_command_and_function(tmp_path, backend, engine_url, database: Database):
    # The settings of a tool on the test's store (``database`` is in tmp_path, or at engine_url).
    env = {"QDAY_DATABASE_URL": engine_url, "QDAY_SECRET_KEY": SECRET} if engine_url else {}
    settings = load_settings(env, data_dir=tmp_path)
    clock = ManualClock(datetime(2020, 1, 1, tzinfo=UTC))  # so the dates are past by the real clock
    service = ManagedCustodyService(SqlManagedKeyStore(database), backend, clock)
    principal = await add_principal(database)
    keys = [await service.create(principal, "ml-dsa-65", "ethereum") for _ in range(3)]
    for key in keys[:2]:
        await service.schedule_deletion(principal, key.id)
    # a tool's entry point (it runs its own event loop), so called from a thread here
    before_due = ManualClock(datetime(2020, 1, 7, 23, 59, tzinfo=UTC))
    assert await asyncio.to_thread(purge_due_keys, settings, before_due) == []
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "admin", "purge-keys", "--data-dir", str(tmp_path)],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "destroyed 2 managed key(s)" in done.stdout
    states = dict(await database.fetch_all("SELECT id, state FROM managed_keys"))
    assert states == {keys[0].id: "destroyed", keys[1].id: "destroyed", keys[2].id: "active"}


def test_migration_splitter_keeps_trigger_bodies_whole():
    script = (
        "CREATE TABLE t (x);\n-- a comment; with a semicolon\nCREATE TRIGGER tr BEFORE DELETE ON t\nBEGIN\n"
        "    SELECT RAISE(ABORT, 'no; never');\nEND;\nCREATE INDEX i ON t(x);\n"
    )
    statements = split_statements(script)
    assert len(statements) == 3 and statements[1].endswith("END;")
