"""Loopback upstreams for the family-scan benchmark: the 15 EVM chains and Tron, each slow by L.

Every EVM chain gets its own JSON-RPC server (its own port, as real providers are separate
hosts) answering single calls and batches: ``eth_chainId`` with the chain's EIP-155 id,
``eth_blockNumber``, ``eth_getBalance`` (a funded account), ``eth_getTransactionCount``
(0: the key has not signed, so no key-recovery lookups follow), ``eth_getCode`` (``0x``:
not a contract), and ``eth_call`` for the Chainlink aggregator reads a scan makes for the
USD price (``decimals()``, ``latestRoundData()`` with a current ``updatedAt``). Tron gets a
full node (``POST /wallet/getaccount``: an activated account, the shape of the shared
conformance vector ``tron_wallet_getaccount.json``) and TronGrid
(``GET /v1/accounts/{address}/transactions``: none sent). Every HTTP request, batch or
not, waits ``latency`` seconds before it is answered.

The servers run on 127.0.0.1 in a background thread with its own event loop, so the
measuring client (the bench's main thread) and the qday server (a subprocess) stay
separate: ``with LoopbackChains(0.05) as chains: env = chains.env()``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from chains.registry import CHAINS, EVM_CHAINS

BLOCK_HEIGHT = 20_000_000
BALANCE_WEI = 3 * 10**18
TRON_BALANCE_SUN = 1_793_227_200
PRICE_DECIMALS = 8
PRICE_ANSWER = 3_000 * 10**PRICE_DECIMALS

_DECIMALS = "0x313ce567"  # decimals()
_LATEST_ROUND_DATA = "0xfeaf968c"  # latestRoundData()


def _words(*values: int) -> str:
    """ABI-encode unsigned integers as 32-byte words."""
    return "0x" + "".join(f"{v:064x}" for v in values)


def _eth_call(params: list[Any]) -> str:
    call = params[0] if params and isinstance(params[0], Mapping) else {}
    data = str(call.get("data") or call.get("input") or "")
    if data.startswith(_DECIMALS):
        return _words(PRICE_DECIMALS)
    if data.startswith(_LATEST_ROUND_DATA):
        now = int(time.time())
        return _words(1, PRICE_ANSWER, now, now, 1)
    raise LookupError(f"eth_call of an unknown function {data[:10]!r}")


def _evm_methods(chain_id: int) -> dict[str, Callable[[list[Any]], Any]]:
    return {
        "eth_chainId": lambda _: hex(chain_id),
        "eth_blockNumber": lambda _: hex(BLOCK_HEIGHT),
        "eth_getBalance": lambda _: hex(BALANCE_WEI),
        "eth_getTransactionCount": lambda _: "0x0",
        "eth_getCode": lambda _: "0x",
        "eth_call": _eth_call,
    }


def _tron_account(address: str) -> dict[str, Any]:
    """An activated account (fields as in the conformance vector), for ``address``."""
    return {
        "address": address,
        "balance": TRON_BALANCE_SUN,
        "create_time": 1776933207000,
        "latest_opration_time": 1777444809000,
        "free_net_usage": 441,
        "latest_consume_free_time": 1777431471000,
        "net_window_size": 28800000,
        "net_window_optimized": True,
        "owner_permission": {
            "permission_name": "owner",
            "threshold": 1,
            "keys": [{"address": address, "weight": 1}],
        },
    }


class LoopbackChains:
    """The 17 loopback upstreams (15 EVM JSON-RPC servers, a Tron full node, TronGrid) in a
    background thread; ``env()`` points a qday server at them, ``requests`` counts the HTTP
    requests each received and ``unknown`` the calls nothing here answers."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.urls: dict[str, str] = {}
        self.requests: Counter[str] = Counter()
        self.unknown: Counter[str] = Counter()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="loopback-chains", daemon=True)

    def env(self) -> dict[str, str]:
        """``QDAY_<CHAIN>_RPC_URL`` of each EVM chain, ``QDAY_TRON_API_URL`` and ``QDAY_TRONGRID_URL``."""
        env = {f"QDAY_{chain.value.upper()}_RPC_URL": self.urls[chain.value] for chain in EVM_CHAINS}
        env["QDAY_TRON_API_URL"] = self.urls["tron"]
        env["QDAY_TRONGRID_URL"] = self.urls["trongrid"]
        return env

    # --- the servers (in the background thread's loop) ----------------------------------

    def _rpc_app(self, name: str, chain_id: int) -> web.Application:
        methods = _evm_methods(chain_id)

        def answer(call: Any) -> dict[str, Any]:
            call = call if isinstance(call, Mapping) else {}
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": call.get("id")}
            method = str(call.get("method", ""))
            try:
                reply["result"] = methods[method](list(call.get("params") or []))
            except (KeyError, LookupError):
                self.unknown[f"{name} {method}"] += 1
                reply["error"] = {"code": -32601, "message": f"the method {method} does not exist/is not available"}
            return reply

        async def handle(request: web.Request) -> web.Response:
            self.requests[name] += 1
            body = await request.json()
            await asyncio.sleep(self.latency)
            if isinstance(body, list):
                return web.json_response([answer(call) for call in body])
            return web.json_response(answer(body))

        app = web.Application()
        app.router.add_post("/", handle)
        return app

    def _tron_app(self) -> web.Application:
        async def getaccount(request: web.Request) -> web.Response:
            self.requests["tron"] += 1
            body = await request.json()
            await asyncio.sleep(self.latency)
            return web.json_response(_tron_account(str(body.get("address", ""))))

        app = web.Application()
        app.router.add_post("/wallet/getaccount", getaccount)
        return app

    def _trongrid_app(self) -> web.Application:
        async def transactions(request: web.Request) -> web.Response:
            self.requests["trongrid"] += 1
            await asyncio.sleep(self.latency)
            return web.json_response(
                {"data": [], "success": True, "meta": {"at": int(time.time() * 1000), "page_size": 0}}
            )

        app = web.Application()
        app.router.add_get("/v1/accounts/{address}/transactions", transactions)
        return app

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        apps = {chain.value: self._rpc_app(chain.value, CHAINS[chain].evm_chain_id or 0) for chain in EVM_CHAINS}
        apps["tron"] = self._tron_app()
        apps["trongrid"] = self._trongrid_app()
        runners = []
        try:
            for name, app in apps.items():
                runner = web.AppRunner(app, access_log=None)
                await runner.setup()
                runners.append(runner)
                site = web.TCPSite(runner, "127.0.0.1", 0)
                await site.start()
                port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # started above
                self.urls[name] = f"http://127.0.0.1:{port}"
            self._ready.set()
            await self._stop.wait()
        finally:
            for runner in runners:
                await runner.cleanup()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:
            self._error = exc  # for the thread that waits for the servers
            raise
        finally:
            self._ready.set()
            self._loop.close()

    # --- lifecycle (from the bench's thread) ---------------------------------------------

    def __enter__(self) -> LoopbackChains:
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None or len(self.urls) != len(EVM_CHAINS) + 2:
            self.__exit__()
            raise RuntimeError(f"loopback chains did not start: {self._error!r}")
        return self

    def __exit__(self, *_: object) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
