"""A test-side Bitcoin chain: blocks and transactions built in consensus serialization,
forks, and Bitcoin Core block files (``blk*.dat`` with Core 28+'s ``xor.dat``).

Tests of the key exposure index need chains no public data has: a known set of revealed
keys, a branch that loses a reorg, a block file obfuscated with a chosen key. Everything
here is written from the formats (BIP-141/144 for segwit, BIP-34 for the coinbase height,
Core's record layout and XOR rule), not with the project's parser, so a test comparing
``chains.bitcoin.tx.parse_block`` with what was built checks one against the other.

What is right: serialization, txids and wtxids, the Merkle root, the BIP-141 witness
commitment Core puts in every coinbase, prev-hash links, and regtest proof of work
(``bits`` 0x207fffff, a nonce is searched; about two tries per block). What is not checked
by anything: signatures (DER-shaped ECDSA over a digest of the outpoint, not a sighash),
amounts, coinbase maturity. The builder's genesis block is its own, not regtest's.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from coincurve import PrivateKey, PublicKeyXOnly

from chains.bitcoin.tx import Transaction, TxIn, TxOut, serialize_transaction
from pqc.ecdsa_messages import compact_size
from pqc.hashes import hash160, sha256d

REGTEST_BITS = 0x207FFFFF
REGTEST_GENESIS_TIME = 1_296_688_602
"""The time of regtest's genesis block, where the builder's chains start."""
BLOCK_INTERVAL = 600
SUBSIDY = 50 * 100_000_000
BLOCKFILE_CHUNK_SIZE = 16 * 1024 * 1024
"""Core preallocates ``blk*.dat`` in chunks of this size (``BLOCKFILE_CHUNK_SIZE``)."""
XOR_KEY_SIZE = 8
MAINNET_MAGIC = bytes.fromhex("f9beb4d9")
"""Mainnet's message start, the first four bytes of every record of its block files."""

#: The real mainnet blocks of ``shared/conformance/bitcoin/blocks``, by height.
CONFORMANCE_BLOCKS: Mapping[int, str] = MappingProxyType(
    {170: "block170.raw", 413_567: "block413567.raw", 702_861: "mainnet_block_0c835b.raw"}
)

_NULL_HASH = "00" * 32
_COINBASE_VOUT = 0xFFFFFFFF
_FINAL = 0xFFFFFFFF
_VERSION_BITS = 0x20000000
_SIGHASH_ALL = b"\x01"
_OP_0, _OP_1, _OP_RETURN = 0x00, 0x51, 0x6A
_OP_DUP, _OP_HASH160, _OP_EQUALVERIFY, _OP_CHECKSIG, _OP_CHECKMULTISIG = 0x76, 0xA9, 0x88, 0xAC, 0xAE
_PUSHDATA1, _PUSHDATA2, _PUSHDATA4 = 0x4C, 0x4D, 0x4E
_WITNESS_TAG = bytes.fromhex("aa21a9ed")


# --- keys and scripts -------------------------------------------------------------------


def private_key(n: int) -> PrivateKey:
    """The fixed private key ``n`` (the scalar n, 1 ≤ n < group order): the same keys in every run."""
    return PrivateKey(n.to_bytes(32, "big"))


def public_key(n: int, *, compressed: bool = True) -> bytes:
    """The SEC public key of ``private_key(n)``, 33 bytes compressed or 65 uncompressed."""
    return private_key(n).public_key.format(compressed=compressed)


MINER_KEY = 1
"""The key whose P2WPKH output every coinbase pays by default (the output shows no key)."""


def push(data: bytes) -> bytes:
    """The minimal script push of ``data`` (direct up to 75 bytes, then PUSHDATA1/2/4)."""
    size = len(data)
    if size < _PUSHDATA1:
        return bytes((size,)) + data
    if size <= 0xFF:
        return bytes((_PUSHDATA1, size)) + data
    if size <= 0xFFFF:
        return bytes((_PUSHDATA2,)) + size.to_bytes(2, "little") + data
    return bytes((_PUSHDATA4,)) + size.to_bytes(4, "little") + data


