"""A Bitcoin Core node over JSON-RPC: bulk UTXO checks and the blocks of the chain tip.

One ``scantxoutset "start"`` call scans the whole UTXO set once for every ``addr(...)``
and ``raw(...)`` descriptor given. That is how a pipeline checks thousands of addresses or
P2PK scripts for unspent value without an indexer. The scan sees unspent outputs only, not
history. It cannot tell a spent-from address (key revealed) from a fresh one, so this is
not a ``ChainClient``; exposure comes from Esplora.

The block source (``tip``, ``block_hashes``, ``raw_blocks``) feeds the chain-wide key
exposure index past the end of the block files: the active chain's height and hash, the
hashes of given heights, and the blocks themselves in consensus serialization. A node or
a proxy in front of it must not be able to pass off other data as the block asked for, so
every block is checked against the hash it was asked by (header hash, Merkle root, witness
commitment) before it is returned.

Answers of Bitcoin Core 28+ to our JSON-RPC 2.0 requests carry errors inside HTTP 200;
older nodes (and 1.0 requests) send them with HTTP 404/500 (``src/httprpc.cpp``). Both
reach ``JsonRpc`` as error objects. A batch is always answered with HTTP 200, one slot
per call.

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
from typing import Any, TypeGuard

import httpx

from chains.bitcoin.tx import Block, merkle_root, parse_block
from chains.clients.jsonrpc import STANDARD_ERRORS, Call, JsonRpc, RpcError
from chains.clients.transport import Timing, Transport
from chains.codecs.bitcoin import BitcoinAddress
from chains.endpoints import EndpointConfig, EnvironmentEndpoints
from chains.errors import MalformedChainData
from pqc.hashes import sha256d

SATOSHI_PER_BTC = Decimal(100_000_000)

#: ``getblockchaininfo``'s ``chain`` (Core's ``ChainTypeToString``, src/util/chaintype.cpp) →
#: our network names, the keys of ``chains.bitcoin.blockfiles.MAGIC``.
CORE_CHAINS: Mapping[str, str] = MappingProxyType(
    {"main": "mainnet", "test": "testnet3", "testnet4": "testnet4", "signet": "signet", "regtest": "regtest"}
)

DEFAULT_BLOCK_BATCH = 8
"""Blocks asked per POST by ``raw_blocks``. ``getblock <hash> 0`` answers a block as hex,
twice its size: a full 4 MB block is 8 MB of JSON text. The node builds the whole answer
in memory before sending it, and we hold the body, its decoded strings and the bytes at
once: eight full blocks are 64 MB of hex and about 160 MB at our peak; typical 1.5-2 MB
mainnet blocks about a third of that."""

_HEADER_SIZE = 80
_HASH_HEX = 64
_WITNESS_COMMITMENT = bytes.fromhex("6a24aa21a9ed")  # OP_RETURN, push 36, BIP-141 tag
_COMMITMENT_SCRIPT_SIZE = 38


class MiscError(RpcError):
    """-1 RPC_MISC_ERROR: a generic failure (e.g. ``scantxoutset`` aborted)."""


class TypeMismatch(RpcError):
    """-3 RPC_TYPE_ERROR: a parameter has the wrong type."""


class InvalidAddressOrKey(RpcError):
    """-5 RPC_INVALID_ADDRESS_OR_KEY: an address or descriptor was refused, or ``getblock``'s
    "Block not found" (the node has never seen that hash)."""


BlockNotFound = InvalidAddressOrKey
"""The name ``raw_blocks`` callers catch for -5 "Block not found" (the same class: Core
reports both meanings with one code, and the table maps codes)."""


class InvalidParameter(RpcError):
    """-8 RPC_INVALID_PARAMETER: e.g. "Scan already in progress" (one scan at a time per node),
    ``getblockhash``'s "Block height out of range", or a block hash that is not 64 hex digits."""


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


@dataclass(frozen=True, slots=True)
class ChainTip:
    """The node's active chain: height and hash of its best block, and its network
    (one of ``chains.bitcoin.blockfiles.MAGIC``'s names)."""

    height: int
    hash: str
    network: str


