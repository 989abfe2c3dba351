"""A short run of every coverage-guided fuzz harness (fuzz/fuzz_*.py), as `make test` runs it.

Each harness runs in its own process (libFuzzer exits when done) for a fixed number of
inputs and a fixed seed, so the run is bounded and repeatable; a crash (an exception that
is not the parser's documented error, or a broken round-trip property) fails the test with
libFuzzer's report. `make fuzz` runs the same harnesses for minutes each.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support import REPO_ROOT

HARNESSES = sorted(path.stem for path in (REPO_ROOT / "fuzz").glob("fuzz_*.py"))
RUNS = 4000


def test_every_parser_family_has_a_harness():
    assert HARNESSES == ["fuzz_addresses", "fuzz_bitcoin", "fuzz_bodies", "fuzz_hex", "fuzz_signatures"]


def test_body_harness_covers_exactly_the_endpoint_bodies():
    from api.app import all_endpoints
    from fuzz.fuzz_bodies import request_models

    assert set(request_models()) == {e.body for e in all_endpoints() if e.body is not None}


@pytest.mark.parametrize("harness", HARNESSES)
def test_harness_runs_clean(harness, tmp_path):
    env = {**os.environ, "FUZZ_CORPUS_DIR": str(tmp_path / "corpus"), "FUZZ_ARTIFACTS": str(tmp_path / "crashes")}
    done = subprocess.run(
        [sys.executable, "-m", f"fuzz.{harness}", f"-runs={RUNS}", "-seed=1", "-max_len=4096"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = "\n".join(line for line in done.stderr.splitlines() if "Instrumenting" not in line)
    assert done.returncode == 0, report[-4000:]
    # libFuzzer checks -runs between mutation rounds and counts the seed corpus, so it may stop a few
    # hundred runs later (Python's per-process hash seed changes the coverage path); never earlier.
    done_runs = re.search(r"^Done (\d+) runs", report, re.MULTILINE)
    assert done_runs and int(done_runs.group(1)) >= RUNS, report[-2000:]
    assert not list((tmp_path / "crashes").glob("*")), report[-2000:]
