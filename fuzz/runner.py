"""The one entry point of every harness: seed a corpus folder and hand over to libFuzzer.

Seeds are written to a fresh temporary folder (or ``$FUZZ_CORPUS_DIR/<harness>`` when set,
to keep what a long run finds), so the repository never fills up with generated inputs.
Crash reproducers go to ``$FUZZ_ARTIFACTS`` (default: the current folder).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import atheris

#: libFuzzer options every harness gets unless the command line says otherwise: bounded
#: memory and per-input time, so a run ends with a verdict instead of swapping.
DEFAULT_OPTIONS = ("-rss_limit_mb=2048", "-timeout=20")


def conformance_dir() -> Path | None:
    """The public test-vector folder (``QDAY_CONFORMANCE_DIR`` or ../shared/conformance), or None."""
    override = os.environ.get("QDAY_CONFORMANCE_DIR")
    root = Path(override) if override else Path(__file__).resolve().parent.parent.parent / "shared" / "conformance"
    return root if (root / "INDEX.md").is_file() else None


def _write_seeds(folder: Path, seeds: Iterable[bytes]) -> int:
    count = 0
    for seed in seeds:
        (folder / hashlib.sha256(seed).hexdigest()[:16]).write_bytes(seed)
        count += 1
    return count


def run(name: str, test_one_input: Callable[[bytes], None], seeds: Iterable[bytes]) -> None:
    """Run libFuzzer on ``test_one_input`` with ``seeds`` as the starting corpus and the
    command-line options of this process (``-runs=N``, ``-max_total_time=S`` ...).
    Never returns: libFuzzer exits with 0 when the budget is spent, non-zero on a crash."""
    options = [arg for arg in sys.argv[1:] if arg.startswith("-")]
    keep = os.environ.get("FUZZ_CORPUS_DIR")
    if keep:
        corpus = Path(keep) / name
        corpus.mkdir(parents=True, exist_ok=True)
    else:
        corpus = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    count = _write_seeds(corpus, seeds)
    artifacts = Path(os.environ.get("FUZZ_ARTIFACTS", "."))
    artifacts.mkdir(parents=True, exist_ok=True)
    print(f"fuzz {name}: {count} seeds in {corpus}", file=sys.stderr, flush=True)
    argv = [sys.argv[0], *DEFAULT_OPTIONS, f"-artifact_prefix={artifacts}/{name}-", *options, str(corpus)]
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
