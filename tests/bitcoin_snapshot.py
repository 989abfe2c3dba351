"""A writer of Bitcoin Core UTXO snapshots (``dumptxoutset``, version 2) for tests and the bench.

It follows Bitcoin Core's writer, not our reader: ``SnapshotMetadata::Serialize``
(src/node/utxo_snapshot.h) for the header, ``WriteUTXOSnapshot`` (src/rpc/blockchain.cpp) for
the body, ``Coin::Serialize`` (src/coins.h) and ``CompressScript`` (src/compressor.cpp) for the
coins, ``WriteVarInt``/``WriteCompactSize`` (src/serialize.h) for the integers; see
``chains/bitcoin/utxo_snapshot.py`` for the commits read. Only ``compress_amount`` is shared
with the reader; it is checked against Core's own test values separately.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import BinaryIO

from coincurve import PublicKey

from chains.bitcoin.blockfiles import MAGIC
from chains.bitcoin.utxo_snapshot import compress_amount
from pqc.ecdsa_messages import compact_size

#: One coin: txid (32 bytes, display order), vout, height, coinbase, value (satoshis), scriptPubKey.
Coin = tuple[bytes, int, int, bool, int, bytes]


def varint(n: int) -> bytes:
    """Core's ``WriteVarInt``: base-128 digits, most significant first, each but the last with
    the high bit set and, after the first, one subtracted from what is left."""
    digits = [n & 0x7F]
    while n > 0x7F:
        n = (n >> 7) - 1
        digits.append((n & 0x7F) | 0x80)
    return bytes(reversed(digits))


def compress_script(script: bytes) -> bytes:
    """Core's ``ScriptCompression::Ser``: the special forms of ``CompressScript`` (P2PKH, P2SH,
    P2PK with a compressed or a valid uncompressed key), else VARINT(size + 6) and the script."""
    size = len(script)
    if size == 25 and script[:3] == b"\x76\xa9\x14" and script[23:] == b"\x88\xac":
        return b"\x00" + script[3:23]
    if size == 23 and script[:2] == b"\xa9\x14" and script[22] == 0x87:
        return b"\x01" + script[2:22]
    if size == 35 and script[0] == 33 and script[34] == 0xAC and script[1] in (2, 3):
        return script[1:34]
    if size == 67 and script[0] == 65 and script[66] == 0xAC and script[1] == 4 and _fully_valid(script[1:66]):
        return bytes((4 | (script[65] & 1),)) + script[2:34]
    return varint(size + 6) + script


def _fully_valid(key: bytes) -> bool:
    """``CPubKey::IsFullyValid``: the key is a point of secp256k1."""
    try:
        PublicKey(key)
    except ValueError:
        return False
    return True


def coin_bytes(vout: int, height: int, coinbase: bool, value: int, script: bytes) -> bytes:
    """One output as ``write_coins_to_file`` writes it: CompactSize vout, then the ``Coin``."""
    code = height * 2 + int(coinbase)
    return compact_size(vout) + varint(code) + varint(compress_amount(value)) + compress_script(script)


def header(network: str, base_block_hash: str, coins_count: int) -> bytes:
    """``SnapshotMetadata::Serialize``: magic, version 2, network magic, block hash, coin count."""
    return (
        b"utxo\xff"
        + (2).to_bytes(2, "little")
        + MAGIC[network]
        + bytes.fromhex(base_block_hash)[::-1]
        + coins_count.to_bytes(8, "little")
    )


def _cursor_key(coin: Coin) -> bytes:
    """The coins DB key order Core's cursor walks: ``'C' + txid (internal order) + VARINT(vout)``."""
    return coin[0][::-1] + varint(coin[1])


def write_snapshot(
    stream: BinaryIO,
    *,
    network: str,
    base_block_hash: str,
    coins: Iterable[Coin],
    coins_count: int | None = None,
) -> list[Coin]:
    """Write a snapshot of ``coins`` and return them in the order written: sorted by the DB
    key, then one group per txid (txid, CompactSize count, the coins), as Core writes.
    ``coins_count`` overrides the header's count (to make a malformed file)."""
    ordered = sorted(coins, key=_cursor_key)
    stream.write(header(network, base_block_hash, len(ordered) if coins_count is None else coins_count))
    index = 0
    while index < len(ordered):
        txid = ordered[index][0]
        group = index
        while group < len(ordered) and ordered[group][0] == txid:
            group += 1
        stream.write(txid[::-1] + compact_size(group - index))
        for _, vout, height, coinbase, value, script in ordered[index:group]:
            stream.write(coin_bytes(vout, height, coinbase, value, script))
        index = group
    return ordered
