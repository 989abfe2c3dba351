"""Benchmark: ingesting Bitcoin Core block files into the key-exposure index, against parsing them.

Run with ``.venv/bin/python -m bench.bench_bitcoin_index [--files 4] [--blocks 16] [--lookups 50]``
(about 70 s on 2 cores at the defaults). It needs the conformance vectors (``../shared/conformance``
or ``QDAY_CONFORMANCE_DIR``) and prints SKIPPED without them.

**Input.** ``--files`` block files of ``--blocks`` records each, written as Bitcoin Core 28+ writes
them (mainnet magic, obfuscated with an ``xor.dat`` key), made of the two realistic real mainnet
blocks of the conformance set in turn: 413567 (1,557 transactions, 1.0 MB, 6,149 keys revealed)
and 702861 (2,500 transactions, 1.4 MB, 6,352 keys). Block 170 (2 transactions) is left out: it
would count as a block while costing nothing. Each copy gets its own nonce, so every record has
its own block hash, as on chain; the transactions are the same bytes, so every copy costs the
parser and ``block_revelations`` what the original does and reveals the same keys. Nothing on the
ingest path memoizes (no cache in ``chains.bitcoin``; the writer keeps every row, and the rows of
two copies differ by block hash, so the key-hash file's de-duplication drops none): repeats are
not cheaper than distinct blocks. A key cache added later would be flattered by this input
(every key after the first copy would hit); distinct blocks would be needed then.

**Throughput.** The ceiling is a loop over the same files, one process, doing nothing but
``read_records`` (deobfuscation included) and ``parse_block`` on every record. The measured run is
``ingest_block_files`` into a fresh index: records, ``parse_block``, BIP-34 height,
``block_revelations``, the Parquet part writer, the commit and the final ``link``. With
``workers=1`` both sides are one process on the same bytes: that ratio is the per-core figure and
the one the target (ingest ≥ 0.5 of the parse-only loop) is judged on. ``workers=2`` (one spawned
process per file, two at a time) is reported beside the same single-process ceiling, for
information: the throughput two cores give across files. The parse loop is timed right before
each ingest run, and each ratio uses its own. Revealed keys/s are reported for both runs.

**Memory.** Each ingest runs in a fresh spawned process, whose peak RSS (``VmHWM``) is its own.
Peak RSS is compared over three inputs: 1 file of ``--blocks`` blocks; ``--files`` such files
(the workers=1 throughput run), the input grown ``--files`` times in the number of files;
1 file of ``--files`` × ``--blocks`` blocks, grown as much within one file. Target: each grown
peak at most 1.25 × the peak for one file. One process ingests the files one after the other; a
file's writer holds at most ``flush_rows`` (50,000) revelations and their key hashes before it
spills them to scratch Parquet, and everything is dropped when the file's part is committed; the
commit's sort of the key hashes is DuckDB's, within a 128 MB memory limit, spilling to scratch
(``storage.bitcoin_index.SpillingSortWriter``); ``link`` reads one small row per block. So the
peak is bounded by those limits, not by the input; 25 % leaves room for allocator noise and
``link``. (Measured here with 1 file of 16, 64 and 128 blocks: 328, 380 and 380 MB.)

**Lookups.** The median latency of ``BitcoinIndexStore.lookup(["mainnet"], [hash])`` over the
index of the workers=1 run, for ``--lookups`` hashes present and ``--lookups`` absent, reading
the parts one by one and then after ``compact`` (the 256 lookup buckets), with the compaction's
rate, for information (a lookup over the parts reads a footer per part: ~0.7 ms each).
Nothing here asserts on time: the script prints, and exits 1 below a target.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import Figure, print_figures
from chains.bitcoin.blockfiles import MAGIC, read_records
from chains.bitcoin.revelations import block_revelations
from chains.bitcoin.tx import parse_block
from services.bitcoin_ingest import ingest_block_files, xor_key
from storage.bitcoin_index import BitcoinIndexStore
from tests.bitcoin_chain import MAINNET_MAGIC, conformance_blocks, write_block_file

TARGET = 0.5
MEMORY_TARGET = 1.25
REALISTIC_BLOCKS = (413_567, 702_861)
XOR_KEY = bytes.fromhex("5a17c3e00b9d4e21")


@dataclass(frozen=True, slots=True)
class IngestRun:
    """One ingest in a fresh process: seconds, blocks and revealed keys written, and the
    process's peak RSS after its imports (``baseline_mb``) and at the end (``peak_mb``)."""

    seconds: float
    blocks: int
    revelations: int
    baseline_mb: float
    peak_mb: float


