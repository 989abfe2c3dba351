"""Bitcoin Core's UTXO snapshot file (RPC ``dumptxoutset``), decoded from a stream (pure, no I/O of its own).

The caller opens the file and passes the binary stream; this module reads the header with
``read_metadata`` and then the coins with ``iter_coin_batches``, in fixed-size chunks, so memory
stays flat for a mainnet file (~165M coins, ~9 GB).

Which files: the layout read here is snapshot **version 2**, the only one with a header. Bitcoin
Core 28.0 introduced it (PR #29612: commits de95953d87 "rpc: Optimize serialization disk space of
dumptxoutset", the grouping by txid, and 542e13b293 "rpc: Enhance metadata of the dumptxoutset
output", the header), and every release since writes it (master still has ``VERSION{2}``). Files
from Core 0.21 to 27.x start directly with the base block hash (no magic) and store each coin
under its full outpoint (txid, uint32 vout) rather than grouped by txid; they fail here on the
magic, with a message that says so. Any other version is refused too.

Layout, field by field, with the Bitcoin Core source each field follows. The copies read (code
index of github.com/bitcoin/bitcoin; it also holds forks' commits, so each file's header and
include guards were checked to be Core's) were ``src/node/utxo_snapshot.h`` @0115e2f60165,
``src/rpc/blockchain.cpp`` @000c7e4cdb4c (``WriteUTXOSnapshot``), ``src/coins.h`` @e980214bc4fd
(``Coin::Serialize``, unchanged since), ``src/compressor.cpp`` @00808d1f9e36, ``src/compressor.h``
(the ``std::span`` revision of ``ScriptCompression``/``TxOutCompression``; its commit was not
shown), ``src/serialize.h`` @2400deb4a760 and ``src/test/compress_tests.cpp`` @c59c9ddae2a1.

Header, 51 bytes (``SnapshotMetadata::Serialize``):
  - 5 bytes ``SNAPSHOT_MAGIC_BYTES`` = ``'u' 't' 'x' 'o' 0xff``;
  - uint16 little-endian ``VERSION`` = 2;
  - 4 bytes network magic (``pchMessageStart``; see ``chains.bitcoin.blockfiles.MAGIC``);
  - 32 bytes ``m_base_blockhash`` (uint256, internal byte order: reversed from the hex shown);
  - uint64 little-endian ``m_coins_count``.

Body (``WriteUTXOSnapshot``'s ``write_coins_to_file``): the coins DB cursor's order (key
``'C' + txid + VARINT(vout)``), one group per txid: the 32-byte txid (internal order), a
CompactSize count of its unspent outputs, then per output a CompactSize ``vout`` and the
``Coin``. A ``Coin`` (``Coin::Serialize``) is ``VARINT(height * 2 + coinbase)``, then
``TxOutCompression``: ``VARINT(CompressAmount(value))`` and ``ScriptCompression``:
``VARINT(nSize)``; ``nSize`` 0..5 is a special script with a fixed payload (0: P2PKH, 20-byte
key hash; 1: P2SH, 20-byte script hash; 2/3: P2PK of the compressed key ``02/03 || x``, 32-byte
x; 4/5: P2PK of an *uncompressed* key stored compressed, 32-byte x with the parity of y in the
low bit, so reading it needs a secp256k1 point decompression); any other ``nSize`` is
``len(script) + 6`` followed by the raw script, and a script longer than ``MAX_SCRIPT_SIZE`` is
replaced on reading by ``OP_RETURN`` (``ScriptCompression::Unser``).

Two different variable-length integers appear: counts and vouts are CompactSize (the wire
format: one byte below 253, else 0xfd/0xfe/0xff and 2/4/8 little-endian bytes, canonical only),
while height, amount and script size are Core's VARINT (``serialize.h`` ``WriteVarInt``/``ReadVarInt``:
base-128 digits most significant first, the high bit set on all but the last, and one added to
the value at each continuation, so 128 is ``80 00``, not ``81 00``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Literal

from coincurve import PublicKey as Secp256k1Point

from chains.bitcoin.blockfiles import MAGIC
from chains.bitcoin.script import (
    OP_0,
    OP_1,
    OP_CHECKSIG,
    OP_DUP,
    OP_EQUAL,
    OP_EQUALVERIFY,
    OP_HASH160,
    OP_RETURN,
    OutputType,
    classify_script,
)
from chains.errors import MalformedChainData

SNAPSHOT_MAGIC = b"utxo\xff"
"""``SNAPSHOT_MAGIC_BYTES`` (src/node/utxo_snapshot.h), the first 5 bytes of a version-2 file."""
SNAPSHOT_VERSION = 2
"""The one snapshot version read here (``SnapshotMetadata::VERSION``, Bitcoin Core 28.0 and later)."""
METADATA_SIZE = 51
"""Size of the header: magic 5 + version 2 + network magic 4 + block hash 32 + coin count 8."""
MAX_SCRIPT_SIZE = 10_000
"""Core's ``MAX_SCRIPT_SIZE`` (src/script/script.h): longer stored scripts read back as ``OP_RETURN``."""
MAX_MONEY = 21_000_000 * 100_000_000
"""Core's ``MAX_MONEY`` in satoshis; a coin above it makes the file malformed."""

