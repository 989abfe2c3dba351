"""Ingesting a Bitcoin Core UTXO snapshot and the supply exposed at its height
(``qday bitcoin ingest-utxo-snapshot``).

The file is what ``bitcoin-cli dumptxoutset <path> latest`` writes (Core 28+; read by
``chains.bitcoin.utxo_snapshot``), streamed in batches into ``bitcoin_utxo`` (one snapshot
per network, replaced whole), then ``bitcoin_supply_exposure`` is computed against the
exposure index (``storage.bitcoin_supply``). A snapshot already ingested (same size,
modification time and base block) is not read again: re-running the command after more
blocks were ingested only recomputes the supply table.

The snapshot names its base block but not its height: the height comes from the index when
it holds that block, else from ``--height``, else from the highest coin in the set (the base
block's own coinbase outputs are in it, so this is the base height unless every output of
that coinbase was unspendable).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from chains.bitcoin.utxo_snapshot import SnapshotMetadata, iter_coin_batches, read_metadata, script_type
from storage.analytics import AnalyticsStore
from storage.bitcoin_index import BitcoinIndexStore, fingerprint
from storage.bitcoin_supply import SUPPLY_TABLES, compute_supply, utxo_path, utxo_writer

_STATE = "snapshot"


@dataclass(frozen=True, slots=True)
class SnapshotReport:
    """What ingesting a snapshot did: its metadata, the height used and where it came from
    (``index``, ``given``, ``coins``), whether the coins were read or already there, the
    seconds spent reading, and the supply table computed."""

    metadata: SnapshotMetadata
    height: int
    height_source: str
    read: bool
    seconds: float
    supply: pl.DataFrame


def _write_coins(path: Path, root: Path, progress: Callable[[int, int], None]) -> tuple[SnapshotMetadata, int]:
    """Stream the coins of the snapshot at ``path`` into its network's ``bitcoin_utxo`` file;
    returns the metadata and the highest coin height."""
    top = 0
    with path.open("rb") as stream:
        metadata = read_metadata(stream)
        done = 0
        with utxo_writer(root, metadata.network) as writer:
            for batch in iter_coin_batches(stream, metadata):
                kinds, keys = zip(*(script_type(s) for s in batch.script), strict=True) if len(batch) else ((), ())
                frame = pl.DataFrame(
                    {
                        "network": [metadata.network] * len(batch),
                        "txid": batch.txid,
                        "vout": batch.vout,
                        "height": batch.height,
                        "coinbase": batch.coinbase,
                        "value": batch.value,
                        "script_type": list(kinds),
                        "key": list(keys),
                    },
                    schema=SUPPLY_TABLES["bitcoin_utxo"].schema,
                )
                writer.write(frame)
                top = max(top, max(batch.height, default=0))
                done += len(batch)
                progress(done, metadata.coins_count)
    return metadata, top


def ingest_utxo_snapshot(
    path: Path,
    analytics_root: Path,
    *,
    height: int | None = None,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> SnapshotReport:
    """Read the snapshot at ``path`` (unless already ingested) and compute the supply table at
    its height. ``MalformedChainData`` for a file that is not a Core 28+ snapshot."""
    AnalyticsStore(analytics_root).ensure_layout()
    index = BitcoinIndexStore(analytics_root)
    with path.open("rb") as stream:
        metadata = read_metadata(stream)
    mark = {**fingerprint(path), "base_block_hash": metadata.base_block_hash, "coins": metadata.coins_count}
    state = index.state(metadata.network, _STATE) or {}
    started = time.perf_counter()
    read = not (utxo_path(analytics_root, metadata.network).exists() and {k: state.get(k) for k in mark} == mark)
    if read:
        metadata, top = _write_coins(path, analytics_root, progress)
        index.save_state(metadata.network, {**mark, "top_coin_height": top}, _STATE)
    else:
        top = int(state.get("top_coin_height", 0))
    seconds = time.perf_counter() - started
    known = index.height_of(metadata.network, metadata.base_block_hash)
    if known is not None:
        at, source = known, "index"
    elif height is not None:
        at, source = height, "given"
    else:
        at, source = top, "coins"
    supply = compute_supply(analytics_root, metadata.network, at)
    return SnapshotReport(metadata, at, source, read, seconds, supply)
