"""Bitcoin Core UTXO snapshots (``dumptxoutset``, version 2): a file assembled byte by byte from
Core's source and read back field by field, Core's own amount-compression and VARINT vectors,
round trips through the test writer (tests/bitcoin_snapshot.py), every malformed file refused,
``script_type`` against ``classify_script``, and streaming in small batches and chunks.

Core sources cited (stored copies; the commit is the one the copy was read at):
``src/node/utxo_snapshot.h`` @0115e2f60165, ``src/rpc/blockchain.cpp`` @000c7e4cdb4c,
``src/coins.h`` @e980214bc4fd, ``src/compressor.cpp`` @00808d1f9e36, ``src/serialize.h``
@2400deb4a760, ``src/test/compress_tests.cpp`` @c59c9ddae2a1.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, cast

import coincurve
import pytest

from chains.bitcoin import utxo_snapshot
from chains.bitcoin.script import OutputType, classify_script
from chains.bitcoin.utxo_snapshot import (
    MAX_MONEY,
    METADATA_SIZE,
    SnapshotMetadata,
    compress_amount,
    decompress_amount,
    decompress_script,
    iter_coin_batches,
    read_metadata,
    script_type,
)
from chains.errors import MalformedChainData
from tests.bitcoin_snapshot import Coin, coin_bytes, compact_size, header, varint, write_snapshot

COIN = 100_000_000
CENT = 1_000_000
BLOCK9_KEY = bytes.fromhex(
    "0411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5c"
    "b2e0eaddfb84ccf9744464f82e160bfa9b8b64f9d4c03f999b8643f656b412a3"
)
BLOCK9_COMPRESSED = bytes.fromhex("0311db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5c")
BLOCK9_HASH160 = bytes.fromhex("11b366edfc0a8b66feebae5c2e25a7b6a5d1cf31")  # 12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S
BLOCK9_COMPRESSED_HASH160 = bytes.fromhex("197a438a75ceee7e58a03ebab3eabf9afd8080c2")
#: The generator point G, uncompressed: y is even, so Core stores it as special script 4.
G_KEY = bytes.fromhex(
    "0479be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
    "483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8"
)
BLOCK9_COINBASE = "0437cd7f8525ceed2324359c2d0ba26006d92d856a9c20fa0241106ee5a597c9"
BLOCK170_HASH = "00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee"
P2SH_HASH = bytes(range(0x40, 0x54))
TAPROOT_KEY = bytes(range(0x60, 0x80))
TXID_2 = bytes(range(1, 33))
TXID_3 = bytes(range(0xA0, 0xC0))
NONSTANDARD = bytes((0x51,)) * 200  # 200 x OP_1: a raw script whose size needs a 2-byte VARINT
NOT_ON_CURVE_X = (5).to_bytes(32, "big")  # x^3 + 7 is no square mod p for x = 5

# --- (a) A snapshot assembled by hand, field by field from Core's source ------------------

HAND_HEADER = bytes.fromhex(
    # utxo_snapshot.h SnapshotMetadata::Serialize, `s << SNAPSHOT_MAGIC_BYTES;` = {'u','t','x','o',0xff}
    "7574786fff"
    # `s << VERSION;` static constexpr uint16_t VERSION{2}, little-endian
    "0200"
    # `s << m_network_magic;` mainnet pchMessageStart
    "f9beb4d9"
    # `s << m_base_blockhash;` a uint256 in its internal (little-endian) order: block 170's hash reversed
    "eea2d48d2fced4346842835c659e493d323f06d4034469a8905714d100000000"
    # `s << m_coins_count;` uint64 little-endian: 8 coins
    "0800000000000000"
)

# The groups in Core's cursor order (coins DB key 'C' + txid + VARINT(vout), i.e. by txid in file order).
HAND_GROUP_1 = (
    bytes.fromhex(
        # blockchain.cpp write_coins_to_file: `afile << last_hash;` a txid, 32 bytes as serialized: 0x01..0x20
        "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
        "06"  # `WriteCompactSize(afile, coins.size());` six coins
        # -- vout 0: P2PKH
        "00"  # `WriteCompactSize(afile, n);`
        # coins.h Coin::Serialize: `uint32_t code = nHeight * uint32_t{2} + fCoinBase; ::Serialize(s, VARINT(code));`
        "e5c400"  # height 840000, not coinbase: code 1680000, whose serialize.h WriteVarInt digits are e5 c4 00
        # compressor.h TxOutCompression -> AmountCompression::Ser: `s << VARINT(CompressAmount(val));`
        "09"  # CompressAmount(COIN) = 0x9
        # compressor.h ScriptCompression::Ser -> compressor.cpp CompressScript, IsToKeyID: `out[0] = 0x00;`
        "00"
        "11b366edfc0a8b66feebae5c2e25a7b6a5d1cf31"  # `memcpy(&out[1], &keyID, HASH160_OUTPUT_SIZE);`
        # -- vout 1: P2SH
        "01"
        "e5c400"
        "07"  # CompressAmount(CENT) = 0x7
        "01"  # IsToScriptID: `out[0] = 0x01;`
        "404142434445464748494a4b4c4d4e4f50515253"  # the 20-byte script hash
        # -- vout 2: P2PK of the compressed block-9 key
        "02"
        "e5c400"
        "a52f"  # CompressAmount(546) = 1 + (54*9 + 6 - 1)*10 + 0 = 4911: VARINT a5 2f
        "03"  # IsToPubKey, compressed: `out[0] = pubkey[0];`
        "11db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5c"  # `memcpy(&out[1], &pubkey[1], 32)`
        # -- vout 3: P2PK of G uncompressed
        "03"
        "e5c400"
        "00"  # CompressAmount(0) = 0
        "04"  # `out[0] = 0x04 | (pubkey[64] & 0x01);` G's y ends 0xb8, even
        "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"  # x
        # -- vout 4: P2WPKH, no special form
        "04"
        "e5c400"
        "8980dd40"  # CompressAmount(21000000*COIN) = 0x1406f40
        "1c"  # ScriptCompression::Ser: `unsigned int nSize = script.size() + nSpecialScripts;` 22 + 6 = 28
        "0014197a438a75ceee7e58a03ebab3eabf9afd8080c2"  # `s << std::span{script};`
        # -- vout 300: `WriteCompactSize(afile, n)` with n >= 253: 0xfd, then a uint16 little-endian
        "fd2c01"
        "8154"  # height 170, not coinbase: code 340, VARINT 81 54
        "04"  # CompressAmount(1000) = 1 + (0*9 + 1 - 1)*10 + 3 = 4
        "804e"  # nSize = 200 + 6 = 206: VARINT 80 4e, two digits; the 200 raw bytes follow
    )
    + NONSTANDARD
)
HAND_GROUP_2 = bytes.fromhex(
    "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"  # txid
    "01"  # one coin
    "00"  # vout 0
    "e5c401"  # height 840000, coinbase: code 1680001
    "a52f"  # 546 satoshis
    "28"  # nSize = 34 + 6 = 40
    "5120606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"  # P2TR
)
HAND_GROUP_3 = bytes.fromhex(
    "c997a5e56e104102fa209c6a852dd90660a20b2d9c352423edce25857fcd3704"  # the block-9 coinbase txid, reversed
    "01"  # one coin
    "00"  # vout 0
    "13"  # height 9, coinbase: code 19
    "32"  # CompressAmount(50*COIN) = 0x32
    # CompressScript, uncompressed P2PK: `out[0] = 0x04 | (pubkey[64] & 0x01);` the key's y ends 0xa3, odd
    "05"
    "11db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5c"  # x
)
HAND_BODY = HAND_GROUP_1 + HAND_GROUP_2 + HAND_GROUP_3

HAND_COINS: list[Coin] = [
    (TXID_2[::-1], 0, 840_000, False, COIN, b"\x76\xa9\x14" + BLOCK9_HASH160 + b"\x88\xac"),
    (TXID_2[::-1], 1, 840_000, False, CENT, b"\xa9\x14" + P2SH_HASH + b"\x87"),
    (TXID_2[::-1], 2, 840_000, False, 546, b"\x21" + BLOCK9_COMPRESSED + b"\xac"),
    (TXID_2[::-1], 3, 840_000, False, 0, b"\x41" + G_KEY + b"\xac"),
    (TXID_2[::-1], 4, 840_000, False, 21_000_000 * COIN, b"\x00\x14" + BLOCK9_COMPRESSED_HASH160),
    (TXID_2[::-1], 300, 170, False, 1000, NONSTANDARD),
    (TXID_3[::-1], 0, 840_000, True, 546, b"\x51\x20" + TAPROOT_KEY),
    (bytes.fromhex(BLOCK9_COINBASE), 0, 9, True, 50 * COIN, b"\x41" + BLOCK9_KEY + b"\xac"),
]


def columns(data: bytes, batch_size: int = 65_536) -> tuple[SnapshotMetadata, list[Coin]]:
    """The header and every coin of a snapshot, as rows, read in batches of ``batch_size``."""
    stream = io.BytesIO(data)
    metadata = read_metadata(stream)
    rows: list[Coin] = []
    for batch in iter_coin_batches(stream, metadata, batch_size):
        assert len({len(column) for column in (batch.txid, batch.height, batch.coinbase, batch.value)}) == 1
        rows += zip(batch.txid, batch.vout, batch.height, batch.coinbase, batch.value, batch.script, strict=True)
    return metadata, rows


def snapshot(coins: list[Coin], **options: Any) -> tuple[bytes, list[Coin]]:
    """A mainnet snapshot of ``coins`` from the test writer, and the coins in file order."""
    out = io.BytesIO()
    written = write_snapshot(out, network="mainnet", base_block_hash=BLOCK170_HASH, coins=coins, **options)
    return out.getvalue(), written


def test_a_hand_assembled_snapshot_reads_field_by_field() -> None:
    metadata, rows = columns(HAND_HEADER + HAND_BODY)
    assert metadata == SnapshotMetadata(version=2, network="mainnet", base_block_hash=BLOCK170_HASH, coins_count=8)
    assert rows == HAND_COINS
    assert rows[-1][0].hex() == BLOCK9_COINBASE  # display order: the txid block 170 spends
    assert len(HAND_HEADER) == METADATA_SIZE


def test_the_writer_writes_the_hand_assembled_bytes() -> None:
    data, written = snapshot(HAND_COINS[::-1])  # any input order: Core's cursor order comes out
    assert data == HAND_HEADER + HAND_BODY
    assert written == HAND_COINS


@pytest.mark.parametrize(
    ("kind", "payload", "script"),
    [
        (0, BLOCK9_HASH160, b"\x76\xa9\x14" + BLOCK9_HASH160 + b"\x88\xac"),
        (1, P2SH_HASH, b"\xa9\x14" + P2SH_HASH + b"\x87"),
        (3, BLOCK9_COMPRESSED[1:], b"\x21" + BLOCK9_COMPRESSED + b"\xac"),
        (5, BLOCK9_KEY[1:33], b"\x41" + BLOCK9_KEY + b"\xac"),
        (4, G_KEY[1:33], b"\x41" + G_KEY + b"\xac"),
    ],
)
def test_decompress_script_follows_core(kind: int, payload: bytes, script: bytes) -> None:
    assert decompress_script(kind, payload) == script


def test_decompress_script_refuses_bad_payloads() -> None:
    with pytest.raises(MalformedChainData, match="no secp256k1 point"):
        decompress_script(4, NOT_ON_CURVE_X)
    with pytest.raises(MalformedChainData, match="20-byte payload, got 32"):
        decompress_script(0, bytes(32))
    with pytest.raises(ValueError, match="0..5"):
        decompress_script(6, bytes(32))


# --- (b) Core's amount compression and VARINT vectors --------------------------------------

# src/test/compress_tests.cpp @c59c9ddae2a1, BOOST_AUTO_TEST_CASE(compress_amounts): TestPair(dec, enc)
CORE_AMOUNT_PAIRS = [(0, 0x0), (1, 0x1), (CENT, 0x7), (COIN, 0x9), (50 * COIN, 0x32), (21_000_000 * COIN, 0x1406F40)]


@pytest.mark.parametrize(("amount", "compressed"), CORE_AMOUNT_PAIRS)
def test_core_amount_compression_pairs(amount: int, compressed: int) -> None:
    assert compress_amount(amount) == compressed
    assert decompress_amount(compressed) == amount


def test_core_amount_compression_round_trips() -> None:
    # compress_tests.cpp: TestEncode over NUM_MULTIPLES_UNIT (100000) units, NUM_MULTIPLES_CENT (10000)
    # cents, NUM_MULTIPLES_1BTC (10000) coins and NUM_MULTIPLES_50BTC (420000) x 50 BTC; TestDecode 0..99999.
    for unit, count in ((1, 100_000), (CENT, 10_000), (COIN, 10_000), (50 * COIN, 420_000)):
        assert all(decompress_amount(compress_amount(i * unit)) == i * unit for i in range(1, count + 1))
    assert all(compress_amount(decompress_amount(i)) == i for i in range(100_000))


def test_compress_amount_refuses_what_is_no_amount() -> None:
    for amount in (-1, MAX_MONEY + 1):
        with pytest.raises(ValueError, match="MAX_MONEY"):
            compress_amount(amount)


# src/serialize.h @2400deb4a760, the examples in the comment above VarIntMode.
CORE_VARINTS = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8000"),
    (255, "807f"),
    (256, "8100"),
    (16383, "fe7f"),
    (16384, "ff00"),
    (16511, "ff7f"),
    (65535, "82fe7f"),
    (2**32, "8efefeff00"),
]


@pytest.mark.parametrize(("number", "encoding"), CORE_VARINTS)
def test_core_varint_examples(number: int, encoding: str) -> None:
    assert varint(number).hex() == encoding
    # The reader decodes the same bytes as a coin's VARINT(height * 2 + coinbase).
    coin = bytes.fromhex("00" + encoding + "00" + "1c") + b"\x00\x14" + bytes(20)
    data = header("mainnet", BLOCK170_HASH, 1) + TXID_2 + b"\x01" + coin
    if number >> 1 > 2**31 - 1:
        with pytest.raises(MalformedChainData, match="has height 2147483648, above 2147483647"):
            columns(data)
        return
    _, [row] = columns(data)
    assert (row[2], row[3]) == (number >> 1, number & 1 == 1)


def test_compact_sizes_of_every_width() -> None:
    # src/serialize.h WriteCompactSize: < 253 one byte; <= 0xffff: 253 + uint16; <= 0xffffffff: 254 + uint32
    assert [compact_size(n).hex() for n in (252, 253, 0xFFFF, 0x10000, 2**32 - 1)] == [
        "fc",
        "fdfd00",
        "fdffff",
        "fe00000100",
        "feffffffff",
    ]
    coins = [(TXID_2, vout, 1, False, 1, b"") for vout in (252, 253, 0xFFFF, 0x10000, 2**32 - 1)]
    data, written = snapshot(coins)
    assert columns(data)[1] == written


# --- (c) Round trips through the writer ----------------------------------------------------


def _key(rng: random.Random, compressed: bool) -> bytes:
    return coincurve.PrivateKey(rng.randbytes(31) + b"\x01").public_key.format(compressed=compressed)


def random_script(rng: random.Random) -> bytes:
    """A scriptPubKey of every kind the UTXO set holds, special forms and raw ones."""
    kind = rng.randrange(15)
    if kind == 0:
        return b"\x76\xa9\x14" + rng.randbytes(20) + b"\x88\xac"
    if kind == 1:
        return b"\xa9\x14" + rng.randbytes(20) + b"\x87"
    if kind == 2:
        return b"\x21" + _key(rng, True) + b"\xac"
    if kind == 3:
        return b"\x41" + _key(rng, False) + b"\xac"  # special 4/5: decompressed on reading
    if kind == 4:
        hybrid = bytearray(_key(rng, False))
        hybrid[0] = 6 + (hybrid[-1] & 1)  # hybrid encoding: no special form, stored raw
        return b"\x41" + bytes(hybrid) + b"\xac"
    if kind == 5:
        return b"\x41\x04" + NOT_ON_CURVE_X + rng.randbytes(32) + b"\xac"  # not fully valid: raw
    if kind == 6:
        return b"\x00\x14" + rng.randbytes(20)
    if kind == 7:
        return b"\x00\x20" + rng.randbytes(32)
    if kind == 8:
        return b"\x51\x20" + rng.randbytes(32)
    if kind == 9:
        keys = [_key(rng, rng.random() < 0.5) for _ in range(3)]
        return b"\x52" + b"".join(bytes((len(k),)) + k for k in keys) + b"\x53\xae"  # bare 2-of-3
    if kind == 10:
        return b"\x6a" + bytes((20,)) + rng.randbytes(20)  # OP_RETURN
    if kind == 11:
        return b""
    if kind == 12:
        return rng.randbytes(rng.randrange(1, 40))
    if kind == 13:
        return rng.randbytes(rng.choice((122, 500, 10_000)))  # VARINT sizes of 1 to 2 bytes, up to the limit
    return b"\x52\x20" + rng.randbytes(32)  # witness v2 (P2MR): other


def random_coins(rng: random.Random, count: int) -> list[Coin]:
    """``count`` coins in random txid groups, with heights, vouts and values of every width."""
    coins: list[Coin] = []
    while len(coins) < count:
        txid = rng.randbytes(32)
        vouts = rng.sample(range(rng.choice((8, 300, 70_000))), rng.choice((1, 1, 2, 3, 5)))
        for vout in vouts:
            height = rng.choice((0, rng.randrange(64), rng.randrange(1_000_000), rng.randrange(2**31)))
            value = rng.choice(
                (0, 1, 546, rng.randrange(MAX_MONEY + 1), rng.randrange(1, 2100) * 10 ** rng.randrange(13))
            )
            coins.append((txid, vout, height, rng.random() < 0.2, min(value, MAX_MONEY), random_script(rng)))
    return coins[:count]


def test_random_coins_round_trip() -> None:
    rng = random.Random(20240828)
    data, written = snapshot(random_coins(rng, 3000))
    metadata, rows = columns(data, batch_size=256)
    assert metadata.coins_count == len(written) == len(rows) == 3000
    assert rows == written
    kinds = {script_type(row[5])[0] for row in rows}
    assert kinds == {"p2pk", "p2pkh", "p2sh", "p2wpkh", "p2wsh", "p2tr", "multisig", "other"}


def test_a_script_over_max_script_size_reads_as_op_return(monkeypatch: pytest.MonkeyPatch) -> None:
    # compressor.h ScriptCompression::Unser: `if (nSize > MAX_SCRIPT_SIZE) { script << OP_RETURN; s.ignore(nSize); }`
    coins = [(TXID_2, 0, 5, False, 7, b"\x00" * 10_001), (TXID_2, 1, 6, False, 8, b"\x51\x20" + TAPROOT_KEY)]
    data, _ = snapshot(coins)
    for chunk in (1 << 20, 256):  # held in the buffer, then skipped past the buffer
        monkeypatch.setattr(utxo_snapshot, "_CHUNK_SIZE", chunk)
        assert [row[5] for row in columns(data)[1]] == [b"\x6a", coins[1][5]]
    with pytest.raises(MalformedChainData, match="ends before the end of coin 0 of 2, which starts at offset 51"):
        columns(data[:5_000])


def test_a_batch_holds_at_least_one_coin() -> None:
    stream = io.BytesIO(HAND_HEADER + HAND_BODY)
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        next(iter_coin_batches(stream, read_metadata(stream), batch_size=0))


def test_an_empty_snapshot() -> None:
    data, _ = snapshot([])
    metadata, rows = columns(data)
    assert (metadata.coins_count, rows) == (0, [])


# --- (d) Malformed files -------------------------------------------------------------------


def _expect(data: bytes, match: str) -> MalformedChainData:
    with pytest.raises(MalformedChainData, match=match) as caught:
        columns(data)
    return caught.value


def test_a_wrong_magic_is_refused_with_a_word_about_old_snapshots() -> None:
    _expect(b"utxp\xff" + HAND_HEADER[5:] + HAND_BODY, "magic bytes 75747870ff at offset 0, expected 7574786fff")
    # A Core 27 file starts with the base block hash: no magic at all.
    old = HAND_HEADER[11:] + HAND_BODY
    assert "before 28.0" in str(_expect(old, "not a dumptxoutset file"))


@pytest.mark.parametrize("version", [0, 1, 3, 0xFFFF])
def test_an_unknown_version_is_refused(version: int) -> None:
    data = HAND_HEADER[:5] + version.to_bytes(2, "little") + HAND_HEADER[7:] + HAND_BODY
    _expect(data, f"version {version} at offset 5 is not supported")


def test_an_unknown_network_magic_is_refused() -> None:
    data = HAND_HEADER[:7] + bytes.fromhex("deadbeef") + HAND_HEADER[11:] + HAND_BODY
    _expect(data, "network magic deadbeef at offset 7 is not one of mainnet, testnet3, testnet4, signet, regtest")


@pytest.mark.parametrize("network", ["testnet3", "testnet4", "signet", "regtest"])
def test_every_known_network_is_named(network: str) -> None:
    data = header(network, BLOCK170_HASH, 0)
    assert read_metadata(io.BytesIO(data)).network == network


def test_every_truncation_is_refused() -> None:
    data = HAND_HEADER + HAND_BODY
    for cut in range(METADATA_SIZE):
        with pytest.raises(MalformedChainData, match=f"header is {cut} bytes, expected 51"):
            read_metadata(io.BytesIO(data[:cut]))
    starts = [METADATA_SIZE]  # where each coin starts (its group's txid included)
    for _, vout, height, coinbase, value, script in HAND_COINS:
        group = 33 if vout == 0 else 0
        starts.append(starts[-1] + group + len(coin_bytes(vout, height, coinbase, value, script)))
    assert starts[-1] == len(data)
    for batch_size in (1, 3, 8):  # a coin cut short is last of its batch, or followed by another
        for cut in range(METADATA_SIZE, len(data)):
            coin = max(i for i, start in enumerate(starts) if start <= cut)
            match = f"the file ends before the end of coin {coin} of 8, which starts at offset {starts[coin]}"
            with pytest.raises(MalformedChainData, match=match) as caught:
                columns(data[:cut], batch_size)
            assert caught.value.details == {"offset": starts[coin]}


def test_trailing_bytes_are_refused() -> None:
    data = HAND_HEADER + HAND_BODY
    error = _expect(data + b"\x00", f"trailing data at offset {len(data)}, after the 8 coins the header announces")
    assert error.details == {"offset": len(data)}


def test_a_header_count_that_disagrees_with_the_body_is_refused() -> None:
    data, _ = snapshot(HAND_COINS, coins_count=9)
    _expect(data, "ends before the end of coin 8 of 9")
    data, _ = snapshot(HAND_COINS, coins_count=7)  # the last group (one coin) is left over
    _expect(data, f"trailing data at offset {METADATA_SIZE + len(HAND_GROUP_1 + HAND_GROUP_2)}")
    data, _ = snapshot(HAND_COINS, coins_count=5)  # the six-coin group does not fit
    _expect(data, "a txid group of 6 coins, with 5 of 5 coins left in coin 0 of 5, at offset 51")


def _one_coin(coin: bytes, group: str = "01") -> bytes:
    return header("mainnet", BLOCK170_HASH, 1) + TXID_2 + bytes.fromhex(group) + coin


def test_a_point_not_on_the_curve_is_refused() -> None:
    for kind in ("04", "05"):
        coin = bytes.fromhex("00" + "13" + "32" + kind) + NOT_ON_CURVE_X
        error = _expect(_one_coin(coin), f"special script {int(kind)} \\(uncompressed P2PK\\): x=0{'0' * 62}5")
        assert "no secp256k1 point in coin 0 of 1, at offset 51" in str(error)


@pytest.mark.parametrize(
    ("group", "coin", "match"),
    [
        ("00", "", "a txid group of 0 coins"),
        ("fd0100", "", "non-canonical CompactSize fd0100"),  # a count of 1 in three bytes
        ("01", "fd0500" + "00001c" + "0014" + "00" * 20, "non-canonical CompactSize fd0500"),
        ("01", "ff0000000001000000" + "00001c" + "0014" + "00" * 20, "has vout 4294967296, above 4294967295"),
        ("01", "00" + "00" + varint(21_000_010).hex() + "1c" + "0014" + "00" * 20, "value 2100001000000000, above"),
    ],
)
def test_malformed_coins_are_refused(group: str, coin: str, match: str) -> None:
    _expect(_one_coin(bytes.fromhex(coin), group), match)


def test_an_endless_varint_inside_the_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(utxo_snapshot, "_CHUNK_SIZE", 256)
    data = _one_coin(bytes.fromhex("00" + "80" * 2000 + "00"))
    _expect(data, "an over-long VARINT in coin 0 of 1, at offset 51")


# --- (e) script_type ------------------------------------------------------------------------

P2TR_OUTPUT = bytes.fromhex("a60869f0dbcf1dc659c9cecbaf8050135ea9e8cdc487053f1dc6880949dc684c")
P2WSH_HASH = bytes.fromhex("1863143c14c5166804bd19203356da136c985678cd4d27a1b8c6329604903262")
_NAMES = {
    OutputType.P2PK: "p2pk",
    OutputType.P2PKH: "p2pkh",
    OutputType.P2SH: "p2sh",
    OutputType.P2WPKH: "p2wpkh",
    OutputType.P2WSH: "p2wsh",
    OutputType.P2TR: "p2tr",
    OutputType.P2MS: "multisig",
}


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (b"\x41" + BLOCK9_KEY + b"\xac", ("p2pk", BLOCK9_KEY)),
        (b"\x21" + BLOCK9_COMPRESSED + b"\xac", ("p2pk", BLOCK9_COMPRESSED)),
        (b"\x76\xa9\x14" + BLOCK9_HASH160 + b"\x88\xac", ("p2pkh", BLOCK9_HASH160)),
        (b"\xa9\x14" + P2SH_HASH + b"\x87", ("p2sh", P2SH_HASH)),
        (b"\x00\x14" + BLOCK9_COMPRESSED_HASH160, ("p2wpkh", BLOCK9_COMPRESSED_HASH160)),
        (b"\x00\x20" + P2WSH_HASH, ("p2wsh", P2WSH_HASH)),
        (b"\x51\x20" + P2TR_OUTPUT, ("p2tr", P2TR_OUTPUT)),
        (b"\x51\x21" + BLOCK9_COMPRESSED + b"\x41" + BLOCK9_KEY + b"\x52\xae", ("multisig", None)),
        (b"\x6a\x04test", ("other", None)),
        (b"", ("other", None)),
        (b"\x52\x20" + P2TR_OUTPUT, ("other", None)),  # witness v2 (P2MR)
        (b"\x00\x15" + bytes(21), ("other", None)),  # witness v0 of no defined length
        (b"\x21" + BLOCK9_KEY[:33] + b"\xac", ("other", None)),  # 0x04 prefix in 33 bytes: no key
    ],
)
def test_script_type_of_each_kind(script: bytes, expected: tuple[str, bytes | None]) -> None:
    assert script_type(script) == expected
    assert script_type(script) == _from_classify(script)


def _from_classify(script: bytes) -> tuple[str, bytes | None]:
    info = classify_script(script)
    name = _NAMES.get(info.output_type, "other")
    if name == "p2pk":
        return name, info.keys[0]
    return name, None if name in ("multisig", "other") else info.program


def _mutations(rng: random.Random, script: bytes) -> Iterator[bytes]:
    yield script
    if script:
        flipped = bytearray(script)
        flipped[rng.randrange(len(script))] ^= 1 << rng.randrange(8)
        yield bytes(flipped)
        yield script[:-1]
        yield script[1:]
    yield script + b"\x00"


def test_script_type_equals_classify_script_on_many_scripts() -> None:
    rng = random.Random(7)
    checked = 0
    for _ in range(4000):
        for script in _mutations(rng, random_script(rng)):
            assert script_type(script) == _from_classify(script), script.hex()
            checked += 1
    for size in range(70):
        for _ in range(30):
            script = rng.randbytes(size)
            assert script_type(script) == _from_classify(script), script.hex()
    assert checked > 15_000


# --- (f) Streaming ----------------------------------------------------------------------------


class Trickle(io.RawIOBase):
    """A stream that hands out at most ``most`` bytes a read (as a pipe does) and records the
    largest read asked for."""

    def __init__(self, data: bytes, most: int) -> None:
        self.data, self.pos, self.most, self.largest = data, 0, most, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        assert size is not None and size > 0, "the reader must never read the whole file"
        self.largest = max(self.largest, size)
        piece = self.data[self.pos : self.pos + min(size, self.most)]
        self.pos += len(piece)
        return piece


def _cheap_coins(count: int) -> list[Coin]:
    rng = random.Random(3)
    templates: list[Callable[[], bytes]] = [
        lambda: b"\x00\x14" + rng.randbytes(20),
        lambda: b"\x76\xa9\x14" + rng.randbytes(20) + b"\x88\xac",
        lambda: b"\x51\x20" + rng.randbytes(32),
        lambda: b"\xa9\x14" + rng.randbytes(20) + b"\x87",
        lambda: b"\x41" + G_KEY + b"\xac",
        lambda: rng.randbytes(rng.randrange(300)),
    ]
    coins: list[Coin] = []
    while len(coins) < count:
        txid = rng.randbytes(32)
        for vout in range(rng.choice((1, 1, 2, 3))):
            script = templates[rng.randrange(len(templates))]()
            coins.append((txid, vout, rng.randrange(900_000), rng.random() < 0.01, rng.randrange(10**10), script))
    return coins[:count]


def test_small_batches_and_chunks_give_the_same_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    data, written = snapshot(_cheap_coins(200_000))
    stream = io.BytesIO(data)
    metadata = read_metadata(stream)
    (whole,) = iter_coin_batches(stream, metadata, batch_size=200_000)
    monkeypatch.setattr(utxo_snapshot, "_CHUNK_SIZE", 300)
    trickle = Trickle(data, most=40)  # the header too comes in two reads
    assert read_metadata(cast(BinaryIO, trickle)) == metadata
    batches = list(iter_coin_batches(cast(BinaryIO, trickle), metadata, batch_size=997))
    assert [len(b) for b in batches] == [997] * 200 + [600]
    for field in ("txid", "vout", "height", "coinbase", "value", "script"):
        assert [v for b in batches for v in getattr(b, field)] == getattr(whole, field), field
    assert list(zip(whole.txid, whole.vout, whole.height, whole.coinbase, whole.value, whole.script, strict=True)) == (
        written
    )
    assert trickle.largest <= 1024  # a chunk, the longest coin and the margin: memory stays flat