ScriptType = Literal["p2pk", "p2pkh", "p2sh", "p2wpkh", "p2wsh", "p2tr", "multisig", "other"]
"""What ``script_type`` calls an output: the standard key/hash templates, bare multisig, or other."""

_NETWORKS = {magic: name for name, magic in MAGIC.items()}
_SPECIAL_SCRIPTS = 6  # ScriptCompression::nSpecialScripts
#: Payload size of each special script (``GetSpecialScriptSize``).
_SPECIAL_SIZE = (20, 20, 32, 32, 32, 32)
#: The bytes around the payload of special scripts 0..3 (``DecompressScript``).
_SPECIAL_HEAD = (bytes((OP_DUP, OP_HASH160, 20)), bytes((OP_HASH160, 20)), b"\x21\x02", b"\x21\x03")
_SPECIAL_TAIL = (bytes((OP_EQUALVERIFY, OP_CHECKSIG)), bytes((OP_EQUAL,)), bytes((OP_CHECKSIG,)), bytes((OP_CHECKSIG,)))
_OVERSIZED_SCRIPT = bytes((OP_RETURN,))
_POW10: tuple[int, ...] = tuple(10**e for e in range(10))
_MAX_HEIGHT = (1 << 31) - 1  # Coin::nHeight is 31 bits: VARINT(code) must fit a uint32
_MAX_VOUT = (1 << 32) - 1  # COutPoint::n is a uint32
_CHUNK_SIZE = 1 << 20  # bytes read from the stream at a time
_MARGIN = 128  # >= the most bytes a coin takes before a raw script (32+9+9+5+10+5+32 = 102)


@dataclass(frozen=True, slots=True)
class SnapshotMetadata:
    """The header of a snapshot: format version, network, the block whose UTXO set it holds
    (hex in display order, as RPCs and explorers show it), and how many coins follow."""

    version: int
    network: str
    base_block_hash: str
    coins_count: int


@dataclass(frozen=True, slots=True)
class CoinBatch:
    """Consecutive coins of a snapshot as equal-length columns (one row per unspent output).

    ``txid`` holds 32 bytes in display order (reversed from the file's serialization, so
    ``txid[i].hex()`` is the txid explorers show); the coins of one transaction share one bytes
    object. ``value`` is in satoshis and ``script`` is the full scriptPubKey, both decompressed.
    """

    txid: list[bytes]
    vout: list[int]
    height: list[int]
    coinbase: list[bool]
    value: list[int]
    script: list[bytes]

    def __len__(self) -> int:
        """Number of coins (rows) in the batch."""
        return len(self.vout)


