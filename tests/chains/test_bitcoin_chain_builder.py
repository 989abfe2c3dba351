"""The test-side chain builder and block-file writer (``tests/bitcoin_chain.py``) against
the project's readers: ``parse_block`` must see the txids, hashes and links that were
built, ``block_revelations`` the keys, and ``block_records``/``read_records`` the records
of written block files, plain and XOR-obfuscated, preallocated or not, for built and for
real mainnet blocks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chains.bitcoin.blockfiles import MAGIC, block_records, deobfuscate, read_records
from chains.bitcoin.revelations import block_revelations
from chains.bitcoin.script import OutputType, classify_script
from chains.bitcoin.script import taproot_output_key as project_taproot_key
from chains.bitcoin.tx import parse_block, parse_transaction
from tests.bitcoin_chain import (
    BLOCKFILE_CHUNK_SIZE,
    MAINNET_MAGIC,
    REGTEST_BITS,
    ChainBuilder,
    coinbase,
    multisig,
    p2pk,
    p2pkh,
    p2tr,
    p2wpkh,
    public_key,
    push_number,
    revealing_blocks,
    spend_p2pkh,
    taproot_output_key,
    transaction,
    write_block_file,
    write_conformance_block_file,
    xor,
)

KEY = bytes.fromhex("5c1f0e7a93b2d481")
BLOCK_170 = "00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee"


def test_built_blocks_parse_to_the_same_hashes_and_links() -> None:
    builder = ChainBuilder()
    blocks = builder.branch(revealing_blocks(builder, builder.extend(None, 2)[-1]).blocks[-1])
    for height, built in enumerate(blocks):
        block = parse_block(built.raw)
        assert built.height == height
        assert (block.header.hash, block.header.prev_block, block.header.merkle_root) == (
            built.hash,
            built.prev_hash,
            built.merkle_root,
        )
        assert (block.header.bits, block.header.time) == (REGTEST_BITS, built.time)
        assert [(tx.txid, tx.wtxid) for tx in block.transactions] == [(t.txid, t.wtxid) for t in built.transactions]
        assert int(built.hash, 16) <= 0x7FFFFF << 232  # regtest proof of work
    assert blocks[0].prev_hash == "00" * 32 and [b.prev_hash for b in blocks[1:]] == [b.hash for b in blocks[:-1]]
    spend = parse_block(blocks[-1].raw).transactions[1]
    assert spend.has_witness and not spend.inputs[0].witness and spend.inputs[1].witness  # P2PKH legacy, P2WPKH segwit


def test_a_legacy_transaction_has_equal_txid_and_wtxid() -> None:
    built = transaction([spend_p2pkh("11" * 32, 0, 4)], [])
    parsed = parse_block(ChainBuilder().block(None, [built]).raw).transactions[1]
    assert not parsed.has_witness and parsed.txid == parsed.wtxid == built.txid == built.wtxid
    assert 71 <= len(parsed.inputs[0].script_sig) - 34 - 1 <= 73  # <sig> <33-byte key>: a DER-shaped signature


@pytest.mark.parametrize(
    ("height", "pushed"),
    [
        (0, "00"),
        (1, "51"),
        (16, "60"),
        (17, "0111"),
        (127, "017f"),
        (128, "028000"),
        (256, "020001"),
        (70_000, "03701101"),
    ],
)
def test_the_coinbase_starts_with_the_bip34_height(height: int, pushed: str) -> None:
    assert push_number(height).hex() == pushed
    built = coinbase(height, b"tag", p2wpkh(public_key(1)), [])
    parsed = parse_transaction(built.raw)
    assert parsed.inputs[0].is_coinbase and parsed.inputs[0].script_sig.startswith(bytes.fromhex(pushed))
    assert parsed.txid == built.txid and parsed.wtxid == built.wtxid


def test_blocks_carry_their_height_in_the_coinbase() -> None:
    blocks = ChainBuilder().extend(None, 18)
    for block in (blocks[0], blocks[16], blocks[17]):
        script_sig = parse_block(block.raw).transactions[0].inputs[0].script_sig
        assert script_sig.startswith(push_number(block.height))


def test_a_fork_grows_from_an_earlier_block() -> None:
    builder = ChainBuilder()
    chain_a = builder.extend(None, 6)
    branch_b = builder.extend(chain_a[3], 4)
    chain_b = builder.branch(branch_b[-1])
    assert [b.height for b in chain_b] == list(range(8)) and chain_b[:4] == chain_a[:4]
    assert branch_b[0].prev_hash == chain_a[3].hash and branch_b[0].hash != chain_a[4].hash
    assert len({b.hash for b in chain_a + branch_b}) == 10
    assert ChainBuilder().extend(None, 6) == chain_a  # deterministic: the same steps build the same blocks


def test_output_scripts_are_what_the_project_classifies() -> None:
    uncompressed = public_key(3, compressed=False)
    assert classify_script(p2pk(public_key(2))).keys == (public_key(2),)
    assert classify_script(p2pk(uncompressed)).output_type == OutputType.P2PK
    assert classify_script(p2pkh(uncompressed)).output_type == OutputType.P2PKH
    assert classify_script(p2wpkh(public_key(5))).output_type == OutputType.P2WPKH
    assert classify_script(multisig(1, [public_key(6), public_key(7)])).keys == (public_key(6), public_key(7))
    assert classify_script(p2tr(8)).keys == (taproot_output_key(8),) == (project_taproot_key(public_key(8)),)


def test_revealing_blocks_reveal_what_they_say() -> None:
    builder = ChainBuilder()
    revealing = revealing_blocks(builder, builder.extend(None, 2)[-1])
    found = {
        (r.pubkey, r.txid, r.kind.value)
        for built in revealing.blocks
        for r in block_revelations(parse_block(built.raw), built.height)
    }
    assert found == revealing.revealed and len(found) == 8


def test_coinbases_paying_p2pk_reveal_the_key_like_the_early_chain() -> None:
    miner = public_key(11, compressed=False)
    blocks = ChainBuilder(payout=p2pk(miner)).extend(None, 3)
    found = [(r.pubkey, r.txid, r.kind.value) for b in blocks for r in block_revelations(parse_block(b.raw), b.height)]
    assert found == [(miner, b.transactions[0].txid, "output") for b in blocks]


def test_a_plain_block_file_reads_back(tmp_path: Path) -> None:
    blocks = ChainBuilder().extend(None, 5)
    path = tmp_path / "blk00000.dat"
    offsets = write_block_file(path, blocks[::-1], magic=MAGIC["regtest"])
    assert list(block_records(path.read_bytes(), MAGIC["regtest"])) == list(
        zip(offsets, [b.raw for b in blocks[::-1]], strict=True)
    )
    assert not (tmp_path / "xor.dat").exists()


def test_an_obfuscated_block_file_reads_back_with_xor_dat(tmp_path: Path) -> None:
    blocks = ChainBuilder().extend(None, 3)
    path = tmp_path / "blk00000.dat"
    offsets = write_block_file(path, blocks, magic=MAGIC["regtest"], xor_key=KEY)
    stored, key = path.read_bytes(), (tmp_path / "xor.dat").read_bytes()
    assert key == KEY and MAGIC["regtest"] not in stored
    assert xor(stored, KEY) == deobfuscate(stored, KEY)  # the two XOR implementations agree
    expected = list(zip(offsets, [b.raw for b in blocks], strict=True))
    assert list(block_records(stored, MAGIC["regtest"], key)) == expected
    with path.open("rb") as stream:
        assert list(read_records(stream, MAGIC["regtest"], key)) == expected
    with pytest.raises(ValueError, match="another key"):
        write_block_file(tmp_path / "blk00001.dat", blocks, magic=MAGIC["regtest"], xor_key=bytes(8))


def test_preallocated_padding_ends_a_plain_file(tmp_path: Path) -> None:
    blocks = ChainBuilder().extend(None, 2)
    path = tmp_path / "blk00000.dat"
    write_block_file(path, blocks, magic=MAGIC["regtest"], preallocate=64 * 1024)
    data = path.read_bytes()
    assert len(data) == 64 * 1024 and not any(data[sum(len(b.raw) + 8 for b in blocks) :])
    assert [raw for _, raw in block_records(data, MAGIC["regtest"])] == [b.raw for b in blocks]


def test_the_preallocated_tail_of_an_obfuscated_file_is_raw_zeros(tmp_path: Path) -> None:
    blocks = ChainBuilder().extend(None, 2)
    path = tmp_path / "blk00000.dat"
    write_block_file(path, blocks, magic=MAGIC["regtest"], xor_key=KEY, preallocate=4096)
    stored = path.read_bytes()
    end = sum(len(b.raw) + 8 for b in blocks)
    assert len(stored) == 4096 and not any(stored[end:])  # as Core's fallocate leaves them: never obfuscated
    assert any(deobfuscate(stored, KEY)[end:])  # so deobfuscated, the tail is the key's bytes, not zeros
    assert [raw for _, raw in block_records(stored, MAGIC["regtest"], KEY)] == [b.raw for b in blocks]


@pytest.mark.parametrize("xor_key", [None, KEY])
def test_real_mainnet_blocks_as_a_block_file(tmp_path: Path, conformance_dir: Path, xor_key: bytes | None) -> None:
    path = tmp_path / "blk00000.dat"
    blocks = write_conformance_block_file(conformance_dir, path, xor_key=xor_key, preallocate=BLOCKFILE_CHUNK_SIZE)
    assert path.stat().st_size == BLOCKFILE_CHUNK_SIZE and MAINNET_MAGIC == MAGIC["mainnet"]
    with path.open("rb") as stream:
        records = [raw for _, raw in read_records(stream, MAGIC["mainnet"], xor_key or bytes(8))]
    assert records == list(blocks.values()) and list(blocks) == [170, 413_567, 702_861]
    assert parse_block(records[0]).header.hash == BLOCK_170
    assert len(parse_block(records[2]).transactions) == 2500