def _peak_rss_mb() -> float:
    """This process's peak resident set (``VmHWM``) in MB. Not ``ru_maxrss``: Linux carries it
    across fork and exec, so a spawned process's would start at its parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status: the memory figures need Linux")


def ingest_run(paths: Sequence[Path], index_root: Path, workers: int) -> IngestRun:
    """Ingest ``paths`` into a new index at ``index_root`` and time it; meant for a fresh
    process (``_in_fresh_process``), so that the peak RSS is this ingest's alone."""
    baseline = _peak_rss_mb()
    started = time.perf_counter()
    summary = ingest_block_files(paths, BitcoinIndexStore(index_root), workers=workers)
    seconds = time.perf_counter() - started
    if summary.failed:
        raise RuntimeError(f"ingest failed: {[(r.path.name, r.error) for r in summary.failed]}")
    blocks = sum(r.blocks for r in summary.reports)
    revelations = sum(r.revelations for r in summary.reports)
    return IngestRun(seconds, blocks, revelations, baseline, _peak_rss_mb())


def _in_fresh_process(paths: Sequence[Path], index_root: Path, workers: int) -> IngestRun:
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(ingest_run, paths, index_root, workers).result()


def block_copies(blocks: Sequence[bytes], count: int, first_serial: int) -> Iterator[bytes]:
    """``count`` blocks cycling through ``blocks``, each with its nonce replaced by a serial
    number from ``first_serial`` on: the same transactions under a hash of its own."""
    for serial in range(first_serial, first_serial + count):
        raw = blocks[serial % len(blocks)]
        yield raw[:76] + serial.to_bytes(4, "little") + raw[80:]


def write_inputs(folder: Path, blocks: Sequence[bytes], files: int, per_file: int) -> list[Path]:
    """``files`` obfuscated mainnet block files of ``per_file`` copies of ``blocks`` each in
    ``folder`` (with its ``xor.dat``), every copy's hash distinct; returns their paths."""
    folder.mkdir(parents=True)
    paths = [folder / f"blk{i:05d}.dat" for i in range(files)]
    for i, path in enumerate(paths):
        write_block_file(path, block_copies(blocks, per_file, i * per_file), magic=MAINNET_MAGIC, xor_key=XOR_KEY)
    return paths


def parse_only(paths: Sequence[Path]) -> tuple[float, int]:
    """The ceiling: seconds to read every record of ``paths`` and parse it, and the block count."""
    count = 0
    started = time.perf_counter()
    for path in paths:
        with path.open("rb") as stream:
            for _, raw in read_records(stream, MAGIC["mainnet"], xor_key(path)):
                parse_block(raw)
                count += 1
    return time.perf_counter() - started, count


def _lookup_ms(store: BitcoinIndexStore, hashes: Sequence[bytes], present: bool) -> float:
    """Median milliseconds of one ``lookup`` per hash; checks that each finds what it should."""
    times = []
    for value in hashes:
        started = time.perf_counter()
        hits = store.lookup(["mainnet"], [value])
        times.append((time.perf_counter() - started) * 1000)
        if bool(hits) != present:
            raise RuntimeError(f"lookup of {value.hex()} found {len(hits)} hits, expected {'some' if present else 0}")
    return statistics.median(times)


def _throughput(label: str, paths: Sequence[Path], index_root: Path, workers: int) -> tuple[IngestRun, list[Figure]]:
    """Time the parse-only loop, then ingest ``paths`` with ``workers``; the run and its figures."""
    parse_seconds, parsed = parse_only(paths)
    run = _in_fresh_process(paths, index_root, workers)
    if run.blocks != parsed:
        raise RuntimeError(f"ingest wrote {run.blocks} blocks, the files hold {parsed}")
    ceiling = parsed / parse_seconds
    print(
        f"[index] parse only {ceiling:,.1f} blocks/s; ingest workers={workers} "
        f"{run.blocks / run.seconds:,.1f} blocks/s, {run.revelations / run.seconds:,.0f} keys/s "
        f"({run.seconds:.1f} s, {run.revelations:,} keys), peak RSS {run.peak_mb:,.0f} MB",
        flush=True,
    )
    return run, [
        Figure(
            f"ingest, {label}, workers={workers}",
            run.blocks / run.seconds,
            "blocks/s",
            ceiling,
            "read_records + parse_block, 1 process",
            TARGET if workers == 1 else None,
        ),
        Figure(f"ingest revealed keys, {label}, workers={workers}", run.revelations / run.seconds, "keys/s"),
    ]