def read_metadata(stream: BinaryIO) -> SnapshotMetadata:
    """Read the 51-byte header at the stream's position and check it is a version-2 snapshot of
    a known network, so a wrong file fails before any coin is decoded. ``MalformedChainData``
    on a short header, a wrong magic (also what a pre-28.0 snapshot gives), another version or
    an unknown network magic (e.g. a custom signet)."""
    head = b""
    while len(head) < METADATA_SIZE and (data := stream.read(METADATA_SIZE - len(head))):
        head += data  # a pipe may hand out fewer bytes than asked for
    if len(head) < METADATA_SIZE:
        raise MalformedChainData(f"UTXO snapshot: header is {len(head)} bytes, expected {METADATA_SIZE}")
    if head[:5] != SNAPSHOT_MAGIC:
        raise MalformedChainData(
            f"UTXO snapshot: magic bytes {head[:5].hex()} at offset 0, expected {SNAPSHOT_MAGIC.hex()}; not a "
            "dumptxoutset file, or one written by Bitcoin Core before 28.0 (no header), which is not supported"
        )
    version = int.from_bytes(head[5:7], "little")
    if version != SNAPSHOT_VERSION:
        raise MalformedChainData(
            f"UTXO snapshot: version {version} at offset 5 is not supported (only version {SNAPSHOT_VERSION}, "
            "written by Bitcoin Core 28.0 and later)"
        )
    network = _NETWORKS.get(head[7:11])
    if network is None:
        raise MalformedChainData(
            f"UTXO snapshot: network magic {head[7:11].hex()} at offset 7 is not one of "
            f"{', '.join(MAGIC)} (a custom signet, or a corrupt file)"
        )
    return SnapshotMetadata(
        version=version,
        network=network,
        base_block_hash=head[11:43][::-1].hex(),
        coins_count=int.from_bytes(head[43:51], "little"),
    )


def compress_amount(n: int) -> int:
    """Core's ``CompressAmount``: a satoshi amount (0..``MAX_MONEY``) as the small integer the
    file stores, by moving trailing decimal zeros into an exponent. The inverse of
    ``decompress_amount``; used to write test snapshots."""
    if not 0 <= n <= MAX_MONEY:
        raise ValueError(f"amount {n} is outside 0..MAX_MONEY")
    if n == 0:
        return 0
    e = 0
    while n % 10 == 0 and e < 9:
        n //= 10
        e += 1
    if e < 9:
        n, d = divmod(n, 10)
        return 1 + (n * 9 + d - 1) * 10 + e
    return 1 + (n - 1) * 10 + 9


def decompress_amount(x: int) -> int:
    """Core's ``DecompressAmount``: the satoshi amount of a stored compressed amount ``x``
    (the snapshot, like the chainstate DB, stores amounts this way to save space)."""
    if x == 0:
        return 0
    x, e = divmod(x - 1, 10)
    if e < 9:
        x, d = divmod(x, 9)
        return (x * 10 + d + 1) * _POW10[e]
    return (x + 1) * _POW10[9]


def decompress_script(kind: int, payload: bytes) -> bytes:
    """The scriptPubKey of special script ``kind`` (0..5, Core's ``DecompressScript``) from its
    stored payload (20 bytes for kinds 0/1, 32 for 2..5). Kinds 4/5 hold an uncompressed P2PK
    key as x plus y's parity; the 65-byte key is recovered by secp256k1 point decompression.
    ``MalformedChainData`` when x is no curve point (Core only compresses valid keys)."""
    if not 0 <= kind < _SPECIAL_SCRIPTS:
        raise ValueError(f"special script kinds are 0..5, got {kind}")
    if len(payload) != _SPECIAL_SIZE[kind]:
        raise MalformedChainData(f"special script {kind} has a {_SPECIAL_SIZE[kind]}-byte payload, got {len(payload)}")
    if kind < 4:
        return _SPECIAL_HEAD[kind] + payload + _SPECIAL_TAIL[kind]
    script = _uncompressed_p2pk(kind, payload)
    if script is None:
        raise MalformedChainData(f"special script {kind}: x={payload.hex()} is no secp256k1 point")
    return script