def push_number(n: int) -> bytes:
    """``CScript() << n`` as Core writes it for n ≥ 0: OP_0, OP_1..OP_16, else a minimal
    CScriptNum push (BIP-34 puts the block height in the coinbase this way)."""
    if n < 0:
        raise ValueError(f"only non-negative numbers are needed here, got {n}")
    if n == 0:
        return bytes((_OP_0,))
    if n <= 16:
        return bytes((_OP_1 + n - 1,))
    body = n.to_bytes((n.bit_length() + 7) // 8, "little")
    return push(body + b"\x00" if body[-1] & 0x80 else body)  # keep the sign bit clear


def p2pk(pubkey: bytes) -> bytes:
    """Pay to public key: ``<pubkey> OP_CHECKSIG`` (the output shows the key)."""
    return push(pubkey) + bytes((_OP_CHECKSIG,))


def p2pkh(pubkey: bytes) -> bytes:
    """Pay to public-key hash: ``OP_DUP OP_HASH160 <hash160> OP_EQUALVERIFY OP_CHECKSIG``."""
    return bytes((_OP_DUP, _OP_HASH160)) + push(hash160(pubkey)) + bytes((_OP_EQUALVERIFY, _OP_CHECKSIG))


def p2wpkh(pubkey: bytes) -> bytes:
    """Pay to witness public-key hash: ``OP_0 <hash160>`` (of a compressed key)."""
    return bytes((_OP_0,)) + push(hash160(pubkey))


def multisig(m: int, pubkeys: Sequence[bytes]) -> bytes:
    """Bare ``m``-of-n multisig: ``OP_m <keys…> OP_n OP_CHECKMULTISIG`` (the output shows every key)."""
    return push_number(m) + b"".join(push(k) for k in pubkeys) + push_number(len(pubkeys)) + bytes((_OP_CHECKMULTISIG,))


def taproot_output_key(n: int) -> bytes:
    """The BIP-86 output key (x-only) of internal key ``n``: x(P) tweaked by
    H_TapTweak(x(P)), P taken with even y."""
    x_only = PublicKeyXOnly.from_secret(private_key(n).secret)
    tag = hashlib.sha256(b"TapTweak").digest()
    x_only.tweak_add(hashlib.sha256(tag + tag + x_only.format()).digest())
    return x_only.format()


def p2tr(n: int) -> bytes:
    """Pay to taproot, key path only (BIP-86) with internal key ``n``: ``OP_1 <output key>``."""
    return bytes((_OP_1,)) + push(taproot_output_key(n))


def dummy_signature(key: PrivateKey, seed: bytes) -> bytes:
    """A DER ECDSA signature plus SIGHASH_ALL (71-73 bytes), shaped like a real one but
    made over sha256(seed), not over a sighash: nothing verifies it."""
    return key.sign(hashlib.sha256(seed).digest(), hasher=None) + _SIGHASH_ALL


def _outpoint(txid: str, vout: int) -> bytes:
    return bytes.fromhex(txid)[::-1] + vout.to_bytes(4, "little")


def spend_p2pkh(txid: str, vout: int, n: int, *, compressed: bool = True) -> TxIn:
    """An input spending a P2PKH output of key ``n``: scriptSig ``<sig> <pubkey>`` (reveals the key)."""
    signature = dummy_signature(private_key(n), _outpoint(txid, vout))
    return TxIn(txid, vout, push(signature) + push(public_key(n, compressed=compressed)), _FINAL, ())


def spend_p2wpkh(txid: str, vout: int, n: int) -> TxIn:
    """An input spending a P2WPKH output of key ``n``: empty scriptSig, witness ``<sig> <pubkey>``."""
    signature = dummy_signature(private_key(n), _outpoint(txid, vout))
    return TxIn(txid, vout, b"", _FINAL, (signature, public_key(n)))


# --- transactions and blocks --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BuiltTransaction:
    """A transaction as built: its parts, its serialization (segwit when an input has a
    witness) and its txid/wtxid in display order."""

    version: int
    inputs: tuple[TxIn, ...]
    outputs: tuple[TxOut, ...]
    locktime: int
    raw: bytes
    txid: str
    wtxid: str


def transaction(
    inputs: Sequence[TxIn], outputs: Sequence[TxOut], *, version: int = 2, locktime: int = 0
) -> BuiltTransaction:
    """Serialize a transaction (``chains.bitcoin.tx.serialize_transaction``): BIP-144 (marker,
    flag, witnesses) when any input has a witness, legacy otherwise. The txid hashes the
    serialization without witnesses."""
    draft = Transaction(version, tuple(inputs), tuple(outputs), locktime, "", "")
    raw = serialize_transaction(draft)
    txid = sha256d(serialize_transaction(draft, witness=False))[::-1].hex()
    return BuiltTransaction(version, tuple(inputs), tuple(outputs), locktime, raw, txid, sha256d(raw)[::-1].hex())


def _merkle_root(hashes: Sequence[str]) -> bytes:
    """The Merkle root (internal byte order) over display-order hashes."""
    level = [bytes.fromhex(h)[::-1] for h in hashes]
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [sha256d(a + b) for a, b in zip(level[::2], level[1::2], strict=True)]
    return level[0]


def coinbase(height: int, tag: bytes, payout: bytes, transactions: Sequence[BuiltTransaction]) -> BuiltTransaction:
    """The coinbase of a block at ``height`` holding ``transactions``: BIP-34 height and
    ``tag`` in its scriptSig, the subsidy to ``payout``, and the BIP-141 witness commitment
    (as Core adds to every block): output ``OP_RETURN aa21a9ed <sha256d(witness root ‖
    reserved value)>``, with the reserved value (32 zero bytes) as the coinbase's witness."""
    reserved = bytes(32)
    witness_root = _merkle_root([_NULL_HASH] + [tx.wtxid for tx in transactions])
    commitment = bytes((_OP_RETURN,)) + push(_WITNESS_TAG + sha256d(witness_root + reserved))
    script_sig = push_number(height) + push(tag)
    txin = TxIn(_NULL_HASH, _COINBASE_VOUT, script_sig, _FINAL, (reserved,))
    return transaction([txin], [TxOut(SUBSIDY, payout), TxOut(0, commitment)])


@dataclass(frozen=True, slots=True)
class BuiltBlock:
    """A block as built: height, 80-byte header, transactions (coinbase first), the whole
    serialization and the hashes in display order."""

    height: int
    header: bytes
    transactions: tuple[BuiltTransaction, ...]
    raw: bytes
    hash: str
    prev_hash: str
    merkle_root: str
    time: int


def _meets_regtest_target(header: bytes) -> bool:
    target = (REGTEST_BITS & 0xFFFFFF) << (8 * ((REGTEST_BITS >> 24) - 3))
    return int.from_bytes(sha256d(header), "little") <= target


def serialize_block(header: bytes, transactions: Iterable[BuiltTransaction]) -> bytes:
    """Header, transaction count and transactions: a block in consensus serialization (tests
    use it to make altered copies of a block)."""
    txs = list(transactions)
    return header + compact_size(len(txs)) + b"".join(tx.raw for tx in txs)


class ChainBuilder:
    """Builds blocks on any earlier block, so a test can grow competing branches.

    Every block gets a distinct tag in its coinbase (a serial number), so two blocks on the
    same parent differ. Builders are deterministic: two builders given the same steps make
    the same blocks (give one another ``start_time`` for a chain that shares nothing).
    ``blocks`` keeps every block built, by hash; ``branch`` walks back from a tip.
    """

    def __init__(self, *, payout: bytes | None = None, start_time: int = REGTEST_GENESIS_TIME) -> None:
        """``payout`` is the script coinbases pay: default P2WPKH of ``MINER_KEY``, which shows
        no key; ``p2pk(...)`` makes every coinbase reveal its key, as in the early chain."""
        self.payout = payout if payout is not None else p2wpkh(public_key(MINER_KEY))
        self.start_time = start_time
        self.blocks: dict[str, BuiltBlock] = {}
        self._serial = itertools.count()

    def block(
        self, parent: BuiltBlock | None, transactions: Sequence[BuiltTransaction] = (), *, time: int | None = None
    ) -> BuiltBlock:
        """A block on ``parent`` (a genesis block when None) holding a coinbase and
        ``transactions``, with a nonce that meets the regtest target."""
        height = 0 if parent is None else parent.height + 1
        prev_hash = _NULL_HASH if parent is None else parent.hash
        if time is None:
            time = self.start_time if parent is None else parent.time + BLOCK_INTERVAL
        tag = next(self._serial).to_bytes(4, "little")
        txs = (coinbase(height, tag, self.payout, transactions), *transactions)
        root = _merkle_root([tx.txid for tx in txs])
        head = _VERSION_BITS.to_bytes(4, "little") + bytes.fromhex(prev_hash)[::-1] + root
        head += time.to_bytes(4, "little") + REGTEST_BITS.to_bytes(4, "little")
        header = next(
            h for nonce in itertools.count() if _meets_regtest_target(h := head + nonce.to_bytes(4, "little"))
        )
        built = BuiltBlock(
            height=height,
            header=header,
            transactions=txs,
            raw=serialize_block(header, txs),
            hash=sha256d(header)[::-1].hex(),
            prev_hash=prev_hash,
            merkle_root=root[::-1].hex(),
            time=time,
        )
        self.blocks[built.hash] = built
        return built

    def extend(self, parent: BuiltBlock | None, count: int) -> list[BuiltBlock]:
        """``count`` coinbase-only blocks, each on the one before, the first on ``parent``."""
        built: list[BuiltBlock] = []
        for _ in range(count):
            built.append(self.block(built[-1] if built else parent))
        return built

    def branch(self, tip: BuiltBlock) -> list[BuiltBlock]:
        """The chain ending at ``tip``, genesis first (what a node serves once ``tip`` is best)."""
        chain = [tip]
        while chain[-1].height > 0:
            chain.append(self.blocks[chain[-1].prev_hash])
        return chain[::-1]


@dataclass(frozen=True, slots=True)
class RevealingBlocks:
    """Two blocks revealing keys of every kind, and what they reveal: ``revealed`` holds
    (pubkey, txid, kind) with kind "output" or "input", as ``Revelation`` has them."""

    blocks: tuple[BuiltBlock, BuiltBlock]
    revealed: frozenset[tuple[bytes, str, str]]


def revealing_blocks(chain: ChainBuilder, parent: BuiltBlock) -> RevealingBlocks:
    """Two blocks on ``parent`` (whose coinbase must pay the default P2WPKH of ``MINER_KEY``).

    The first spends that coinbase (P2WPKH spend: the miner key) into P2PK compressed
    (key 2), P2PK uncompressed (key 3), P2PKH (key 4), P2WPKH (key 5), bare 1-of-2 multisig
    (keys 6, 7) and P2TR (internal key 8). The second spends the P2PKH output (scriptSig
    with uncompressed key 4) and the P2WPKH output (witness with key 5) to P2WPKH of key 9.
    Coinbases pay P2WPKH outputs and reveal nothing.
    """
    funding_out = (
        p2pk(public_key(2)),
        p2pk(public_key(3, compressed=False)),
        p2pkh(public_key(4, compressed=False)),
        p2wpkh(public_key(5)),
        multisig(1, [public_key(6), public_key(7)]),
        p2tr(8),
    )
    value = SUBSIDY // len(funding_out)
    funding = transaction(
        [spend_p2wpkh(parent.transactions[0].txid, 0, MINER_KEY)], [TxOut(value, s) for s in funding_out]
    )
    first = chain.block(parent, [funding])
    spend = transaction(
        [spend_p2pkh(funding.txid, 2, 4, compressed=False), spend_p2wpkh(funding.txid, 3, 5)],
        [TxOut(2 * value - 1000, p2wpkh(public_key(9)))],
    )
    second = chain.block(first, [spend])
    outputs = [public_key(2), public_key(3, compressed=False), public_key(6), public_key(7), taproot_output_key(8)]
    revealed = {(key, funding.txid, "output") for key in outputs}
    revealed |= {(public_key(MINER_KEY), funding.txid, "input")}
    revealed |= {(public_key(4, compressed=False), spend.txid, "input"), (public_key(5), spend.txid, "input")}
    return RevealingBlocks((first, second), frozenset(revealed))


# --- block files ------------------------------------------------------------------------------


def xor(data: bytes, key: bytes) -> bytes:
    """``data`` written from file offset 0 with Core 28+'s obfuscation: byte i XOR key[i % 8]
    (its own inverse)."""
    out = bytearray(data)
    for phase, key_byte in enumerate(key):
        table = bytes(b ^ key_byte for b in range(256))
        out[phase::XOR_KEY_SIZE] = data[phase::XOR_KEY_SIZE].translate(table)
    return bytes(out)


def write_block_file(
    path: Path,
    blocks: Iterable[bytes | BuiltBlock],
    *,
    magic: bytes,
    xor_key: bytes | None = None,
    preallocate: int = 0,
) -> list[int]:
    """Write ``blocks`` as a Core block file: records ``magic | size (LE32) | block``, in the
    order given. Returns each record's file offset.

    With ``xor_key`` (8 bytes) the file is obfuscated as Core 28+ writes it, and the key is
    written to ``xor.dat`` beside it (``ValueError`` if a different ``xor.dat`` is there).
    Without, no ``xor.dat`` is written (a block directory from before Core 28).
    ``preallocate`` > 0 pads the file with zero bytes up to a multiple of that size, as
    Core's chunk preallocation (``BLOCKFILE_CHUNK_SIZE``) does. Those zeros are written
    raw, never obfuscated: Core allocates them through the plain file, outside the XOR layer.
    """
    offsets: list[int] = []
    records = bytearray()
    for block in blocks:
        raw = block.raw if isinstance(block, BuiltBlock) else block
        offsets.append(len(records))
        records += magic + len(raw).to_bytes(4, "little") + raw
    data = bytes(records)
    if xor_key is not None:
        if len(xor_key) != XOR_KEY_SIZE:
            raise ValueError(f"an xor.dat key is {XOR_KEY_SIZE} bytes, got {len(xor_key)}")
        key_file = path.parent / "xor.dat"
        if key_file.exists() and key_file.read_bytes() != xor_key:
            raise ValueError(f"{key_file} holds another key; one block directory has one key")
        key_file.write_bytes(xor_key)
        data = xor(data, xor_key)
    if preallocate > 0:
        data += bytes(-len(data) % preallocate)
    path.write_bytes(data)
    return offsets


def conformance_blocks(conformance_dir: Path) -> dict[int, bytes]:
    """The real mainnet blocks of the conformance folder (170, 413567, 702861) by height."""
    folder = conformance_dir / "bitcoin" / "blocks"
    return {height: (folder / name).read_bytes() for height, name in CONFORMANCE_BLOCKS.items()}


def write_conformance_block_file(
    conformance_dir: Path, path: Path, *, xor_key: bytes | None = None, preallocate: int = 0
) -> dict[int, bytes]:
    """Write the real mainnet conformance blocks, in height order, as a mainnet block file
    (see ``write_block_file``); returns them by height."""
    blocks = conformance_blocks(conformance_dir)
    write_block_file(path, blocks.values(), magic=MAINNET_MAGIC, xor_key=xor_key, preallocate=preallocate)
    return blocks
