"""One real server for all the client tests (starting one costs seconds on a busy machine)."""

from __future__ import annotations

import pytest

from tests.client.support import start_server
from tests.custody.support import shared_softhsm_conf


@pytest.fixture(scope="package")
def server(anvil, tmp_path_factory):
    """``qday serve`` on 127.0.0.1 with test-environment ethereum scans on the session anvil
    (webhooks may go to a receiver on loopback)."""
    shared_softhsm_conf()
    proc = start_server(tmp_path_factory.mktemp("client-server"), anvil, QDAY_WEBHOOK_ALLOW_PRIVATE="true")
    yield proc
    proc.stop()