def _uncompressed_p2pk(kind: int, x: bytes) -> bytes | None:
    """The 67-byte P2PK script of the uncompressed key with x coordinate ``x`` and y's parity
    ``kind - 4``; None when ``x`` is not on the curve."""
    try:
        key = Secp256k1Point(bytes((kind - 2,)) + x).format(compressed=False)
    except ValueError:
        return None
    return bytes((len(key),)) + key + bytes((OP_CHECKSIG,))


def script_type(script: bytes) -> tuple[ScriptType, bytes | None]:
    """The output type of a scriptPubKey and the key or hash it pays: P2PK the SEC key (33 or
    65 bytes), P2PKH/P2WPKH the 20-byte key hash, P2SH the 20-byte script hash, P2WSH the
    32-byte script hash, P2TR the 32-byte x-only output key; ``multisig`` (bare) and ``other``
    give None. Results equal ``chains.bitcoin.script.classify_script``'s; the common templates
    are matched on length and fixed bytes first because a mainnet snapshot has ~165M outputs."""
    size = len(script)
    if size == 22:
        if script[0] == OP_0 and script[1] == 20:
            return "p2wpkh", script[2:]
    elif size == 34:
        if script[1] == 32:
            if script[0] == OP_1:
                return "p2tr", script[2:]
            if script[0] == OP_0:
                return "p2wsh", script[2:]
    elif size == 25:
        if script[:3] == _SPECIAL_HEAD[0] and script[23:] == _SPECIAL_TAIL[0]:
            return "p2pkh", script[3:23]
    elif size == 23:
        if script[:2] == _SPECIAL_HEAD[1] and script[22] == OP_EQUAL:
            return "p2sh", script[2:22]
    # Every P2PKH, P2SH and segwit v0/v1 template is matched above, with classify_script's own
    # rules; what is left is P2PK, bare multisig or another type.
    info = classify_script(script)
    if info.output_type is OutputType.P2PK:
        return "p2pk", info.keys[0]
    return ("multisig" if info.output_type is OutputType.P2MS else "other"), None


class _BadCoin(Exception):
    """A coin that cannot be decoded; ``iter_coin_batches`` adds where it is."""


