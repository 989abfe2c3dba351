"""The master secret file: created once with owner-only permissions, the same for every
process that starts at the same time, and refused when damaged."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from services.credentials import load_master_secret

STARTERS = 8
ROUNDS = 200  # the window between creating the file and writing it is short: try it often


def _start_together(directory) -> list[bytes]:
    barrier = threading.Barrier(STARTERS)

    def start(_: int) -> bytes:
        barrier.wait()
        return load_master_secret("", directory)

    with ThreadPoolExecutor(STARTERS) as pool:
        return list(pool.map(start, range(STARTERS)))


def test_concurrent_starters_agree_on_one_complete_secret(tmp_path):
    for round_ in range(ROUNDS):
        directory = tmp_path / str(round_)
        secrets = _start_together(directory)
        assert len(set(secrets)) == 1 and len(secrets[0]) == 32
        assert (directory / "master.key").read_text() == secrets[0].hex()
        assert [p.name for p in directory.iterdir()] == ["master.key"], "drafts left behind"
    assert (directory / "master.key").stat().st_mode & 0o077 == 0
    assert load_master_secret("", directory) == secrets[0]


def test_a_truncated_secret_stops_start_up(tmp_path):
    (tmp_path / "master.key").write_text("ab" * 10)
    with pytest.raises(ValueError, match="truncated or empty"):
        load_master_secret("", tmp_path)


def test_a_configured_secret_wins(tmp_path):
    assert load_master_secret("11" * 32, tmp_path) == bytes([0x11]) * 32
    assert not (tmp_path / "master.key").exists()
