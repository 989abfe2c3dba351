"""A ``qday serve`` killed with SIGKILL while it holds a webhook delivery in flight: after
a restart on the same data directory the delivery is sent again and recorded as
delivered (at least once; the receiver sees one event id twice and drops the repeat)."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import httpx
import pytest

from bench.httpload import provision_secret_key
from tests.support import ServerProcess
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.slow

ENV = {"QDAY_WEBHOOK_ALLOW_PRIVATE": "true", "QDAY_WEBHOOK_TIMEOUT_SECONDS": "2"}


def test_a_delivery_in_flight_when_the_server_dies_is_sent_after_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with WebhookReceiver() as receiver:
        server = ServerProcess(data, env=ENV)
        try:
            key = provision_secret_key(server.base_url)
            auth = {"Authorization": f"Bearer {key}"}
            made = httpx.post(
                f"{server.base_url}/v1/webhooks",
                json={"url": receiver.url, "events": ["key.exposed"]},
                headers=auth,
                timeout=30,
            )
            assert made.status_code == 201, made.text
            webhook_id = made.json()["data"]["id"]
            receiver.hang()
            ping = threading.Thread(  # answers only when the attempt ends: it never will
                target=lambda: _quietly_post(f"{server.base_url}/v1/webhooks/{webhook_id}/test", auth), daemon=True
            )
            ping.start()
            (held,) = receiver.wait_for(1, timeout=30)
            os.killpg(server.process.pid, signal.SIGKILL)  # the attempt is in flight, unrecorded
            server.process.wait(timeout=10)
        finally:
            server.stop()
        receiver.release()
        restarted = ServerProcess(data, env=ENV)
        try:
            received = receiver.wait_for(2, timeout=60)  # after the dead worker's claim lapses
            again = received[1]
            assert json.loads(again.body)["id"] == json.loads(held.body)["id"]
            assert again.headers["Qday-Event-Id"] == held.headers["Qday-Event-Id"]
            path = f"{restarted.base_url}/v1/webhooks/{webhook_id}/deliveries"
            for _ in range(100):
                (delivery,) = httpx.get(path, headers=auth, timeout=30).json()["data"]
                if delivery["state"] == "delivered":
                    break
                threading.Event().wait(0.1)
            assert delivery["state"] == "delivered", delivery
            assert [a["status"] for a in delivery["attempts"]] == [200]  # the killed attempt was never recorded
        finally:
            restarted.stop()


def _quietly_post(url: str, headers: dict[str, str]) -> None:
    try:
        httpx.post(url, headers=headers, timeout=30)
    except httpx.HTTPError:
        pass  # the server was killed under it