def _compact_size(buf: bytes, pos: int) -> tuple[int, int]:
    """The CompactSize of 3, 5 or 9 bytes at ``pos`` (one-byte ones are read inline): value, next pos."""
    width = (2, 4, 8)[buf[pos] - 253]
    end = pos + 1 + width
    if end > len(buf):
        raise IndexError("CompactSize runs past the data")
    value = int.from_bytes(buf[pos + 1 : end], "little")
    if value < (253, 0x10000, 0x100000000)[width // 4]:
        raise _BadCoin(f"non-canonical CompactSize {buf[pos:end].hex()}")
    return value, end


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The Core VARINT at ``pos``: value, next pos."""
    byte = buf[pos]
    pos += 1
    value = byte & 0x7F
    while byte > 0x7F:
        byte = buf[pos]
        pos += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, pos


class _Chunks:
    """The stream read ahead: ``buf`` holds the next unread bytes, from file offset ``base``."""

    __slots__ = ("base", "buf", "eof", "stream")

    def __init__(self, stream: BinaryIO, base: int) -> None:
        self.stream, self.base, self.buf, self.eof = stream, base, b"", False

    def refill(self, pos: int, need: int) -> None:
        """Drop ``buf[:pos]``, then read until ``need`` bytes and a chunk are held (or the file ends)."""
        self.base += pos
        parts = [self.buf[pos:]]
        held = len(parts[0])
        target = need + _CHUNK_SIZE
        while held < target and not self.eof:
            data = self.stream.read(target - held)
            if data:
                parts.append(data)
                held += len(data)
            else:
                self.eof = True
        self.buf = b"".join(parts)

    def skip(self, end: int) -> bool:
        """Drop the buffer and the stream up to buffer position ``end`` (past the buffer) without
        holding the skipped bytes; False when the file ends first."""
        gap = end - len(self.buf)
        self.base += len(self.buf)
        self.buf = b""
        while gap and not self.eof:
            data = self.stream.read(min(gap, _CHUNK_SIZE))
            self.eof = not data
            gap -= len(data)
            self.base += len(data)
        return not gap


def iter_coin_batches(stream: BinaryIO, metadata: SnapshotMetadata, batch_size: int = 65_536) -> Iterator[CoinBatch]:
    """Decode the coins that follow the header (the stream positioned just after
    ``read_metadata``), ``batch_size`` per batch (the last one shorter), in file order.

    Streaming: the file is read ~1 MiB at a time and only the current batch is held, whatever
    the file's size; at the default batch size a batch holds ~10 MB of Python objects. Every
    batch is checked whole before it is yielded. ``MalformedChainData`` (its ``offset`` detail
    the file offset, header included) when the file ends before ``metadata.coins_count`` coins
    or bytes follow the last one, and on a txid group of zero coins or of more coins than
    remain, a non-canonical CompactSize, an uncompressed-P2PK x not on the curve, a vout beyond
    32 bits, a height beyond Core's 31 bits or an amount above ``MAX_MONEY``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    chunks = _Chunks(stream, METADATA_SIZE)
    special_head, special_tail, special_size = _SPECIAL_HEAD, _SPECIAL_TAIL, _SPECIAL_SIZE
    decompress, uncompressed_p2pk = decompress_amount, _uncompressed_p2pk
    n_special, max_script_size = _SPECIAL_SCRIPTS, MAX_SCRIPT_SIZE
    total = remaining = metadata.coins_count
    buf, pos, limit, start = b"", 0, -1, 0
    txid, in_group = b"", 0
    while remaining:
        txids: list[bytes] = []
        vouts: list[int] = []
        heights: list[int] = []
        coinbases: list[bool] = []
        values: list[int] = []
        scripts: list[bytes] = []
        add_txid, add_vout, add_height = txids.append, vouts.append, heights.append
        add_coinbase, add_value, add_script = coinbases.append, values.append, scripts.append
        try:
            for _ in range(min(batch_size, remaining)):
                if pos > limit:
                    if chunks.eof:  # the coin before ran past the end of the file
                        raise _cut_short(total - remaining - 1, total, chunks.base + start)
                    chunks.refill(pos, _MARGIN)
                    buf, pos = chunks.buf, 0
                    limit = len(buf) if chunks.eof else len(buf) - _MARGIN
                start = pos
                if not in_group:
                    txid = buf[pos : pos + 32][::-1]
                    pos += 32
                    in_group = buf[pos]
                    if in_group < 253:
                        pos += 1
                    else:
                        in_group, pos = _compact_size(buf, pos)
                    if not 0 < in_group <= remaining:
                        raise _BadCoin(f"a txid group of {in_group} coins, with {remaining} of {total} coins left")
                vout = buf[pos]
                if vout < 253:
                    pos += 1
                else:
                    vout, pos = _compact_size(buf, pos)
                # VARINT(height * 2 + coinbase), then VARINT(compressed amount): _varint, written out for speed
                byte = buf[pos]
                pos += 1
                code = byte & 0x7F
                while byte > 0x7F:
                    byte = buf[pos]
                    pos += 1
                    code = ((code + 1) << 7) | (byte & 0x7F)
                byte = buf[pos]
                pos += 1
                amount = byte & 0x7F
                while byte > 0x7F:
                    byte = buf[pos]
                    pos += 1
                    amount = ((amount + 1) << 7) | (byte & 0x7F)
                kind = buf[pos]
                if kind < 4:
                    pos += 1
                    end = pos + special_size[kind]
                    script = special_head[kind] + buf[pos:end] + special_tail[kind]
                    pos = end
                elif kind < n_special:
                    x = buf[pos + 1 : pos + 33]
                    if len(x) < 32:
                        raise IndexError
                    p2pk = uncompressed_p2pk(kind, x)
                    if p2pk is None:
                        raise _BadCoin(f"special script {kind} (uncompressed P2PK): x={x.hex()} is no secp256k1 point")
                    script = p2pk
                    pos += 33
                else:
                    if kind < 0x80:
                        pos += 1
                        size = kind - n_special
                    else:
                        size, pos = _varint(buf, pos)
                        size -= n_special
                    end = pos + size
                    if size > max_script_size:  # ScriptCompression::Unser: skipped, read as OP_RETURN
                        script = _OVERSIZED_SCRIPT
                        if end > len(buf):
                            offset = chunks.base + start
                            if not chunks.skip(end):
                                raise _cut_short(total - remaining, total, offset)
                            buf, end, limit = b"", 0, -1
                    elif end > len(buf) and not chunks.eof:
                        chunks.refill(start, end - start + _MARGIN)
                        buf, shift = chunks.buf, start
                        pos, end, start = pos - shift, end - shift, 0
                        limit = len(buf) if chunks.eof else len(buf) - _MARGIN
                        script = buf[pos:end]
                    else:
                        script = buf[pos:end]
                    pos = end
                add_txid(txid)
                add_vout(vout)
                add_height(code >> 1)
                add_coinbase((code & 1) == 1)
                add_value(decompress(amount))
                add_script(script)
                in_group -= 1
                remaining -= 1
            if pos > len(buf):  # the batch's last coin ran past the end of the file
                raise _cut_short(total - remaining - 1, total, chunks.base + start)
        except IndexError:  # a read past the bytes held: only at the end of the file, or in an endless VARINT
            done, offset = total - remaining, chunks.base + start
            if chunks.eof:
                raise _cut_short(done, total, offset) from None
            raise MalformedChainData(
                f"UTXO snapshot: an over-long VARINT in coin {done} of {total}, at offset {offset}", offset=offset
            ) from None
        except _BadCoin as exc:
            offset = chunks.base + start
            raise MalformedChainData(
                f"UTXO snapshot: {exc} in coin {total - remaining} of {total}, at offset {offset}", offset=offset
            ) from None
        batch = CoinBatch(txids, vouts, heights, coinbases, values, scripts)
        _check_ranges(batch)
        yield batch
    chunks.refill(pos, 1)
    if chunks.buf:
        raise MalformedChainData(
            f"UTXO snapshot: trailing data at offset {chunks.base}, after the {total} coins the header announces",
            offset=chunks.base,
        )


def _cut_short(done: int, total: int, offset: int) -> MalformedChainData:
    """The error of a file that ends inside (or just before) coin ``done`` (0-based) of ``total``,
    which starts at file offset ``offset``."""
    return MalformedChainData(
        f"UTXO snapshot: the file ends before the end of coin {done} of {total}, which starts at offset {offset}",
        offset=offset,
    )


def _check_ranges(batch: CoinBatch) -> None:
    """Vouts within 32 bits, heights within Coin's 31 and values within MAX_MONEY (per batch, at C speed)."""
    for column, bound, what in (
        (batch.vout, _MAX_VOUT, "vout"),
        (batch.height, _MAX_HEIGHT, "height"),
        (batch.value, MAX_MONEY, "value"),
    ):
        highest = max(column)
        if highest > bound:
            row = column.index(highest)
            raise MalformedChainData(
                f"UTXO snapshot: coin {batch.txid[row].hex()}:{batch.vout[row]} has {what} {highest}, above {bound}"
            )
