"""A loopback Bitcoin Core JSON-RPC server for tests: a mutable chain served by height and hash.

No Bitcoin Core binary can run here, so client tests talk to this server. It runs on
127.0.0.1 (a free port) in the test's event loop with aiohttp, as ``tests.chain_clients.
loopback`` does, and replays Core's wire behaviour as its source has it:

* ``src/httprpc.cpp`` (``HTTPReq_JSONRPC``): POST only (405 otherwise); HTTP basic auth
  (401 with ``WWW-Authenticate: Basic realm="jsonrpc"``, no body); a batch is always HTTP
  200 with one reply per call; a single call's error is HTTP 500 (400 for -32600, 404 for
  -32601) with ``{"result": null, "error": …, "id": …}`` unless, from Core 28, the request
  said ``"jsonrpc": "2.0"``: then it is HTTP 200 with ``{"jsonrpc": "2.0", "error": …, "id": …}``.
* ``src/rpc/request.cpp`` (``JSONRPCReplyObj``, ``JSONRPCRequest::parse``): 1.0 replies
  carry both ``result`` and ``error`` (one null), 2.0 replies only the one that applies;
  a ``jsonrpc`` other than "1.0"/"2.0" is -32600 "JSON-RPC version not supported".
* ``src/rpc/blockchain.cpp``: ``getblockhash`` -8 "Block height out of range";
  ``getblock`` -5 "Block not found" for an unknown hash (stale blocks of a lost branch are
  still found: Core looks the hash up in its block index, not in the active chain),
  ``ParseHashV``'s -8 messages for a malformed hash, and hex for verbosity 0.

Not modelled: JSON-RPC 2.0 notifications (a call without id), Core's 250 ms pause after a
wrong password, verbosity 1-3 of ``getblock`` (answered with an error), argument type
errors, pruning. With no chain set the node answers -28 "Loading block index…", as Core
does while it starts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from aiohttp import web

#: Core's HTTP status for a single (1.0) call's error, by code (``JSONErrorReply``).
_ERROR_STATUS = {-32600: 400, -32601: 404}
_DIFF1_TARGET = 0xFFFF << 208
_MEDIAN_SPAN = 11


class RpcFailure(Exception):
    """A Core RPC error: raised by a method, written as the reply's error object."""

    def __init__(self, code: int, message: str) -> None:
        """``code`` and ``message`` as Core's ``JSONRPCError`` has them."""
        super().__init__(message)
        self.code = code
        self.message = message

    def error(self) -> dict[str, Any]:
        """The JSON-RPC error object."""
        return {"code": self.code, "message": self.message}


def block_hash(raw: bytes) -> str:
    """The display-order hash of a serialized block (double SHA-256 of its 80-byte header)."""
    return hashlib.sha256(hashlib.sha256(raw[:80]).digest()).digest()[::-1].hex()


def _target(bits: int) -> int:
    return (bits & 0xFFFFFF) << (8 * ((bits >> 24) - 3))


def _header_field(raw: bytes, offset: int) -> int:
    return int.from_bytes(raw[offset : offset + 4], "little")


