"""JSON-RPC 2.0 over a ``Transport``: single calls, batches, and errors mapped to classes.

A batch is one HTTP POST carrying many calls (split into POSTs of at most ``max_batch``
calls, sent concurrently). Answers are matched to calls by id, so their order on the wire
does not matter. An error object becomes an ``RpcError`` subclass chosen by its code, in the
manner of python-bitcoinlib's ``rpc.py``. Each dialect (EVM, Bitcoin Core) passes its
own code table. In a batch, each call's error is returned in its slot and the caller decides.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from chains.clients.transport import Transport
from chains.errors import ChainUnavailable, MalformedChainData


class RpcError(ChainUnavailable):
    """The node answered a call with a JSON-RPC error object."""

    def __init__(self, message: str, *, code: int, rpc_message: str, method: str) -> None:
        """Keep the error code and the node's message beside the readable message."""
        super().__init__(message, code=code, rpc_message=rpc_message, method=method)
        self.rpc_code = code
        self.rpc_message = rpc_message


class ParseError(RpcError):
    """-32700: the node could not parse the request."""


class InvalidRequest(RpcError):
    """-32600: not a valid request object (some nodes also use it for oversized batches)."""


class MethodNotFound(RpcError):
    """-32601: the node does not implement the method (e.g. no Otterscan ``ots_`` API)."""


class InvalidParams(RpcError):
    """-32602: the method's parameters were refused."""


class InternalError(RpcError):
    """-32603: the node failed while answering."""


STANDARD_ERRORS: Mapping[int, type[RpcError]] = MappingProxyType(
    {-32700: ParseError, -32600: InvalidRequest, -32601: MethodNotFound, -32602: InvalidParams, -32603: InternalError}
)


class Call(NamedTuple):
    """One method call of a batch (``params`` is a JSON array: list or tuple)."""

    method: str
    params: Sequence[Any]


class JsonRpc:
    """A JSON-RPC 2.0 client for one endpoint (its ``Transport`` does retries and breaking)."""

    def __init__(
        self,
        transport: Transport,
        *,
        errors: Mapping[int, type[RpcError]] = STANDARD_ERRORS,
        max_batch: int = 1000,
        accept: frozenset[int] = frozenset({200}),
    ) -> None:
        """``errors`` maps codes to exception classes; ``max_batch`` caps the calls per POST;
        ``accept`` lists the HTTP statuses that carry JSON-RPC answers (Bitcoin Core sends
        errors with 404/500)."""
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.transport = transport
        self._errors = errors
        self._max_batch = max_batch
        self._accept = accept
        self._ids = itertools.count(1)

    def error(self, method: str, error: object) -> RpcError:
        """The exception for a JSON-RPC error object returned by ``method``."""
        if not isinstance(error, Mapping) or not isinstance(error.get("code"), int):
            raise MalformedChainData(f"{self.transport.label}: malformed error object for {method}: {error!r:.200}")
        code, message = error["code"], str(error.get("message", ""))
        cls = self._errors.get(code, RpcError)
        return cls(
            f"{self.transport.label}: {method} failed with RPC error {code}: {message[:200]}",
            code=code,
            rpc_message=message,
            method=method,
        )

    async def call(self, method: str, params: Sequence[Any] = ()) -> Any:
        """Call one method and return its result, or raise its ``RpcError``."""
        request = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": list(params)}
        reply = await self.transport.post("", request, accept=self._accept)
        answer = reply.data
        if not isinstance(answer, Mapping):
            raise MalformedChainData(f"{self.transport.label}: {method} answer is not a JSON object", method=method)
        if answer.get("error") is not None:
            raise self.error(method, answer["error"])
        if "result" not in answer:
            raise MalformedChainData(f"{self.transport.label}: {method} answer has neither result nor error")
        return answer["result"]

    async def batch(self, calls: Sequence[Call]) -> list[Any]:
        """Send ``calls`` in as few POSTs as ``max_batch`` allows; results in call order.

        A failed call's slot holds its ``RpcError`` (not raised). A whole batch refused
        with a single error object raises that error.
        """
        chunks = [calls[i : i + self._max_batch] for i in range(0, len(calls), self._max_batch)]
        parts = await asyncio.gather(*(self._batch_once(chunk) for chunk in chunks))
        return [result for part in parts for result in part]

    async def _batch_once(self, calls: Sequence[Call]) -> list[Any]:
        ids = [next(self._ids) for _ in calls]
        payload = [
            {"jsonrpc": "2.0", "id": id_, "method": c.method, "params": c.params}
            for id_, c in zip(ids, calls, strict=True)
        ]
        reply = await self.transport.post("", payload, accept=self._accept)
        answers = reply.data
        what = f"batch of {len(calls)} ({calls[0].method}…)"
        if isinstance(answers, Mapping) and answers.get("error") is not None:
            raise self.error(what, answers["error"])
        if not isinstance(answers, list):
            raise MalformedChainData(f"{self.transport.label}: {what}: answer is not a JSON array")
        by_id: dict[int, Mapping[str, Any]] = {}
        for answer in answers:
            if isinstance(answer, Mapping) and isinstance(answer.get("id"), int):
                by_id[answer["id"]] = answer
        results = []
        for i, (id_, c) in enumerate(zip(ids, calls, strict=True)):
            answer = by_id.get(id_)
            if answer is None:
                raise MalformedChainData(f"{self.transport.label}: {what}: no answer for call {i} ({c.method})")
            if answer.get("error") is not None:
                results.append(self.error(c.method, answer["error"]))
            elif "result" in answer:
                results.append(answer["result"])
            else:
                raise MalformedChainData(f"{self.transport.label}: {c.method} answer has neither result nor error")
        return results
