"""Resource identifiers: format, no repeats, and no bytes shared with a forked child."""

from __future__ import annotations

import os
import re

from core.ids import new_id


def test_identifiers_have_the_prefix_and_120_random_bits():
    assert re.fullmatch(r"att_[0-9a-f]{30}", new_id("att"))


def test_no_identifier_repeats_across_many_pool_refills():
    ids = [new_id("req") for _ in range(5000)]
    assert len(set(ids)) == len(ids)


def test_a_forked_child_does_not_reuse_the_parents_pooled_bytes():
    new_id("req")  # the parent's pool now holds unused bytes
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only os-level calls, then leave at once
        os.write(write_end, " ".join(new_id("req") for _ in range(10)).encode())
        os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    child_ids = set(os.read(read_end, 4096).decode().split())
    os.close(read_end)
    assert status == 0 and len(child_ids) == 10
    assert not child_ids & {new_id("req") for _ in range(10)}
