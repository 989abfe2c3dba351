"""``qday bitcoin …``: build and inspect the chain-wide Bitcoin exposure index.

``ingest-blocks`` reads Bitcoin Core's ``blk*.dat`` files (docs/analytics.md, "The Bitcoin
exposure index"); ``status`` says how far each network's index is complete.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported lazily at run time: `qday --help` stays fast
    from services.bitcoin_ingest import FileReport
    from services.settings import Settings
    from storage.bitcoin_index import ChainState

SettingsLoader = Callable[[argparse.Namespace], "Settings"]


def add_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser, settings: SettingsLoader) -> None:
    """Add ``bitcoin ingest-blocks`` and ``bitcoin status`` to the ``qday`` parser."""
    bitcoin = sub.add_parser("bitcoin", help="the chain-wide Bitcoin exposure index")
    bitcoin_sub = bitcoin.add_subparsers(dest="bitcoin_command", required=True)
    ingest = bitcoin_sub.add_parser(
        "ingest-blocks",
        parents=[common],
        help="index every public key revealed in Bitcoin Core block files",
        description="Reads blk*.dat files (Bitcoin Core's blocks/ folder, or single files; Core 28+ "
        "obfuscation is removed with the xor.dat beside them) into the bitcoin_key_exposure index. "
        "Files already ingested unchanged are skipped, so an interrupted run resumes; files run in "
        "parallel, each streamed a block at a time.",
    )
    ingest.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="block files or folders holding them")
    ingest.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="files ingested at once (default: CPUs, ≤4)"
    )
    ingest.set_defaults(func=lambda args: cmd_ingest_blocks(args, settings(args)))
    snapshot = bitcoin_sub.add_parser(
        "ingest-utxo-snapshot",
        parents=[common],
        help="load a dumptxoutset file and compute the supply exposed at its height",
        description="Reads the file `bitcoin-cli dumptxoutset` writes (Bitcoin Core 28+) into bitcoin_utxo and "
        "computes bitcoin_supply_exposure against the exposure index (ingest blocks first). Running it "
        "again after more blocks were ingested recomputes the supply without reading the file again.",
    )
    snapshot.add_argument("file", type=Path, help="the snapshot file")
    snapshot.add_argument("--height", type=int, help="the base block's height, when the index does not hold that block")
    snapshot.set_defaults(func=lambda args: cmd_ingest_snapshot(args, settings(args)))
    compact = bitcoin_sub.add_parser(
        "compact",
        parents=[common],
        help="merge the index's key hashes into the lookup buckets scans read",
        description="Ingests compact by themselves once 32 block files are new; run this after following a "
        "node for long (each node range is otherwise read one by one) or to compact at once.",
    )
    compact.set_defaults(func=lambda args: cmd_compact(settings(args)))
    status = bitcoin_sub.add_parser("status", parents=[common], help="how far each network's index is complete")
    status.set_defaults(func=lambda args: cmd_status(settings(args)))


def _progress(total: int) -> Callable[[FileReport], None]:
    done = 0

    def report(r: FileReport) -> None:
        nonlocal done
        done += 1
        where = f"[{done}/{total}] {r.path.name}"
        if r.error is not None:
            print(f"{where}: FAILED: {r.error}", file=sys.stderr, flush=True)
        elif r.skipped:
            print(f"{where}: unchanged, skipped", flush=True)
        else:
            rate = r.size / max(r.seconds, 1e-9) / 1e6
            print(
                f"{where}: {r.blocks:,} blocks, {r.revelations:,} keys in {r.seconds:.1f} s ({rate:.1f} MB/s)",
                flush=True,
            )

    return report


def cmd_ingest_blocks(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``qday bitcoin ingest-blocks``: exit 0 when every file was ingested, 1 when some
    failed (the others are kept), 2 when the input cannot be used at all."""
    from services.bitcoin_ingest import IngestError, block_files, ingest_block_files
    from storage.bitcoin_index import BitcoinIndexStore

    if args.workers < 1:
        print("qday bitcoin: --workers must be at least 1", file=sys.stderr)
        return 2
    index = BitcoinIndexStore(settings.analytics_dir)
    started = time.perf_counter()
    try:
        total = len(block_files(args.paths))
        summary = ingest_block_files(args.paths, index, workers=args.workers, progress=_progress(total))
    except IngestError as exc:
        print(f"qday bitcoin: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - started
    blocks = sum(r.blocks for r in summary.reports)
    keys = sum(r.revelations for r in summary.reports)
    rate = f"{blocks / seconds:,.0f} blocks/s, {keys / seconds:,.0f} keys/s" if blocks else "nothing new"
    print(f"ingested {blocks:,} blocks, {keys:,} revealed keys in {seconds:.1f} s ({rate})")
    for state in summary.chains:
        print(_state_line(state))
    for network, rows in summary.compacted.items():
        print(f"{network}: {rows:,} key hashes compacted into the lookup buckets")
    return 1 if summary.failed else 0


def cmd_ingest_snapshot(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``qday bitcoin ingest-utxo-snapshot``: progress, then the supply table."""
    from chains.errors import MalformedChainData
    from services.bitcoin_utxo import ingest_utxo_snapshot

    step = 0

    def progress(done: int, total: int) -> None:
        nonlocal step
        if done * 20 >= (step + 1) * total or done == total:
            step = done * 20 // max(total, 1)
            print(f"{done:,} of {total:,} coins", flush=True)

    try:
        report = ingest_utxo_snapshot(args.file, settings.analytics_dir, height=args.height, progress=progress)
    except (OSError, MalformedChainData) as exc:
        print(f"qday bitcoin: {args.file}: {exc}", file=sys.stderr)
        return 2
    meta = report.metadata
    how = f"read in {report.seconds:.1f} s" if report.read else "already ingested, not read again"
    print(f"{meta.network} snapshot of block {meta.base_block_hash}: {meta.coins_count:,} coins, {how}")
    print(f"supply at height {report.height:,} (height from {report.height_source}):")
    total = sum(report.supply["value_sat"].to_list()) or 1
    for row in report.supply.iter_rows(named=True):
        share, btc = 100 * row["value_sat"] / total, row["value_sat"] / 100_000_000
        kind = f"{row['script_type']:<9} {row['cause']:<13}"
        print(f"  {kind} {row['outputs']:>13,} outputs {btc:>18,.8f} BTC {share:6.2f} %")
    return 0


def _state_line(state: ChainState) -> str:
    complete = "not from genesis" if state.complete_to is None else f"complete to height {state.complete_to:,}"
    tip = "unknown" if state.tip_height is None else f"{state.tip_height:,}"
    return f"{state.network}: {state.blocks:,} blocks, {complete}, highest known height {tip}"


def cmd_compact(settings: Settings) -> int:
    """Run ``qday bitcoin compact`` on every network with an index."""
    from storage.bitcoin_index import BitcoinIndexStore

    index = BitcoinIndexStore(settings.analytics_dir)
    for network in index.networks():
        started = time.perf_counter()
        rows = index.compact(network)
        print(
            f"{network}: {rows:,} key hashes compacted into the lookup buckets in {time.perf_counter() - started:.1f} s"
        )
    return 0


def cmd_status(settings: Settings) -> int:
    """Run ``qday bitcoin status``: one line per network with an index."""
    from storage.bitcoin_index import BitcoinIndexStore

    states = list(BitcoinIndexStore(settings.analytics_dir).iter_networks_state())
    if not states:
        print(f"no Bitcoin index in {settings.analytics_dir} (qday bitcoin ingest-blocks)")
    for state in states:
        print(_state_line(state))
    return 0
