"""Shared by the custody and managed-API tests: one throw-away SoftHSM2 token per
test process, seed extraction for leak searches, and key-material patterns.

SoftHSM2 reads its configuration once per process, so every test (and every
``qday serve`` subprocess a test starts, through the inherited environment)
uses the same token: the one ``make test`` prepared (``SOFTHSM2_CONF``), or one
created here in a temporary directory when the variable is not set.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chains.environment import Environment
from core.ids import new_id
from services.accounts import Principal
from services.custody.backend import binding_for
from services.custody.pkcs11 import SOFTHSM_MODULE
from services.custody.softhsm import SoftHsmLayout, _file_lock, ensure_softhsm_token
from storage.database import Database
from storage.models import Account, Plan
from storage.sql_accounts import SqlStore

SOFTHSM_AVAILABLE = Path(SOFTHSM_MODULE).is_file() and shutil.which("softhsm2-util") is not None
requires_softhsm = pytest.mark.skipif(
    not SOFTHSM_AVAILABLE,
    reason=f"SoftHSM2 is not installed ({SOFTHSM_MODULE} or softhsm2-util missing): `make test` installs it "
    "(apt-get install softhsm2)",
)

_shared: Path | None = None


def shared_softhsm_conf() -> Path | None:
    """The test process's SoftHSM2 configuration, created on first call and
    exported as ``SOFTHSM2_CONF``; None without SoftHSM2."""
    global _shared
    if _shared is not None or not SOFTHSM_AVAILABLE:
        return _shared
    configured = os.environ.get("SOFTHSM2_CONF")
    if configured:
        conf = Path(configured).absolute()
    else:
        directory = Path(tempfile.mkdtemp(prefix="qday-test-softhsm-"))
        atexit.register(shutil.rmtree, directory, True)
        conf = SoftHsmLayout(directory).conf
    with _file_lock(SoftHsmLayout(conf.parent).lock):
        ensure_softhsm_token(conf)
    os.environ["SOFTHSM2_CONF"] = str(conf)
    _shared = conf
    return conf


def managed_seeds(db_path: Path, unwrap) -> dict[str, bytes]:
    """key id → seed of every managed key still holding material in a store,
    unwrapped through a custody backend (the only way to see a seed)."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT id, account_id, environment, algorithm, key_ref FROM managed_keys WHERE key_ref IS NOT NULL"
        ).fetchall()
    finally:
        conn.close()
    seeds = {}
    for key_id, account_id, environment, algorithm, key_ref in rows:
        seed = unwrap(key_ref, binding_for(key_id, account_id, environment, algorithm))
        seeds[key_id] = bytes(seed)
    return seeds


_DIMENSIONS = {"ml-dsa-44": (4, 4), "ml-dsa-65": (6, 5), "ml-dsa-87": (8, 7)}


def secret_patterns(seed: bytes, algorithm: str = "ml-dsa-65") -> list[bytes]:
    """Byte strings that must never appear outside custody: the seed ξ and the
    secret parts derived from it (FIPS 204 KeyGen: ρ' and K from H(ξ‖k‖l)),
    raw and in the text encodings a log or response would use."""
    k, l = _DIMENSIONS[algorithm]  # noqa: E741 - FIPS 204's name for the dimension
    expanded = hashlib.shake_256(seed + bytes((k, l))).digest(128)
    rho_prime, key_k = expanded[32:96], expanded[96:128]
    patterns = []
    for secret in (seed, rho_prime, key_k):
        patterns += [secret, secret.hex().encode(), secret.hex().upper().encode(), base64.b64encode(secret)]
    return patterns


def files_containing(root: Path, patterns: list[bytes]) -> list[str]:
    """Files under ``root`` that contain any of the patterns."""
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            hits += [f"{path} ({len(p)} bytes)" for p in patterns if p in content]
    return hits


async def add_principal(db: Database, plan: Plan = Plan.PRO, environment: Environment = Environment.LIVE) -> Principal:
    """A new account row on ``db`` and a secret-key principal for it."""
    account_id = new_id("usr")
    account = Account(account_id, f"{account_id}@example.com", None, plan, datetime(2026, 1, 1, tzinfo=UTC))
    await SqlStore(db).create_account(account, "x")
    return Principal(account, "secret", new_id("key"), environment)


async def execute(db: Database, sql: str, args: Sequence[object] = ()) -> int:
    """Run one statement in a write transaction of its own, behind the repositories'
    back (what an operator or an attacker with the database would do); the rows changed."""
    return await db.write(lambda tx: tx.execute(sql, args))
