"""A local webhook receiver for tests: a real HTTP server on 127.0.0.1 that records every
request it gets (method, path, headers, body) and answers from a script of statuses
(``fail_next``) or hangs (``hang``), so tests see deliveries, retries and timeouts as a
customer's endpoint would."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # bursts of concurrent deliveries (the base's 5 resets them)
    daemon_threads = True


@dataclass(frozen=True)
class Received:
    """One request the receiver got, and when (``time.monotonic()`` at its arrival)."""

    path: str
    headers: dict[str, str]
    body: bytes
    answered: int
    at: float


class WebhookReceiver:
    """``with WebhookReceiver() as r: r.url`` — records requests in ``r.received``."""

    def __init__(self, port: int = 0) -> None:
        self.received: list[Received] = []
        self._statuses: list[int] = []
        self._hang = threading.Event()
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:  # recorded on arrival, before any answer
                    status = receiver._statuses.pop(0) if receiver._statuses else 200
                    receiver.received.append(
                        Received(self.path, dict(self.headers.items()), body, status, time.monotonic())
                    )
                    receiver._arrived.notify_all()
                if receiver._hang.is_set():
                    receiver._released.wait(30)
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's signature
                pass

        self._server = _Server(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Its URL (path ``/hook``)."""
        return f"http://127.0.0.1:{self.port}/hook"

    def fail_next(self, *statuses: int) -> None:
        """Answer the next requests with these statuses (then 200 again)."""
        with self._lock:
            self._statuses.extend(statuses)

    def hang(self) -> None:
        """Hold every request without answering until ``release``."""
        self._released.clear()
        self._hang.set()

    def release(self) -> None:
        """Answer held requests and stop holding new ones."""
        self._hang.clear()
        self._released.set()

    def wait_for(self, count: int, timeout: float = 15.0) -> list[Received]:
        """The requests once at least ``count`` arrived; AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.received)} of {count} webhook requests arrived in {timeout} s")
                self._arrived.wait(left)
            return list(self.received)

    async def arrived(self, count: int, timeout: float = 15.0) -> list[Received]:
        """``wait_for`` without blocking the event loop (for an app served in-process)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if len(self.received) >= count:
                    return list(self.received)
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.received)} of {count} webhook requests arrived in {timeout} s")
            await asyncio.sleep(0.02)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
