"""A failure at any step of key creation, or the process being killed, leaves
no key row, no orphaned event or registration, and nothing on the token: the
wrapped seed exists only inside the one transaction that stores the key."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time

import psycopg
import pytest

from api.errors import code_of
from core.errors import DomainError
from pqc import Algorithm
from pqc.mldsa import public_key_of
from services.custody.backend import binding_for
from services.custody.errors import CustodyIntegrityError, CustodyUnavailable
from services.custody.pkcs11 import _MODULE_LOCK
from storage.database import Database
from storage.errors import ConstraintViolation
from tests.custody.support import add_principal, execute, requires_softhsm
from tests.support import REPO_ROOT

pytestmark = requires_softhsm


def _token_objects(backend) -> int:
    with _MODULE_LOCK:
        return len(list(backend._session.get_objects()))


async def _counts(db: Database) -> tuple[int, ...]:
    counts = []
    for table in ("managed_keys", "managed_key_events", "pq_keys"):
        row = await db.fetch_one(f"SELECT count(*) FROM {table}")
        assert row is not None
        counts.append(row[0])
    return tuple(counts)


def _fail(*_args, **_kwargs):
    raise RuntimeError("injected failure")


def _fail_encrypt(original):
    def crypt(operation, *args):
        if operation == "encrypt":
            raise CustodyUnavailable("injected: token failed while wrapping")
        return original(operation, *args)

    return crypt


def _wrong_readback(*_args):
    return bytearray(32)


def _fail_event(dialect: str):
    """An event insert failing with the engine's own I/O error, after the key row was inserted."""
    io_error = sqlite3.OperationalError if dialect == "sqlite" else psycopg.OperationalError

    async def append_event(*_args):
        raise io_error("injected: disk I/O error after the key row was inserted")

    return append_event


STEPS = {
    "seed → public key": ("services.custody.pkcs11.public_key_of", _fail, "GEN_002"),
    "wrap on the token": ("backend._crypt", _fail_encrypt, "CUS_004"),
    "read-back check": ("backend._unwrap", _wrong_readback, "GEN_002"),
    "event insert (key row already written)": ("storage.sql_managed_keys._append_event", _fail_event, "SRV_002"),
}


@pytest.mark.parametrize("step", list(STEPS))
async def test_failure_at_each_creation_step_leaves_nothing(step, service, backend, principal, database, monkeypatch):
    target, replacement, code = STEPS[step]
    objects = _token_objects(backend)
    destroyed = []
    monkeypatch.setattr(backend, "destroy", lambda key_ref, binding: destroyed.append(key_ref))
    if target.startswith("backend."):
        name = target.split(".", 1)[1]
        original = getattr(backend, name)
        monkeypatch.setattr(backend, name, replacement(original) if replacement is _fail_encrypt else replacement)
    else:
        monkeypatch.setattr(target, replacement(database.dialect) if replacement is _fail_event else replacement)
    with pytest.raises(DomainError) as failed:
        await service.create(principal, "ml-dsa-65", "ethereum")
    assert code_of(failed.value) == code
    assert await _counts(database) == (0, 0, 0)
    assert _token_objects(backend) == objects
    assert len(destroyed) == (1 if "event" in step else 0)  # made, then given back when the store failed
    monkeypatch.undo()
    await service.create(principal, "ml-dsa-65", "ethereum")  # and the next creation works
    assert await _counts(database) == (1, 1, 1)


async def test_registration_failure_rolls_back_the_key(service, principal, database):
    if database.dialect == "sqlite":
        await execute(
            database, "CREATE TEMP TRIGGER inject BEFORE INSERT ON pq_keys BEGIN SELECT RAISE(ABORT, 'injected'); END"
        )
    else:
        await execute(
            database,
            "CREATE FUNCTION inject() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " RAISE EXCEPTION 'injected' USING ERRCODE = 'integrity_constraint_violation'; END; $$",
        )
        await execute(database, "CREATE TRIGGER inject BEFORE INSERT ON pq_keys FOR EACH ROW EXECUTE FUNCTION inject()")
    with pytest.raises(ConstraintViolation):
        await service.create(principal, "ml-dsa-65", "ethereum")
    assert await _counts(database) == (0, 0, 0)


async def test_killed_mid_creation_leaves_only_whole_keys(backend, sqlite_database):
    principal = await add_principal(sqlite_database)
    objects = _token_objects(backend)
    rng = random.Random(7)
    printed: list[str] = []
    kills = 3
    for _ in range(kills):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.custody.crash_worker", str(sqlite_database.path), principal.account.id],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        printed += [proc.stdout.readline().strip() for _ in range(rng.randint(3, 12))]
        time.sleep(rng.random() * 0.02)  # land anywhere inside a later creation
        proc.send_signal(signal.SIGKILL)
        printed += proc.stdout.read().split()
        proc.wait(timeout=30)
    rows = await sqlite_database.fetch_all(
        "SELECT id, account_id, environment, algorithm, public_key, key_ref, state FROM managed_keys"
    )
    ids = {row[0] for row in rows}
    assert set(printed) <= ids and len(ids) - len(printed) <= kills  # at most one committed-but-unreported per kill
    for key_id, account_id, environment, algorithm, public_key, key_ref, state in rows:
        assert state == "active" and key_ref is not None
        seed = backend._unwrap(key_ref, binding_for(key_id, account_id, environment, algorithm))
        assert public_key_of(Algorithm(algorithm), seed) == public_key  # whole, opens, matches
        assert await sqlite_database.fetch_all("SELECT type FROM managed_key_events WHERE key_id = ?", (key_id,)) == [
            ("created",)
        ]
        assert await sqlite_database.fetch_one("SELECT 1 FROM pq_keys WHERE id = ?", (key_id,))
    assert await _counts(sqlite_database) == (len(rows), len(rows), len(rows))
    assert _token_objects(backend) == objects  # nothing per key on the token, so no orphans there
    with pytest.raises(CustodyIntegrityError):  # and a blob is useless in any other row
        backend._unwrap(rows[0][5], binding_for(rows[1][0], *rows[0][1:4]))
