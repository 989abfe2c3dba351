"""A fault-injecting HTTP proxy on 127.0.0.1, in front of one real upstream.

Fault tests put it between the service and a chain source (anvil, or a loopback replay
server) and switch it at run time between modes:

| mode | what the client sees |
|---|---|
| ``pass`` | the upstream's answer, unchanged |
| ``hang`` | the connection is accepted and the request read, then nothing, until the client gives up
  (or ``max_hold``) |
| ``reset`` | the first half of the upstream's answer, then a TCP RST |
| ``status`` | an HTTP error status (503 by default) with a short text body |
| ``garbage`` | bytes that are not HTTP at all, then the connection closes |
| ``bad_json`` | ``200 OK`` with a body that is not JSON |
| ``slow`` | the upstream's answer, ``delay`` seconds late |

It is bounded: a held connection is dropped after ``max_hold`` seconds and on ``stop``,
every read from either side has a deadline, and it closes each connection after one
exchange (``Connection: close`` towards the upstream and the client), so every request is
a new connection and ``connections`` counts exactly what reached the proxy. It runs its
own event loop in a thread, so it serves a server subprocess and an in-process app alike.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

MODES = ("pass", "hang", "reset", "status", "garbage", "bad_json", "slow")
_IO_DEADLINE = 10.0
_GARBAGE = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(7, 200, 3))


@dataclass(frozen=True, slots=True)
class Mode:
    """What the proxy does to each request: ``kind`` (one of ``MODES``), the ``status``
    sent in ``status`` mode and the ``delay`` in seconds of ``slow`` mode."""

    kind: str = "pass"
    status: int = 503
    delay: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in MODES:
            raise ValueError(f"unknown proxy mode {self.kind!r}; one of {', '.join(MODES)}")


def _rewrite_connection_close(head: bytes) -> bytes:
    """The request or response head with its ``Connection`` header replaced by ``close``."""
    lines = head.split(b"\r\n")
    kept = [line for line in lines[1:] if line and not line.lower().startswith(b"connection:")]
    return b"\r\n".join([lines[0], *kept, b"Connection: close"]) + b"\r\n\r\n"


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def _plain_response(status: int, body: bytes, content_type: bytes = b"text/plain") -> bytes:
    return (
        b"HTTP/1.1 %d Fault\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        % (status, content_type, len(body))
    ) + body


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """The proxy. ``url`` is its base URL once started; ``set_mode`` switches the fault.

    ``connections`` counts accepted connections (one per request) and ``forwarded`` the
    requests passed on to the upstream; both only grow. Use as a context manager or call
    ``start``/``stop``.
    """

    def __init__(self, upstream: str, max_hold: float = 30.0) -> None:
        """``upstream`` is the real source's base URL (``http://127.0.0.1:PORT``);
        ``max_hold`` bounds how long ``hang`` keeps a connection."""
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost"):
            raise ValueError("the fault proxy fronts a loopback http:// upstream only")
        self._upstream = (parts.hostname, parts.port or 80)
        self._max_hold = max_hold
        self._mode = Mode()
        self.connections = 0
        self.forwarded = 0
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._held: set[asyncio.Task[None]] = set()

    @property
    def mode(self) -> Mode:
        """The fault applied to the next request."""
        return self._mode

    def set_mode(self, kind: str, *, status: int = 503, delay: float = 0.0) -> None:
        """Apply ``kind`` (see ``MODES``) to every request from now on."""
        self._mode = Mode(kind, status, delay)

    def start(self) -> FaultProxy:
        """Listen on a free loopback port (``url``) in the proxy's own thread."""
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result(timeout=10)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        """Close the listener and every open connection, then end the thread."""
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._held):
            task.cancel()
        await asyncio.gather(*self._held, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._held.add(task)
        try:
            request = await self._read_message(reader)
            if request is not None:
                await self._answer(request, reader, writer)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
            pass  # the client went away or sent nonsense: just drop the connection
        except asyncio.CancelledError:
            pass  # ``stop`` drops held connections
        finally:
            self._held.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    async def _read_message(self, reader: asyncio.StreamReader) -> bytes | None:
        """One HTTP request (head and ``Content-Length`` body), or None at EOF."""
        async with asyncio.timeout(_IO_DEADLINE):
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return None
            body = await reader.readexactly(_content_length(head))
        return _rewrite_connection_close(head[:-4]) + body

    async def _answer(self, request: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        mode = self._mode
        if mode.kind == "hang":
            async with asyncio.timeout(self._max_hold):
                await reader.read()  # until the client gives up and closes
            return
        if mode.kind == "status":
            writer.write(_plain_response(mode.status, b"injected fault"))
        elif mode.kind == "garbage":
            writer.write(_GARBAGE)
        elif mode.kind == "bad_json":
            writer.write(_plain_response(200, b"<html>not json", b"application/json"))
        else:
            answer = await self._forward(request)
            if mode.kind == "slow":
                await asyncio.sleep(mode.delay)
            if mode.kind == "reset":
                writer.write(answer[: len(answer) // 2])
                await writer.drain()
                _abort_with_rst(writer)
                return
            writer.write(answer)
        await writer.drain()

    async def _forward(self, request: bytes) -> bytes:
        """Send the request to the upstream and read its whole answer (it closes after one)."""
        self.forwarded += 1
        async with asyncio.timeout(_IO_DEADLINE):
            reader, writer = await asyncio.open_connection(*self._upstream)
            try:
                writer.write(request)
                await writer.drain()
                answer = await reader.read()
            finally:
                writer.close()
        head, sep, body = answer.partition(b"\r\n\r\n")
        return _rewrite_connection_close(head) + body if sep else answer
