"""Bitcoin transactions and blocks from raw consensus bytes (BIP-141/144 segwit aware).

Parsing keeps the exact byte ranges it read, so txid (without witness) and wtxid (with
witness) are hashed straight from the input instead of being re-serialised.
Hashes are given as hex in the usual display order (byte-reversed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

from chains.errors import MalformedChainData
from pqc.ecdsa_messages import compact_size
from pqc.hashes import sha256d

_COINBASE_TXID = "00" * 32
_COINBASE_VOUT = 0xFFFFFFFF
_VARINT_WIDTH = MappingProxyType({0xFD: 2, 0xFE: 4, 0xFF: 8})


@dataclass(frozen=True, slots=True)
class TxIn:
    """A transaction input: the outpoint it spends, its scriptSig, sequence and witness stack."""

    prev_txid: str
    vout: int
    script_sig: bytes
    sequence: int
    witness: tuple[bytes, ...]

    @property
    def is_coinbase(self) -> bool:
        """True for a coinbase input, which spends nothing and reveals no key."""
        return self.prev_txid == _COINBASE_TXID and self.vout == _COINBASE_VOUT


@dataclass(frozen=True, slots=True)
class TxOut:
    """A transaction output: value in satoshi and the scriptPubKey it pays."""

    value: int
    script_pubkey: bytes


@dataclass(frozen=True, slots=True)
class Transaction:
    """A parsed transaction with its txid and wtxid (equal when it carries no witness)."""

    version: int
    inputs: tuple[TxIn, ...]
    outputs: tuple[TxOut, ...]
    locktime: int
    txid: str
    wtxid: str

    @property
    def has_witness(self) -> bool:
        """True when the transaction was serialised with segwit marker, flag and witnesses."""
        return any(txin.witness for txin in self.inputs)


@dataclass(frozen=True, slots=True)
class BlockHeader:
    """The 80-byte block header; ``hash`` is the block hash in display order."""

    version: int
    prev_block: str
    merkle_root: str
    time: int
    bits: int
    nonce: int
    hash: str


@dataclass(frozen=True, slots=True)
class Block:
    """A parsed block: header and transactions in block order."""

    header: BlockHeader
    transactions: tuple[Transaction, ...]


def _display(hash_: bytes) -> str:
    return hash_[::-1].hex()


class _Reader:
    """A cursor over raw bytes that raises ``MalformedChainData`` instead of reading past the end."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            raise MalformedChainData(f"data ends at byte {len(self.data)}, needed {size} bytes at {self.pos}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "little")

    def varint(self) -> int:
        first = self.uint(1)
        if first < 0xFD:
            return first
        return self.uint(_VARINT_WIDTH[first])

    def count(self, min_item_size: int) -> int:
        """A varint item count, refused when the remaining bytes cannot hold that many items."""
        n = self.varint()
        if n * min_item_size > len(self.data) - self.pos:
            raise MalformedChainData(f"count {n} cannot fit in the {len(self.data) - self.pos} bytes left")
        return n

    def var_bytes(self) -> bytes:
        return self.take(self.count(1))


def _read_transaction(r: _Reader) -> Transaction:
    start = r.pos
    version = r.uint(4)
    segwit = r.data[r.pos : r.pos + 2] == b"\x00\x01"
    if segwit:
        r.pos += 2
    body_start = r.pos
    inputs = [(r.take(32), r.uint(4), r.var_bytes(), r.uint(4)) for _ in range(r.count(41))]
    outputs = tuple(TxOut(r.uint(8), r.var_bytes()) for _ in range(r.count(9)))
    body_end = r.pos
    witnesses = [tuple(r.var_bytes() for _ in range(r.count(1))) for _ in inputs] if segwit else [()] * len(inputs)
    if segwit and not any(witnesses):
        raise MalformedChainData("segwit serialisation with every witness empty")
    locktime = r.uint(4)
    end = r.pos
    raw = r.data
    txid = _display(sha256d(raw[start : start + 4] + raw[body_start:body_end] + raw[end - 4 : end]))
    wtxid = _display(sha256d(raw[start:end])) if segwit else txid
    tx_inputs = tuple(
        TxIn(_display(prev), vout, script_sig, sequence, witness)
        for (prev, vout, script_sig, sequence), witness in zip(inputs, witnesses, strict=True)
    )
    return Transaction(version, tx_inputs, outputs, locktime, txid, wtxid)


def _finish(r: _Reader, what: str) -> None:
    if r.pos != len(r.data):
        raise MalformedChainData(f"{len(r.data) - r.pos} trailing bytes after the {what}")


def parse_transaction(raw: bytes) -> Transaction:
    """Parse one serialised transaction (legacy or segwit); every byte must be consumed."""
    r = _Reader(bytes(raw))
    tx = _read_transaction(r)
    _finish(r, "transaction")
    return tx


def parse_block(raw: bytes) -> Block:
    """Parse a serialised block (header, then its transactions); every byte must be consumed."""
    r = _Reader(bytes(raw))
    header_bytes = r.take(80)
    h = _Reader(header_bytes)
    header = BlockHeader(
        version=h.uint(4),
        prev_block=_display(h.take(32)),
        merkle_root=_display(h.take(32)),
        time=h.uint(4),
        bits=h.uint(4),
        nonce=h.uint(4),
        hash=_display(sha256d(header_bytes)),
    )
    transactions = tuple(_read_transaction(r) for _ in range(r.count(60)))
    _finish(r, "block")
    return Block(header, transactions)


def serialize_transaction(tx: Transaction, *, witness: bool = True) -> bytes:
    """The consensus bytes of ``tx``: with the segwit marker, flag and witness stacks when it
    has witness data and ``witness`` (BIP-144), else the legacy layout its txid hashes. The
    ``txid``/``wtxid`` fields are not read (a draft may leave them empty)."""
    segwit = witness and tx.has_witness
    parts = [tx.version.to_bytes(4, "little"), b"\x00\x01" if segwit else b"", compact_size(len(tx.inputs))]
    for txin in tx.inputs:
        parts += [bytes.fromhex(txin.prev_txid)[::-1], txin.vout.to_bytes(4, "little")]
        parts += [compact_size(len(txin.script_sig)), txin.script_sig, txin.sequence.to_bytes(4, "little")]
    parts.append(compact_size(len(tx.outputs)))
    for txout in tx.outputs:
        parts += [txout.value.to_bytes(8, "little"), compact_size(len(txout.script_pubkey)), txout.script_pubkey]
    if segwit:
        for txin in tx.inputs:
            parts.append(compact_size(len(txin.witness)))
            parts += [compact_size(len(item)) + item for item in txin.witness]
    parts.append(tx.locktime.to_bytes(4, "little"))
    return b"".join(parts)


def merkle_root(txids: Sequence[str]) -> str:
    """The Merkle root over txids (display hex), as committed in the block header."""
    if not txids:
        raise ValueError("a Merkle root needs at least one txid")
    level = [bytes.fromhex(txid)[::-1] for txid in txids]
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [sha256d(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
    return _display(level[0])