def _memory_figures(blocks: int, files: int, one: IngestRun, many: IngestRun, long: IngestRun) -> list[Figure]:
    """Peak RSS of 1 file of ``blocks`` blocks, and, judged against it, of ``files`` such
    files and of 1 file of ``files`` × ``blocks`` blocks."""
    reference = f"peak RSS, 1 file of {blocks} blocks"
    grown = [(f"{files} files of {blocks} blocks", many), (f"1 file of {files * blocks} blocks", long)]
    return [
        Figure(f"ingest {reference}", one.peak_mb, "MB", one.baseline_mb, "the process after its imports"),
        *(
            Figure(f"ingest peak RSS, {label}", run.peak_mb, "MB", one.peak_mb, reference, MEMORY_TARGET, "<=")
            for label, run in grown
        ),
    ]


def measure(files: int = 4, blocks: int = 16, lookups: int = 50, conformance_dir: Path | None = None) -> list[Figure]:
    """Write the block files, time the parse-only loop and the ingest (workers 1 and 2), the
    peak RSS of three inputs and the lookups (printing progress); returns the figures, none
    (SKIPPED printed) without the conformance vectors."""
    if files < 2 or blocks < 1 or lookups < 1:
        raise ValueError("the bench needs at least 2 files, 1 block a file and 1 lookup")
    if conformance_dir is None:
        from tests.conftest import _conformance_root

        conformance_dir = _conformance_root()
    if not (conformance_dir / "bitcoin" / "blocks").is_dir():
        print(f"SKIPPED: no conformance blocks under {conformance_dir} (set QDAY_CONFORMANCE_DIR)")
        return []
    real = conformance_blocks(conformance_dir)
    originals = [real[height] for height in REALISTIC_BLOCKS]
    label = f"{files} files of {blocks} blocks"
    print(f"[index] {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="qday-bench-index-") as tmp:
        root = Path(tmp)
        paths = write_inputs(root / "blocks", originals, files, blocks)
        long_path = write_inputs(root / "long", originals, 1, files * blocks)
        sizes_mb = (paths[0].stat().st_size / 1e6, long_path[0].stat().st_size / 1e6)
        print(f"[index] wrote {label} ({sizes_mb[0]:,.1f} MB each) and 1 file of {sizes_mb[1]:,.1f} MB", flush=True)
        many, figures = _throughput(label, paths, root / "index-1", 1)
        figures += _throughput(label, paths, root / "index-2", 2)[1]
        one = _in_fresh_process(paths[:1], root / "index-one", 1)
        long = _in_fresh_process(long_path, root / "index-long", 1)
        print(
            f"[index] peak RSS: 1 file {one.peak_mb:,.0f} MB, {files} files {many.peak_mb:,.0f} MB, "
            f"1 file of {files * blocks} blocks {long.peak_mb:,.0f} MB (after imports {one.baseline_mb:,.0f} MB)",
            flush=True,
        )
        figures += _memory_figures(blocks, files, one, many, long)
        keys = [r.hash160 for raw in originals for r in block_revelations(parse_block(raw), None)]
        present = keys[:: max(1, len(keys) // lookups)][:lookups]
        rng = random.Random(7)
        absent = [rng.randbytes(20) for _ in range(lookups)]
        store = BitcoinIndexStore(root / "index-1")
        store.lookup(["mainnet"], present[:1])  # the first query pays DuckDB's start
        for state in ("parts", "compacted"):
            if state == "compacted":
                started = time.perf_counter()
                rate = store.compact("mainnet") / (time.perf_counter() - started)
                figures.append(Figure("key hashes compacted into lookup buckets", rate, "rows/s"))
            for kind, hashes in (("present", present), ("absent", absent)):
                label = f"index lookup of 1 {kind} hash ({state}), median of {lookups}"
                figures.append(Figure(label, _lookup_ms(store, hashes, kind == "present"), "ms"))
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its figures; exit 1 below the throughput or memory target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=4, help="block files (at least 2)")
    parser.add_argument("--blocks", type=int, default=16, help="blocks per file")
    parser.add_argument("--lookups", type=int, default=50, help="lookups of present and of absent hashes")
    parser.add_argument("--conformance-dir", type=Path, help="default: QDAY_CONFORMANCE_DIR or ../shared/conformance")
    args = parser.parse_args(argv)
    return print_figures(measure(args.files, args.blocks, args.lookups, args.conformance_dir))


if __name__ == "__main__":
    raise SystemExit(main())
