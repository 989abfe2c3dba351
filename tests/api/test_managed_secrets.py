"""No seed or secret key part of a managed key reaches the data directory, the
token directory, the logs or any response, after a batch of operations that
includes errors; and a destroyed key's wrapped seed is gone from the database
files too."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from services.settings import load_settings
from storage.models import Plan
from tests.custody.support import (
    execute,
    files_containing,
    managed_seeds,
    requires_softhsm,
    secret_patterns,
    shared_softhsm_conf,
)
from tests.support import Lifespan, ManualClock, client_for, create_test_app, make_tenant

shared_softhsm_conf()
pytestmark = requires_softhsm
_LOGGERS = ("", "qday", "qday.api", "qday.custody", "sanic.root", "sanic.error", "sanic.access", "sanic.server")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record) + "\n" + repr(record.args) + "\n" + repr(record.__dict__))


@pytest.fixture
def logs():
    handler = _Collect()
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    saved = {}
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        saved[name] = logger.level
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
    yield handler
    for name in _LOGGERS:
        logging.getLogger(name).removeHandler(handler)
        logging.getLogger(name).setLevel(saved[name])


async def test_seeds_appear_nowhere_after_a_batch_of_operations(tmp_path, logs):
    clock = ManualClock(datetime(2026, 11, 21, 12, 0, tzinfo=UTC))
    data_dir = tmp_path / "data"
    app = create_test_app(load_settings({}, data_dir=data_dir, log_level="DEBUG", access_log=True), clock)
    lifespan = Lifespan(app)
    await lifespan.start()
    bodies: list[bytes] = []
    try:
        async with client_for(app) as c:
            tenant = await make_tenant(c, ("secret_live", "secret_test"))
            await app.ctx.store.set_plan(tenant.email, Plan.PRO)
            keys = []
            for env in ("secret_live", "secret_test"):
                for algorithm in ("ml-dsa-44", "ml-dsa-65", "ml-dsa-87"):
                    r = await c.post(
                        "/v1/keys/generate",
                        json={"algorithm": algorithm, "chain": "ethereum", "custody": "managed"},
                        headers=tenant.auth(env),
                    )
                    bodies.append(r.content)
                    keys.append((env, algorithm, r.json()["data"]["id"]))
            for env, algorithm, key_id in keys:
                for i, context in enumerate(("", "00ff", "71646179")):
                    r = await c.post(
                        "/v1/sign/managed",
                        json={"key_id": key_id, "message": f"{i:02x}" * 40, "algorithm": algorithm, "context": context},
                        headers=tenant.auth(env),
                    )
                    assert r.status_code == 200
                    bodies.append(r.content)
                for path in (f"/v1/keys/{key_id}", f"/v1/keys/{key_id}/events", "/v1/usage"):
                    bodies.append((await c.get(path, headers=tenant.auth(env))).content)
            # Errors along the way: wrong algorithm, wrong environment, pending key, tampered material.
            env, algorithm, key_id = keys[0]
            for body, auth in (
                ({"key_id": key_id, "message": "00", "algorithm": "ml-dsa-87"}, env),
                ({"key_id": key_id, "message": "00", "algorithm": algorithm}, "secret_test"),
            ):
                bodies.append((await c.post("/v1/sign/managed", json=body, headers=tenant.auth(auth))).content)
            seeds = managed_seeds(app.ctx.settings.operational_db, app.ctx.managed.custody._unwrap)
            assert len(seeds) == 6
            doomed = keys[1][2]
            (doomed_ref,) = await app.ctx.database.fetch_one("SELECT key_ref FROM managed_keys WHERE id = ?", (doomed,))
            assert files_containing(data_dir, [doomed_ref])  # the wrapped seed is on disk while the key lives
            bodies.append((await c.delete(f"/v1/keys/{doomed}", headers=tenant.auth("secret_live"))).content)
            bodies.append(
                (
                    await c.post(
                        "/v1/sign/managed",
                        json={"key_id": doomed, "message": "00", "algorithm": "ml-dsa-65"},
                        headers=tenant.auth("secret_live"),
                    )
                ).content
            )
            tampered = keys[2][2]
            (ref,) = await app.ctx.database.fetch_one("SELECT key_ref FROM managed_keys WHERE id = ?", (tampered,))
            await execute(
                app.ctx.database,
                "UPDATE managed_keys SET key_ref = ? WHERE id = ?",
                (ref[:-1] + bytes([ref[-1] ^ 1]), tampered),
            )
            r = await c.post(
                "/v1/sign/managed",
                json={"key_id": tampered, "message": "00", "algorithm": "ml-dsa-87"},
                headers=tenant.auth("secret_live"),
            )
            assert r.status_code == 500 and r.json()["error"]["code"] == "CUS_007"
            bodies.append(r.content)
            clock.advance(7 * 86400)
            assert await app.ctx.managed.purge_due() == [doomed]
            # Overwritten in its page (secure_delete) and gone from the truncated WAL, with the server running.
            assert files_containing(data_dir, [doomed_ref]) == []
    finally:
        await lifespan.stop()

    patterns = [
        p for key_id, seed in seeds.items() for p in secret_patterns(seed, next(a for _, a, k in keys if k == key_id))
    ]
    assert files_containing(data_dir, patterns) == []
    assert files_containing(shared_softhsm_conf().parent, patterns) == []
    log_text = "\n".join(logs.lines).encode()
    assert len(logs.lines) > 20  # the access log and our own lines were captured
    assert [p for p in patterns if p in log_text] == []
    for body in bodies:
        assert [p for p in patterns if p in body] == []
