"""Ingesting Bitcoin Core's block files into the exposure index (``qday bitcoin ingest-blocks``).

Each ``blk*.dat`` file becomes one part of the index (``storage.bitcoin_index``), written by
one process: files are ingested in parallel (``spawn``ed workers; forking after Polars can
hang), each streamed a block at a time so memory stays flat whatever the folder's size. A
file is skipped when its part was published from the same size, modification time and
obfuscation key (idempotent and resumable: an interrupted run redoes only the files it had
not finished; Bitcoin Core's newest file, still growing, is redone). The network comes from
the files' magic bytes, the obfuscation key from ``xor.dat`` beside them (Core 28+). After
the files, the network's best chain is recomputed (``BitcoinIndexStore.link``) and, once
enough parts are new, its key hashes are compacted into the lookup buckets scans read
(``BitcoinIndexStore.compact``, also ``qday bitcoin compact``).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from chains.bitcoin.blockfiles import MAGIC, XOR_KEY_SIZE, deobfuscate, read_records
from chains.bitcoin.heights import bip34_height
from chains.bitcoin.revelations import block_revelations
from chains.bitcoin.tx import parse_block
from chains.errors import MalformedChainData
from storage.bitcoin_index import COMPACT_AFTER, FILES, BitcoinIndexStore, ChainState, fingerprint

XOR_FILE = "xor.dat"
_NETWORK_OF_MAGIC = {magic: network for network, magic in MAGIC.items()}


class IngestError(Exception):
    """The input cannot be ingested as given (no block files, a bad ``xor.dat``, an unknown
    network); the message says what to change."""


@dataclass(frozen=True, slots=True)
class FileJob:
    """One block file to ingest: where, with which obfuscation key, into which index."""

    path: Path
    network: str
    xor_key: bytes
    index_root: Path


@dataclass(frozen=True, slots=True)
class FileReport:
    """What ingesting one file did: blocks and revealed keys written, bytes read, seconds,
    whether it was skipped as unchanged, or the error that stopped it (its part untouched)."""

    path: Path
    blocks: int = 0
    revelations: int = 0
    size: int = 0
    seconds: float = 0.0
    skipped: bool = False
    error: str | None = None


@dataclass(slots=True)
class IngestSummary:
    """Every file's report, each network's index state after linking, and the key hashes
    compacted into each network's lookup buckets (networks whose files changed)."""

    reports: list[FileReport] = field(default_factory=list)
    chains: list[ChainState] = field(default_factory=list)
    compacted: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> list[FileReport]:
        """The files that could not be ingested."""
        return [r for r in self.reports if r.error is not None]


def block_files(paths: Iterable[Path]) -> list[Path]:
    """The block files named by ``paths``: a file as given, a folder's ``blk*.dat`` (sorted
    by name, which is arrival order). ``IngestError`` when a path is missing or nothing is found."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.glob("blk*.dat")))
        elif path.is_file():
            found.append(path)
        else:
            raise IngestError(f"{path}: no such file or folder")
    if not found:
        raise IngestError("no block files (blk*.dat) found in the given paths")
    return list(dict.fromkeys(p.resolve() for p in found))


def xor_key(block_file: Path) -> bytes:
    """The obfuscation key of a block file: ``xor.dat`` beside it (Bitcoin Core 28+), or
    eight zero bytes (no obfuscation) when there is none."""
    key_file = block_file.parent / XOR_FILE
    if not key_file.exists():
        return bytes(XOR_KEY_SIZE)
    key = key_file.read_bytes()
    if len(key) != XOR_KEY_SIZE:
        raise IngestError(f"{key_file}: holds {len(key)} bytes, Bitcoin Core writes {XOR_KEY_SIZE}")
    return key


def file_network(block_file: Path, key: bytes) -> str | None:
    """The network whose magic starts the file, None for an empty (all-zero) file."""
    with block_file.open("rb") as f:
        head = deobfuscate(f.read(4), key)
    if not any(head):
        return None
    network = _NETWORK_OF_MAGIC.get(head)
    if network is None:
        raise IngestError(f"{block_file}: starts with {head.hex()}, not the magic of a Bitcoin network")
    return network


def ingest_file(job: FileJob) -> FileReport:
    """Ingest one block file as the part named by its stem (replacing an older version);
    runs in a worker process. A malformed file is reported, its part left as it was."""
    started = time.perf_counter()
    store = BitcoinIndexStore(job.index_root)
    source = fingerprint(job.path)
    part = job.path.stem
    try:
        with job.path.open("rb") as f, store.writer(job.network, FILES, part) as writer:
            for offset, raw in read_records(f, MAGIC[job.network], job.xor_key):
                block = parse_block(raw)
                height = bip34_height(block, job.network)
                rows = list(block_revelations(block, height))
                writer.add_block(block.header, len(block.transactions), height, rows, offset)
    except (MalformedChainData, OSError) as exc:
        return FileReport(job.path, size=source["size"], seconds=time.perf_counter() - started, error=str(exc))
    state = {**source, "xor": job.xor_key.hex(), "blocks": writer.blocks, "revelations": writer.revelations}
    store.save_state(job.network, state, FILES, part)
    return FileReport(job.path, writer.blocks, writer.revelations, source["size"], time.perf_counter() - started)


def _unchanged(store: BitcoinIndexStore, job: FileJob) -> bool:
    state = store.state(job.network, FILES, job.path.stem)
    if state is None or job.path.stem not in store.parts(job.network, FILES):
        return False
    return state.get("xor") == job.xor_key.hex() and all(state.get(k) == v for k, v in fingerprint(job.path).items())


def ingest_block_files(
    paths: Sequence[Path],
    index: BitcoinIndexStore,
    *,
    workers: int = 2,
    progress: Callable[[FileReport], None] = lambda report: None,
    compact_after: int = COMPACT_AFTER,
) -> IngestSummary:
    """Ingest every block file under ``paths`` into ``index`` (``workers`` processes at
    once), call ``progress`` as each file ends, then relink each network touched, and compact
    it once ``compact_after`` of its parts are not in the lookup buckets."""
    files = block_files(paths)
    index.ensure_layout()
    summary = IngestSummary()
    jobs: list[FileJob] = []
    for path in files:
        key = xor_key(path)
        network = file_network(path, key)
        if network is None:
            report = FileReport(path, skipped=True)
            summary.reports.append(report)
            progress(report)
            continue
        job = FileJob(path, network, key, index.root)
        if _unchanged(index, job):
            report = FileReport(path, size=fingerprint(path)["size"], skipped=True)
            summary.reports.append(report)
            progress(report)
        else:
            jobs.append(job)
    if workers > 1 and len(jobs) > 1:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context) as pool:
            for future in as_completed([pool.submit(ingest_file, job) for job in jobs]):
                summary.reports.append(future.result())
                progress(summary.reports[-1])
    else:
        for job in jobs:
            summary.reports.append(ingest_file(job))
            progress(summary.reports[-1])
    networks = sorted({job.network for job in jobs} | {n for n in index.networks() if index.chain_state(n) is None})
    summary.chains = [index.link(network) for network in networks]
    for network in sorted({job.network for job in jobs}):
        rows = index.compact_if_due(network, compact_after)
        if rows is not None:
            summary.compacted[network] = rows
    return summary
