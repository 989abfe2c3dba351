"""An ``AsyncWeb3`` provider that sends through a ``Transport``.

web3's own ``AsyncHTTPProvider`` opens an aiohttp session with its own retry rules. This
provider gives ``AsyncWeb3`` (contract ABI encoding and decoding, batches) the same
timeouts, retries, circuit breaker and credential redaction as every other client, over the
shared ``httpx.AsyncClient``.
"""

from __future__ import annotations

from typing import Any, cast

from web3 import AsyncWeb3
from web3.providers.async_base import AsyncJSONBaseProvider
from web3.types import RPCEndpoint, RPCResponse

from chains.clients.transport import Transport


class TransportProvider(AsyncJSONBaseProvider):
    """web3 JSON-RPC requests over a ``Transport`` (answers are web3's raw dictionaries)."""

    def __init__(self, transport: Transport) -> None:
        """Send every request of the ``AsyncWeb3`` instance through ``transport``."""
        super().__init__()
        self.transport = transport

    async def make_request(self, method: RPCEndpoint, params: Any) -> RPCResponse:
        """Send one request; JSON-RPC errors are left in the answer for web3 to raise."""
        reply = await self.transport.post("", self.encode_rpc_request(method, params))
        return cast(RPCResponse, reply.data)

    async def make_batch_request(self, requests: list[tuple[RPCEndpoint, Any]]) -> list[RPCResponse] | RPCResponse:
        """Send a batch in one POST; answers sorted by id (the order web3 expects)."""
        reply = await self.transport.post("", self.encode_batch_rpc_request(requests))
        if isinstance(reply.data, list):
            return sorted(reply.data, key=lambda answer: answer.get("id", -1))
        return cast(RPCResponse, reply.data)


def web3_over(transport: Transport) -> AsyncWeb3[TransportProvider]:
    """An ``AsyncWeb3`` whose requests go through ``transport``."""
    return AsyncWeb3(TransportProvider(transport))