class CoreRpcServer:
    """The server; ``url`` carries the credentials, as ``QDAY_BITCOIN_RPC_URL`` does.

    ``chain`` is Core's chain name ("main", "test", "testnet4", "signet", "regtest");
    ``major`` the Core version whose error replies to 2.0 requests are modelled (28 and
    later: HTTP 200; earlier: 500/404/400). Use it as ``async with CoreRpcServer() as node``.
    """

    def __init__(
        self, *, chain: str = "regtest", major: int = 28, user: str = "qday", password: str = "rpc-pa55word"
    ) -> None:
        """Nothing is served until ``set_chain``; the server starts in ``__aenter__``."""
        self.chain = chain
        self.major = major
        self._credentials = f"{user}:{password}".encode()
        self._user, self._password = user, password
        self._active: dict[int, str] = {}
        self._known: dict[str, bytes] = {}
        self._substitutes: dict[str, bytes] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.http_requests = 0
        self.posts: list[Any] = []
        self.calls: Counter[str] = Counter()

    @property
    def url(self) -> str:
        """The RPC URL with the credentials in its userinfo."""
        return f"http://{self._user}:{self._password}@127.0.0.1:{self.port}"

    @property
    def bare_url(self) -> str:
        """The RPC URL without credentials."""
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> CoreRpcServer:
        """Listen on a free loopback port."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # started, so it has sockets
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        """Stop listening and close open connections."""
        if self._runner is not None:
            await self._runner.cleanup()

    # --- the chain ---------------------------------------------------------------------

    def set_chain(self, blocks: Sequence[bytes] | Mapping[int, bytes]) -> None:
        """Make ``blocks`` the active chain: a sequence is heights 0, 1, …; a mapping gives
        the heights (a height it lacks answers like one above the tip). Blocks served
        before stay known by hash, like a stale branch after a reorg."""
        by_height = dict(blocks) if isinstance(blocks, Mapping) else dict(enumerate(blocks))
        self._active = {}
        for height, raw in sorted(by_height.items()):
            self._active[height] = block_hash(raw)
            self._known[self._active[height]] = raw
        self._substitutes.clear()

    def substitute(self, hash_: str, raw: bytes) -> None:
        """Answer ``getblock hash_`` with ``raw`` (another block, or an altered copy)."""
        self._substitutes[hash_] = raw

    @property
    def tip_height(self) -> int:
        """Height of the active chain's best block."""
        return max(self._active)

    # --- counters ---------------------------------------------------------------------

    @property
    def post_count(self) -> int:
        """Authorised POSTs received (a batch is one)."""
        return len(self.posts)

    # --- HTTP -------------------------------------------------------------------------

    def _authorized(self, header: str | None) -> bool:
        if header is None or not header.startswith("Basic "):
            return False
        try:
            return base64.b64decode(header[6:].strip(), validate=True) == self._credentials
        except binascii.Error:
            return False

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.http_requests += 1
        if request.method != "POST":
            return web.Response(status=405, text="JSONRPC server handles only POST requests")
        if not self._authorized(request.headers.get("Authorization")):
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="jsonrpc"'})
        try:
            body = json.loads(await request.read())
        except ValueError:
            return self._error_reply(RpcFailure(-32700, "Parse error"), None)
        self.posts.append(body)
        if isinstance(body, list):
            return self._write(200, [self._batch_item(call) for call in body])
        if not isinstance(body, dict):
            return self._error_reply(RpcFailure(-32700, "Top-level object parse error"), None)
        call_id = body.get("id")
        try:
            version2 = self._version2(body)
        except RpcFailure as failure:
            return self._error_reply(failure, call_id, version2=False)
        try:
            method, params = self._parse(body)
        except RpcFailure as failure:
            return self._error_reply(failure, call_id, version2=version2)
        try:
            result = self._execute(method, params)
        except RpcFailure as failure:
            if version2:  # Core 28+ catches a 2.0 call's error and answers it with HTTP 200
                return self._write(200, self._reply(True, call_id, error=failure))
            return self._error_reply(failure, call_id, version2=False)
        return self._write(200, self._reply(version2, call_id, result=result))

    def _version2(self, call: Mapping[str, Any]) -> bool:
        """True for a 2.0 request on Core 28+ (older Core ignores the ``jsonrpc`` field)."""
        if self.major < 28 or call.get("jsonrpc") is None:
            return False
        if call["jsonrpc"] not in ("1.0", "2.0"):
            raise RpcFailure(-32600, "JSON-RPC version not supported")
        return bool(call["jsonrpc"] == "2.0")

    @staticmethod
    def _parse(call: Mapping[str, Any]) -> tuple[str, list[Any]]:
        """Method and positional parameters (``JSONRPCRequest::parse``; named ones are not modelled)."""
        method, params = call.get("method"), call.get("params")
        if method is None:
            raise RpcFailure(-32600, "Missing method")
        if not isinstance(method, str):
            raise RpcFailure(-32600, "Method must be a string")
        if params is not None and not isinstance(params, list):
            raise RpcFailure(-32600, "Params must be an array or object")
        return method, params or []

    def _batch_item(self, call: Any) -> dict[str, Any]:
        """One slot of a batch reply: every failure stays in its slot."""
        if not isinstance(call, dict):
            return self._reply(False, None, error=RpcFailure(-32600, "Invalid Request object"))
        version2 = False
        try:
            version2 = self._version2(call)
            return self._reply(version2, call.get("id"), result=self._execute(*self._parse(call)))
        except RpcFailure as failure:
            return self._reply(version2, call.get("id"), error=failure)

    @staticmethod
    def _reply(version2: bool, call_id: Any, *, result: Any = None, error: RpcFailure | None = None) -> dict[str, Any]:
        """``JSONRPCReplyObj``: 2.0 replies hold only result or error; 1.0 replies both."""
        reply: dict[str, Any] = {"jsonrpc": "2.0"} if version2 else {}
        if error is None:
            reply["result"] = result
            if not version2:
                reply["error"] = None
        else:
            if not version2:
                reply["result"] = None
            reply["error"] = error.error()
        reply["id"] = call_id
        return reply

    def _error_reply(self, failure: RpcFailure, call_id: Any, *, version2: bool = False) -> web.Response:
        """``JSONErrorReply``: an error as an HTTP error status (a 1.0 call's, or a request
        refused before its method ran)."""
        return self._write(_ERROR_STATUS.get(failure.code, 500), self._reply(version2, call_id, error=failure))

    @staticmethod
    def _write(status: int, body: Any) -> web.Response:
        text = json.dumps(body, separators=(",", ":")) + "\n"
        return web.Response(status=status, text=text, content_type="application/json")

    # --- methods ------------------------------------------------------------------------

    def _execute(self, method: str, params: list[Any]) -> Any:
        self.calls[method] += 1
        if not self._active:
            raise RpcFailure(-28, "Loading block index…")
        if method == "getblockchaininfo":
            return self._blockchain_info()
        if method == "getblockcount":
            return self.tip_height
        if method == "getbestblockhash":
            return self._active[self.tip_height]
        if method == "getblockhash":
            height = params[0]
            if height not in self._active:
                raise RpcFailure(-8, "Block height out of range")
            return self._active[height]
        if method == "getblock":
            return self._get_block(params)
        raise RpcFailure(-32601, "Method not found")

    def _get_block(self, params: Sequence[Any]) -> str:
        hash_ = params[0]
        if len(hash_) != 64:
            raise RpcFailure(-8, f"blockhash must be of length 64 (not {len(hash_)}, for '{hash_}')")
        try:
            bytes.fromhex(hash_)
        except ValueError:
            raise RpcFailure(-8, f"blockhash must be hexadecimal string (not '{hash_}')") from None
        raw = self._substitutes.get(hash_.lower(), self._known.get(hash_.lower()))
        if raw is None:
            raise RpcFailure(-5, "Block not found")
        verbosity = params[1] if len(params) > 1 else 1
        if verbosity not in (0, False):
            raise RpcFailure(-8, "this loopback node serves getblock with verbosity 0 only")
        return raw.hex()

    def _blockchain_info(self) -> dict[str, Any]:
        """``getblockchaininfo`` with Core 28's fields (work and difficulty from the headers)."""
        heights = sorted(self._active)
        tip = self._known[self._active[heights[-1]]]
        times = sorted(_header_field(self._known[self._active[h]], 68) for h in heights[-_MEDIAN_SPAN:])
        work = sum((1 << 256) // (_target(_header_field(self._known[self._active[h]], 72)) + 1) for h in heights)
        return {
            "chain": self.chain,
            "blocks": heights[-1],
            "headers": heights[-1],
            "bestblockhash": self._active[heights[-1]],
            "difficulty": _DIFF1_TARGET / _target(_header_field(tip, 72)),
            "time": _header_field(tip, 68),
            "mediantime": times[len(times) // 2],
            "verificationprogress": 1,
            "initialblockdownload": False,
            "chainwork": f"{work:064x}",
            "size_on_disk": sum(len(self._known[self._active[h]]) for h in heights),
            "pruned": False,
            "warnings": [],
        }
