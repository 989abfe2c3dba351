"""Bitcoin Core block files: records framed around real mainnet blocks, obfuscated the way
Bitcoin Core 28+ does with ``xor.dat``, and read back.

The files are constructed here from the raw blocks of ``../shared/conformance/bitcoin/blocks``
(block 170 and block 702861): Bitcoin Core's record layout (magic, little-endian size,
block) and XOR rule (byte ``i`` of the file XOR ``key[i % 8]``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chains.bitcoin.blockfiles import MAGIC, block_records, deobfuscate
from chains.bitcoin.tx import parse_block
from chains.errors import MalformedChainData

KEY = bytes.fromhex("5c1f0e7a93b2d481")


def framed(*blocks: bytes, magic: bytes = MAGIC["mainnet"], padding: int = 64) -> bytes:
    return b"".join(magic + len(b).to_bytes(4, "little") + b for b in blocks) + bytes(padding)


@pytest.fixture
def blocks(conformance_dir: Path) -> list[bytes]:
    folder = conformance_dir / "bitcoin" / "blocks"
    return [(folder / name).read_bytes() for name in ("block170.raw", "mainnet_block_0c835b.raw")]


def test_an_obfuscated_file_reads_back_to_the_real_blocks(blocks: list[bytes]) -> None:
    plain = framed(*blocks)
    stored = deobfuscate(plain, KEY)  # what Bitcoin Core 28+ writes
    assert stored != plain
    records = list(block_records(deobfuscate(stored, KEY), MAGIC["mainnet"]))
    assert [raw for _, raw in records] == blocks
    assert [offset for offset, _ in records] == [0, 8 + len(blocks[0])]
    first = parse_block(records[0][1])
    assert first.header.hash == "00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee"  # block 170


def test_reading_from_an_offset_keeps_the_key_phase(blocks: list[bytes]) -> None:
    stored = deobfuscate(framed(*blocks), KEY)
    second = 8 + len(blocks[0])
    tail = deobfuscate(stored[second:], KEY, offset=second)
    (record,) = block_records(tail, MAGIC["mainnet"])
    assert record[1] == blocks[1]


@given(st.binary(max_size=200), st.binary(min_size=8, max_size=8), st.integers(0, 10_000))
def test_deobfuscation_is_its_own_inverse(data: bytes, key: bytes, offset: int) -> None:
    assert deobfuscate(deobfuscate(data, key, offset), key, offset) == data


def test_a_zero_key_leaves_old_files_unchanged(blocks: list[bytes]) -> None:
    plain = framed(blocks[0])
    assert deobfuscate(plain, bytes(8)) == plain


def test_another_network_or_a_cut_record_is_refused(blocks: list[bytes]) -> None:
    with pytest.raises(MalformedChainData, match="magic"):
        list(block_records(framed(blocks[0], magic=MAGIC["testnet4"]), MAGIC["mainnet"]))
    cut = framed(blocks[0], padding=0)[:-10]
    with pytest.raises(MalformedChainData, match="cut short"):
        list(block_records(cut, MAGIC["mainnet"]))
    with pytest.raises(ValueError):
        deobfuscate(b"abc", b"short")


def test_zero_padding_ends_the_file(blocks: list[bytes]) -> None:
    assert len(list(block_records(framed(blocks[0], padding=16 * 1024), MAGIC["mainnet"]))) == 1
    assert list(block_records(bytes(1024), MAGIC["mainnet"])) == []
