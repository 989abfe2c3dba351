"""Fixtures of the security tests: one real ``qday serve`` shared by the tests that need real
HTTP, real argon2 and real logs. The fixtures of the in-process app (``app``, ``client``,
``clock``, ``tenant``) live in the root conftest, shared with tests/api."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.custody.support import shared_softhsm_conf
from tests.support import ServerProcess


@pytest.fixture(scope="session")
def hostile_server(tmp_path_factory) -> Iterator[ServerProcess]:
    """One worker, production argon2 parameters, DEBUG logging and access log on (so the log
    has the most to leak), limits scaled up so that fuzzing and timing reach the handlers;
    managed custody on the process's throw-away SoftHSM2 token when SoftHSM2 is installed."""
    shared_softhsm_conf()
    proc = ServerProcess(
        tmp_path_factory.mktemp("hostile-server"),
        env={"QDAY_RATE_LIMIT_MULTIPLIER": "1000", "QDAY_LOG_LEVEL": "DEBUG", "QDAY_ACCESS_LOG": "true"},
    )
    yield proc
    proc.stop()
