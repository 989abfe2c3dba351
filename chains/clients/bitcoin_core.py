"""Bulk UTXO checks against a Bitcoin Core node: ``scantxoutset`` over many descriptors.

One ``scantxoutset "start"`` call scans the whole UTXO set once for every ``addr(...)``
and ``raw(...)`` descriptor given. That is how a pipeline checks thousands of addresses or
P2PK scripts for unspent value without an indexer. The scan sees unspent outputs only, not
history. It cannot tell a spent-from address (key revealed) from a fresh one, so this is
not a ``ChainClient``; exposure comes from Esplora.

Transport: our own JSON-RPC over the shared ``Transport``, not the PyPI ``bitcoinrpc``
package (0.7.0). That package decodes answers with orjson into floats, has no retries or
breaker, and takes its own client. BTC amounts must become satoshis exactly, so they are
parsed as ``Decimal``. RPC errors map to exception classes by code, as in
python-bitcoinlib's ``rpc.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import httpx

from chains.clients.jsonrpc import STANDARD_ERRORS, JsonRpc, RpcError
from chains.clients.transport import Timing, Transport
from chains.codecs.bitcoin import BitcoinAddress
from chains.endpoints import EndpointConfig, EnvironmentEndpoints
from chains.errors import MalformedChainData

SATOSHI_PER_BTC = Decimal(100_000_000)


class MiscError(RpcError):
    """-1 RPC_MISC_ERROR: a generic failure (e.g. ``scantxoutset`` aborted)."""


class TypeMismatch(RpcError):
    """-3 RPC_TYPE_ERROR: a parameter has the wrong type."""


class InvalidAddressOrKey(RpcError):
    """-5 RPC_INVALID_ADDRESS_OR_KEY: an address or descriptor was refused."""


class InvalidParameter(RpcError):
    """-8 RPC_INVALID_PARAMETER: e.g. "Scan already in progress" (one scan at a time per node)."""


class DatabaseError(RpcError):
    """-20 RPC_DATABASE_ERROR: the node's UTXO database failed."""


class DeserializationError(RpcError):
    """-22 RPC_DESERIALIZATION_ERROR: the node could not decode a parameter."""


class InWarmup(RpcError):
    """-28 RPC_IN_WARMUP: the node is still starting; try again later."""


#: Bitcoin Core's RPC error codes (src/rpc/protocol.h) and the standard JSON-RPC ones.
CORE_ERRORS: Mapping[int, type[RpcError]] = MappingProxyType(
    {
        **STANDARD_ERRORS,
        -1: MiscError,
        -3: TypeMismatch,
        -5: InvalidAddressOrKey,
        -8: InvalidParameter,
        -20: DatabaseError,
        -22: DeserializationError,
        -28: InWarmup,
    }
)


@dataclass(frozen=True, slots=True)
class ScriptUtxos:
    """The unspent outputs paying one script: how many, and their total in satoshis."""

    count: int
    satoshis: int


@dataclass(frozen=True, slots=True)
class UtxoScan:
    """A ``scantxoutset`` result: the block it reflects and the UTXOs per scanned script.

    Every scanned script has an entry (zero outputs when nothing is unspent).
    """

    height: int
    best_block: str
    by_script: Mapping[bytes, ScriptUtxos]
    total_satoshis: int


def to_satoshis(amount: Any, what: str) -> int:
    """A BTC amount (decoded as ``Decimal`` or ``int``) as an exact integer of satoshis."""
    if isinstance(amount, bool) or not isinstance(amount, Decimal | int):
        raise MalformedChainData(f"{what}: amount must be a number, got {amount!r:.40}")
    satoshis = Decimal(amount) * SATOSHI_PER_BTC
    if satoshis != satoshis.to_integral_value() or satoshis < 0:
        raise MalformedChainData(f"{what}: {amount} BTC is not a whole number of satoshis")
    return int(satoshis)


def descriptor(target: BitcoinAddress | bytes) -> str:
    """The output descriptor of an address (``addr(...)``) or a raw script (``raw(hex)``)."""
    return f"raw({target.hex()})" if isinstance(target, bytes) else f"addr({target})"


class BitcoinCoreClient:
    """JSON-RPC client of one Bitcoin Core node (credentials in the URL's userinfo)."""

    def __init__(
        self, endpoint: EndpointConfig, http: httpx.AsyncClient | None = None, *, timing: Timing | None = None
    ) -> None:
        """Core answers RPC errors with HTTP 404/500 and a JSON error body; those are
        answers, not outages, so they are not retried."""
        self.rpc = JsonRpc(
            Transport(endpoint, http, "bitcoin Core RPC", timing), errors=CORE_ERRORS, accept=frozenset({200, 404, 500})
        )

    @classmethod
    def from_endpoints(
        cls, endpoints: EnvironmentEndpoints, http: httpx.AsyncClient | None = None, timing: Timing | None = None
    ) -> BitcoinCoreClient | None:
        """The environment's Core client, or None when no ``QDAY_BITCOIN_RPC_URL`` is configured."""
        if endpoints.bitcoin_rpc is None:
            return None
        return cls(endpoints.bitcoin_rpc, http, timing=timing)

    async def scan_utxos(self, targets: Sequence[BitcoinAddress | bytes]) -> UtxoScan:
        """Scan the UTXO set once for every address and raw script in ``targets``.

        Raises ``InvalidParameter`` when another scan is running on the node, and other
        ``RpcError`` subclasses by code.
        """
        scripts = [t if isinstance(t, bytes) else t.script_pubkey for t in targets]
        result = await self.rpc.call("scantxoutset", ["start", [descriptor(t) for t in targets]])
        what = f"{self.rpc.transport.label} scantxoutset"
        if not isinstance(result, Mapping) or not isinstance(result.get("unspents"), list):
            raise MalformedChainData(f"{what}: no unspents list in {result!r:.120}")
        if result.get("success") is False:
            raise MiscError(
                f"{what}: scan did not complete", code=-1, rpc_message="success=false", method="scantxoutset"
            )
        totals = {script: [0, 0] for script in scripts}
        for utxo in result["unspents"]:
            try:
                script = bytes.fromhex(utxo["scriptPubKey"])
            except (KeyError, TypeError, ValueError):
                raise MalformedChainData(f"{what}: unspent without a hex scriptPubKey: {utxo!r:.120}") from None
            if script not in totals:
                raise MalformedChainData(f"{what}: unspent pays a script that was not asked for ({script.hex()})")
            totals[script][0] += 1
            totals[script][1] += to_satoshis(utxo.get("amount"), what)
        height, best = result.get("height"), result.get("bestblock")
        if not isinstance(height, int) or not isinstance(best, str):
            raise MalformedChainData(f"{what}: missing height or bestblock")
        return UtxoScan(
            height=height,
            best_block=best,
            by_script=MappingProxyType({s: ScriptUtxos(n, sats) for s, (n, sats) in totals.items()}),
            total_satoshis=to_satoshis(result.get("total_amount"), what),
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this client created it."""
        await self.rpc.transport.aclose()
