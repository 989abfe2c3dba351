"""Bitcoin Core's block files (``blocks/blk*.dat``), read from bytes (pure, no I/O).

Each file is a sequence of records: the network's 4-byte magic, the block's size as a
4-byte little-endian integer, then the block in consensus serialization. Files are
preallocated in 16 MiB chunks, so a file ends in zero bytes where no record was written
yet. Since Bitcoin Core 28 the files are obfuscated: every byte at file offset ``i`` is
XORed with ``key[i % 8]``, where ``key`` is the 8 bytes of ``blocks/xor.dat`` (all zero,
i.e. no obfuscation, for block directories written before 28 or with ``-blocksxor=0``).
Records are in the order blocks arrived, not in height order. Preallocation writes zeros
to the disk, so the unused tail of an obfuscated file reads as the key's bytes once
deobfuscated: the end is found on the stored bytes. The caller opens the file; this module
only decodes what it is given.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from types import MappingProxyType
from typing import BinaryIO

from chains.errors import MalformedChainData

#: The message-start bytes of each network (``pchMessageStart``, src/kernel/chainparams.cpp).
MAGIC = MappingProxyType(
    {
        "mainnet": bytes.fromhex("f9beb4d9"),
        "testnet3": bytes.fromhex("0b110907"),
        "testnet4": bytes.fromhex("1c163f28"),
        "signet": bytes.fromhex("0a03cf40"),
        "regtest": bytes.fromhex("fabfb5da"),
    }
)

XOR_KEY_SIZE = 8
"""Size of ``blocks/xor.dat``."""

_EMPTY = bytes(4)


def deobfuscate(data: bytes, key: bytes, offset: int = 0) -> bytes:
    """``data`` read at file ``offset`` with the obfuscation of ``key`` (8 bytes, from
    ``xor.dat``) removed; XOR is its own inverse, so this also obfuscates. A zero key
    returns ``data`` unchanged. Linear time (one big-integer XOR, no per-byte Python)."""
    if len(key) != XOR_KEY_SIZE:
        raise ValueError(f"xor.dat holds {XOR_KEY_SIZE} bytes, got {len(key)}")
    if not any(key) or not data:
        return bytes(data)
    start = offset % XOR_KEY_SIZE
    rotated = key[start:] + key[:start]
    stream = (rotated * (len(data) // XOR_KEY_SIZE + 1))[: len(data)]
    mixed = int.from_bytes(data, "little") ^ int.from_bytes(stream, "little")
    return mixed.to_bytes(len(data), "little")


def block_records(data: bytes, magic: bytes, key: bytes = bytes(XOR_KEY_SIZE)) -> Iterator[tuple[int, bytes]]:
    """(file offset of the record, raw block) for every record of a block file's bytes as
    stored (``read_records`` over them)."""
    return read_records(io.BytesIO(data), magic, key)


def read_records(stream: BinaryIO, magic: bytes, key: bytes = bytes(XOR_KEY_SIZE)) -> Iterator[tuple[int, bytes]]:
    """(file offset of the record, raw block) for every record of a block file opened by
    the caller, in file order, from the stream's position, one record in memory at a time,
    with ``key``'s obfuscation removed at each record's offset. Stops at the end of the file
    or at its preallocated tail: zero bytes *as stored* (so, in an obfuscated file, the key's
    bytes once deobfuscated). ``MalformedChainData`` for another network's magic or a record
    cut short (a file still being written: read it again once Bitcoin Core has flushed it)."""
    offset = stream.tell()
    while True:
        stored = stream.read(8)
        if not any(stored):
            return
        if len(stored) < 8:
            raise _cut_short(offset, len(stored))
        head = deobfuscate(stored, key, offset)
        if head[:4] != magic:
            raise MalformedChainData(f"block file: magic {head[:4].hex()} at offset {offset}, expected {magic.hex()}")
        size = int.from_bytes(head[4:], "little")
        body = stream.read(size)
        if size == 0 or len(body) < size:
            raise _cut_short(offset, size)
        yield offset, deobfuscate(body, key, offset + 8)
        offset += 8 + size


def _cut_short(offset: int, size: int) -> MalformedChainData:
    return MalformedChainData(f"block file: record at offset {offset} claims {size} bytes; the file is cut short")