def _is_block_hash(value: object) -> TypeGuard[str]:
    if not isinstance(value, str) or len(value) != _HASH_HEX:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


def verify_block(raw: bytes, block_hash: str) -> Block:
    """Parse ``raw`` and check that it is the block whose hash is ``block_hash``.

    The header must hash to ``block_hash``, the transactions must give the header's Merkle
    root with no duplicate txid (the CVE-2012-2459 mutation, which keeps the root), and when
    any transaction carries a witness the coinbase's BIP-141 commitment must match the
    wtxids. So nothing in the block (transactions, scripts, witnesses, where spends reveal
    their keys) can be changed while keeping its hash. ``MalformedChainData`` otherwise.
    The hash itself is trusted from the caller: linking blocks by ``prev_block`` and judging
    proof of work are the caller's part.
    """
    if len(raw) < _HEADER_SIZE or sha256d(raw[:_HEADER_SIZE])[::-1].hex() != block_hash.lower():
        raise MalformedChainData(f"block {block_hash}: the data sent is another block")
    block = parse_block(raw)
    txids = [tx.txid for tx in block.transactions]
    if len(set(txids)) != len(txids):
        raise MalformedChainData(f"block {block_hash}: a transaction is repeated (mutated block)")
    if merkle_root(txids) != block.header.merkle_root:
        raise MalformedChainData(f"block {block_hash}: the transactions do not give the header's Merkle root")
    if any(tx.has_witness for tx in block.transactions):
        _check_witness_commitment(block, block_hash)
    return block


