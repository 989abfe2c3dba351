"""A loopback HTTP server for client tests: routes, JSON-RPC methods and injected faults.

It runs on 127.0.0.1 in the test's event loop (aiohttp), records every request, and
answers each one with the first queued fault that matches it (a status, a delay, a
malformed body, a dropped connection), else with the route's answer. Chains without a
local node (Bitcoin, Solana, Cosmos, Tron) are tested against it, replaying the real
response shapes of the shared conformance folder.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Answer = tuple[int, Any] | tuple[int, Any, Mapping[str, str]]
Handler = Callable[[Any, Mapping[str, str]], Answer]


class RpcFailure(Exception):
    """Raised by a JSON-RPC method handler: becomes an error object in the answer."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Fault:
    """What to do to the next matching request(s) instead of answering normally."""

    status: int | None = None
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    reset: bool = False
    path: str | None = None
    times: int = 1


@dataclass(frozen=True)
class Seen:
    """A request the server received."""

    method: str
    path: str
    query: Mapping[str, str]
    body: Any
    headers: Mapping[str, str]


class Loopback:
    """The server. ``url`` is its base; add answers with ``route``/``rpc_methods``."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.faults: list[Fault] = []
        self.requests: list[Seen] = []
        #: Answers requests no route matches (``(method, path, query)`` -> answer), else 404.
        self.fallback: Callable[[str, str, Mapping[str, str]], Answer] | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> Loopback:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # started above, so it has sockets
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def route(
        self, method: str, path: str, answer: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> None:
        """Answer ``method path`` with a fixed JSON body (bytes are sent as they are)."""
        self.routes[(method, path)] = lambda body, query: (status, answer, headers or {})

    def handle(self, method: str, path: str, handler: Handler) -> None:
        """Answer ``method path`` with ``handler(json_body, query)`` → (status, body[, headers])."""
        self.routes[(method, path)] = handler

    def rpc_methods(self, methods: Mapping[str, Callable[[list[Any]], Any]], path: str = "/") -> None:
        """Serve JSON-RPC 2.0 (single calls and batches) at ``path`` from method handlers."""

        def answer_one(call: Mapping[str, Any]) -> dict[str, Any]:
            handler = methods.get(call.get("method", ""))
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": call.get("id")}
            try:
                if handler is None:
                    raise RpcFailure(-32601, "Method not found")
                reply["result"] = handler(call.get("params", []))
            except RpcFailure as exc:
                reply["error"] = {"code": exc.code, "message": exc.message}
            return reply

        def handler(body: Any, query: Mapping[str, str]) -> Answer:
            if isinstance(body, list):
                return 200, [answer_one(call) for call in body]
            return 200, answer_one(body)

        self.handle("POST", path, handler)

    def fail(self, fault: Fault) -> None:
        """Queue a fault for the next ``fault.times`` requests (to ``fault.path`` if set)."""
        self.faults.append(fault)

    def count(self, path: str | None = None) -> int:
        """Requests received (to ``path``, if given)."""
        return sum(1 for r in self.requests if path is None or r.path == path)

    def _take_fault(self, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.path in (None, path):
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        self.requests.append(Seen(request.method, request.path, dict(request.query), body, dict(request.headers)))
        fault = self._take_fault(request.path)
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.reset:
                assert request.transport is not None
                request.transport.abort()
                return web.Response()
            if fault.status is not None or fault.body is not None:
                return web.Response(status=fault.status or 200, body=fault.body or b"", headers=fault.headers)
        handler = self.routes.get((request.method, request.path))
        if handler is not None:
            status, answer, *rest = handler(body, dict(request.query))
        elif self.fallback is not None:
            status, answer, *rest = self.fallback(request.method, request.path, dict(request.query))
        else:
            return web.json_response({"error": f"no route {request.method} {request.path}"}, status=404)
        headers = dict(rest[0]) if rest else {}
        if isinstance(answer, bytes):
            return web.Response(status=status, body=answer, headers=headers)
        return web.Response(status=status, text=json.dumps(answer), content_type="application/json", headers=headers)
