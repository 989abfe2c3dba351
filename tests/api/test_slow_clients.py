"""Slow clients (slowloris) against a real server: the request deadline runs from a
request's first byte, however often bytes trickle in, and a request still arriving when it
ends is a 408 REQ_008, not a 5xx, and not logged as a server error."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.support import ServerProcess

DEADLINE = 2  # QDAY_REQUEST_TIMEOUT_SECONDS of the server under test
TRICKLE = 0.4  # seconds between bytes: well inside Sanic's per-byte timeout


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("slow-clients"), env={"QDAY_REQUEST_TIMEOUT_SECONDS": str(DEADLINE)})
    yield proc
    proc.stop()


def trickle(server: ServerProcess, head: bytes, body: bytes, *, head_at_once: bool = False) -> tuple[bytes, float]:
    """Send ``head`` (at once, or a byte at a time) then ``body`` a byte at a time every
    ``TRICKLE`` s; the server's answer (everything until it closes) and when it came, from
    the first trickled byte."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE * 5) as conn:
        if head_at_once:
            conn.sendall(head)
        data = body if head_at_once else head + body
        start = time.monotonic()
        answer = b""
        for i in range(len(data)):
            try:
                conn.sendall(data[i : i + 1])
            except OSError:
                break  # the server closed the connection
            conn.settimeout(TRICKLE)
            try:
                answer += conn.recv(65536)
            except TimeoutError:
                continue
            if answer:
                break
        conn.settimeout(DEADLINE * 5)
        while chunk := conn.recv(65536):
            answer += chunk
        return answer, time.monotonic() - start


def status_and_code(answer: bytes) -> tuple[int, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)["error"]["code"]


def test_headers_trickled_past_the_deadline_get_408(server):
    head = b"GET /v1/health HTTP/1.1\r\nHost: qday.test\r\nX-Padding: " + b"a" * 40 + b"\r\n\r\n"
    answer, elapsed = trickle(server, head, b"")
    assert status_and_code(answer) == (408, "REQ_008")
    # the whole request had DEADLINE seconds, not DEADLINE per byte: answered long before the
    # trickle would have ended (a bound with room for a loaded machine, not a timing target)
    assert elapsed < len(head) * TRICKLE / 2


def test_a_body_trickled_past_the_deadline_gets_408(server):
    body = b'{"email": "slow@example.com", "password": "' + b"p" * 40 + b'"}'
    head = (
        b"POST /v1/auth/login HTTP/1.1\r\nHost: qday.test\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
    )
    answer, elapsed = trickle(server, head, body, head_at_once=True)  # headers at once, the body slowly
    assert status_and_code(answer) == (408, "REQ_008")
    assert elapsed < len(body) * TRICKLE / 2  # long before the trickle would have ended


def test_a_prompt_request_is_unaffected(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: qday.test\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200")