def _check_witness_commitment(block: Block, block_hash: str) -> None:
    """BIP-141: the last coinbase output tagged ``aa21a9ed`` commits to the wtxids' root."""
    coinbase = block.transactions[0]
    commitments = [
        out.script_pubkey[len(_WITNESS_COMMITMENT) : _COMMITMENT_SCRIPT_SIZE]
        for out in coinbase.outputs
        if len(out.script_pubkey) >= _COMMITMENT_SCRIPT_SIZE and out.script_pubkey.startswith(_WITNESS_COMMITMENT)
    ]
    reserved = coinbase.inputs[0].witness if coinbase.inputs else ()
    if not commitments or len(reserved) != 1 or len(reserved[0]) != 32:
        raise MalformedChainData(f"block {block_hash}: witness data without a witness commitment")
    wtxids = ["00" * 32] + [tx.wtxid for tx in block.transactions[1:]]
    root = bytes.fromhex(merkle_root(wtxids))[::-1]
    if sha256d(root + reserved[0]) != commitments[-1]:
        raise MalformedChainData(f"block {block_hash}: the witnesses do not match the witness commitment")


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
        self,
        endpoint: EndpointConfig,
        http: httpx.AsyncClient | None = None,
        *,
        timing: Timing | None = None,
        max_batch: int = 1000,
    ) -> None:
        """Core before 28 answers RPC errors with HTTP 404/500 and a JSON error body; those
        are answers, not outages, so they are not retried. ``max_batch`` caps the calls per
        POST (``JsonRpc``); POSTs of one batch go out concurrently, each taking a slot of the
        node's ``-rpcworkqueue``."""
        self.rpc = JsonRpc(
            Transport(endpoint, http, "bitcoin Core RPC", timing),
            errors=CORE_ERRORS,
            max_batch=max_batch,
            accept=frozenset({200, 404, 500}),
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

    async def tip(self) -> ChainTip:
        """Height and hash of the node's best block and its network (one ``getblockchaininfo``).

        The height is ``blocks`` (blocks validated), not ``headers``: while the node syncs,
        headers run ahead of the blocks it can serve.
        """
        info = await self.rpc.call("getblockchaininfo")
        what = f"{self.rpc.transport.label} getblockchaininfo"
        if not isinstance(info, Mapping):
            raise MalformedChainData(f"{what}: answer is not an object")
        height, best, chain = info.get("blocks"), info.get("bestblockhash"), info.get("chain")
        if isinstance(height, bool) or not isinstance(height, int) or height < 0 or not _is_block_hash(best):
            raise MalformedChainData(f"{what}: no valid blocks/bestblockhash in {info!r:.160}")
        if not isinstance(chain, str) or chain not in CORE_CHAINS:
            raise MalformedChainData(f"{what}: unknown chain {chain!r:.40}")
        return ChainTip(height=height, hash=best.lower(), network=CORE_CHAINS[chain])

    async def block_hashes(self, heights: Sequence[int]) -> list[str]:
        """The active chain's block hashes at ``heights``, in order, from batched ``getblockhash``
        calls (one POST per ``JsonRpc.max_batch`` heights).

        A height above the tip (or negative) raises ``InvalidParameter`` (-8 "Block height
        out of range"); the first failed call, in the order asked, is raised. The hashes are
        those of the chain at the moment each call ran: after a reorg they change, so compare
        them with the hashes stored before.
        """
        results = await self.rpc.batch([Call("getblockhash", [height]) for height in heights])
        hashes = []
        for height, result in zip(heights, results, strict=True):
            if isinstance(result, RpcError):
                raise result
            if not _is_block_hash(result):
                label = self.rpc.transport.label
                raise MalformedChainData(f"{label}: getblockhash {height}: not a block hash: {result!r:.80}")
            hashes.append(result.lower())
        return hashes

    async def raw_blocks(self, hashes: Sequence[str], *, batch_size: int = DEFAULT_BLOCK_BATCH) -> list[bytes]:
        """The blocks with ``hashes`` in consensus serialization, in order (``getblock <hash> 0``).

        Calls go out in batches of ``batch_size`` blocks (at most ``max_batch``), one batch
        after the other: at most one batch of hex text is in memory at a time (see
        ``DEFAULT_BLOCK_BATCH``) and one POST takes one slot of the node's ``-rpcworkqueue``
        (default 64, 16 in older releases; a full queue answers 503 "Work queue depth
        exceeded", which the transport retries). The returned blocks are all in memory: ask
        for a window of hashes at a time.

        Each block is checked with ``verify_block``: another block, or a changed transaction
        or witness, raises ``MalformedChainData``. An unknown hash raises ``BlockNotFound``
        (-5); a pruned node raises ``MiscError`` (-1 "Block not available (pruned data)").
        Stale blocks (of a branch that lost a reorg) are still served by hash: Core looks
        the hash up in its block index, not in the active chain.
        """
        return [raw for raw, _ in await self._fetch_blocks(hashes, batch_size)]

    async def blocks(self, hashes: Sequence[str], *, batch_size: int = DEFAULT_BLOCK_BATCH) -> list[Block]:
        """``raw_blocks`` parsed: the check already parses each block, so callers that need the
        transactions (the exposure index) do not parse them twice."""
        return [block for _, block in await self._fetch_blocks(hashes, batch_size)]

    async def _fetch_blocks(self, hashes: Sequence[str], batch_size: int) -> list[tuple[bytes, Block]]:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        blocks: list[tuple[bytes, Block]] = []
        for start in range(0, len(hashes), batch_size):
            chunk = hashes[start : start + batch_size]
            results = await self.rpc.batch([Call("getblock", [block_hash, 0]) for block_hash in chunk])
            for block_hash, result in zip(chunk, results, strict=True):
                blocks.append(self._block(block_hash, result))
        return blocks

    def _block(self, block_hash: str, result: Any) -> tuple[bytes, Block]:
        if isinstance(result, RpcError):
            raise result
        try:
            raw = bytes.fromhex(result)
        except (TypeError, ValueError):
            raise MalformedChainData(
                f"{self.rpc.transport.label}: getblock {block_hash}: not a hex string: {result!r:.80}"
            ) from None
        try:
            return raw, verify_block(raw, block_hash)
        except MalformedChainData as exc:
            raise MalformedChainData(f"{self.rpc.transport.label}: getblock: {exc}") from None

    async def aclose(self) -> None:
        """Close the HTTP client if this client created it."""
        await self.rpc.transport.aclose()
