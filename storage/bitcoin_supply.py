"""Bitcoin's UTXO set (from a ``dumptxoutset`` snapshot) and the supply exposed at its height.

Layout under ``<data_dir>/analytics/``::

    bitcoin_utxo/network=N/snapshot.parquet             every coin of the network's last snapshot
    bitcoin_supply_exposure/network=N/supply.parquet    its value by script type and cause

One snapshot per network: ingesting another replaces the coins. The supply table is computed
from the coins and the exposure index (``storage.bitcoin_index``) by one DuckDB query and
replaced whole; recomputing after more blocks are ingested updates it.

``cause``: ``type`` when the script type shows the key at rest (P2PK of either encoding, bare
multisig, P2TR); else ``revealed_key`` when the index holds a key the output commits to, under
either encoding or as the nested P2SH-P2WPKH script (``chains.bitcoin.revelations.
address_hashes``), revealed at or below the snapshot's height (or at an unknown height: a
stale block's revelation was broadcast, so it counts, failing closed); else ``none``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

import duckdb
import polars as pl

from storage.errors import StorageError
from storage.parquet_files import ParquetFileWriter, Table, publish, temp_name

KEY_AT_REST_TYPES: Final = ("p2pk", "multisig", "p2tr")
"""Script types whose output script itself shows the key (cause ``type``)."""

SUPPLY_TABLES: Final = MappingProxyType(
    {
        t.name: t
        for t in (
            Table(
                "bitcoin_utxo",
                pl.Schema(
                    {
                        "network": pl.String(),
                        "txid": pl.Binary(),
                        "vout": pl.Int64(),
                        "height": pl.Int32(),
                        "coinbase": pl.Boolean(),
                        "value": pl.Int64(),
                        "script_type": pl.String(),
                        "key": pl.Binary(),
                    }
                ),
                ("network", "txid", "vout"),
                "Every unspent output of the network's last UTXO snapshot: outpoint, creation height, "
                "coinbase flag, value (sat), script type and the key or hash its script shows.",
            ),
            Table(
                "bitcoin_supply_exposure",
                pl.Schema(
                    {
                        "network": pl.String(),
                        "height": pl.Int32(),
                        "script_type": pl.String(),
                        "cause": pl.String(),
                        "outputs": pl.Int64(),
                        "value_sat": pl.Int64(),
                    }
                ),
                ("network", "height", "script_type", "cause"),
                "The snapshot's supply by script type and exposure cause (type, revealed_key, none).",
            ),
        )
    }
)
"""The supply's Parquet tables (``storage.analytics.TABLES`` includes them)."""

SUPPLY_VIEWS: Final = ("bitcoin_utxo", "bitcoin_supply_exposure")
"""The supply's ``qday sql`` views."""


def supply_view_statements(scan: Callable[[str], str]) -> list[str]:
    """``CREATE OR REPLACE VIEW`` statements of the UTXO and supply views (txids as hex)."""
    return [
        "CREATE OR REPLACE VIEW bitcoin_utxo AS SELECT network, lower(hex(txid)) AS txid, vout, height,"
        f" coinbase, value, script_type, key FROM {scan('bitcoin_utxo')}",
        f"CREATE OR REPLACE VIEW bitcoin_supply_exposure AS SELECT * FROM {scan('bitcoin_supply_exposure')}",
    ]


def utxo_path(root: Path, network: str) -> Path:
    """The coins file of ``network``."""
    return root / "bitcoin_utxo" / f"network={network}" / "snapshot.parquet"


def supply_path(root: Path, network: str) -> Path:
    """The supply file of ``network``."""
    return root / "bitcoin_supply_exposure" / f"network={network}" / "supply.parquet"


class SupplyUnreadable(StorageError):
    """A network's supply file exists but cannot be read as the supply table (a damaged or
    foreign file): whoever shows the supply says so rather than failing."""


@dataclass(frozen=True, slots=True)
class SupplyCount:
    """One row of the supply table: the outputs of one script type and exposure cause and
    their value."""

    script_type: str
    cause: str
    outputs: int
    value_sat: int


@dataclass(frozen=True, slots=True)
class SupplyTable:
    """One network's supply table as written: the snapshot's height and its rows."""

    network: str
    height: int
    rows: tuple[SupplyCount, ...]


def read_supply(root: Path, network: str) -> SupplyTable | None:
    """``network``'s supply table under the analytics folder ``root`` (None: not built, or
    empty); ``SupplyUnreadable`` when its file cannot be read. Blocking: reads one small
    Parquet file."""
    path = supply_path(root, network)
    if not path.exists():
        return None
    try:
        frame = pl.read_parquet(path, columns=["height", "script_type", "cause", "outputs", "value_sat"])
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise SupplyUnreadable(f"{path}: {exc}") from exc
    if frame.is_empty():
        return None
    rows = tuple(
        SupplyCount(r["script_type"], r["cause"], r["outputs"], r["value_sat"]) for r in frame.iter_rows(named=True)
    )
    return SupplyTable(network, int(frame["height"][0]), rows)


def utxo_writer(root: Path, network: str) -> ParquetFileWriter:
    """A writer replacing ``network``'s coins (bounded memory: rows are spilled in parts)."""
    return ParquetFileWriter(
        utxo_path(root, network), SUPPLY_TABLES["bitcoin_utxo"], root / "_scratch", rows_per_part=500_000
    )


def _literal(path: Path) -> str:
    return "'" + str(path.resolve()).replace("'", "''") + "'"


def compute_supply(root: Path, network: str, height: int, memory_limit: str = "1GB") -> pl.DataFrame:
    """Write ``network``'s supply table at ``height`` from its coins and the index (one DuckDB
    query; DuckDB spills to disk past ``memory_limit``), and return it. The analytics layout
    (every table's schema file) must exist."""
    target = supply_path(root, network)
    target.parent.mkdir(parents=True, exist_ok=True)
    (root / "_scratch").mkdir(exist_ok=True)
    temp = temp_name(target)
    hashes = _literal(root / "bitcoin_key_hashes" / "**" / "*.parquet")
    best = _literal(root / "bitcoin_best_chain" / "**" / "*.parquet")
    at_rest = ", ".join(f"'{t}'" for t in KEY_AT_REST_TYPES)
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"SET memory_limit = '{memory_limit.replace(chr(39), '')}'")
        con.execute(f"SET temp_directory = {_literal(root / '_scratch' / 'duckdb')}")
        con.execute(
            f"""
            COPY (
              WITH revealed AS (
                SELECT DISTINCT k.hash FROM read_parquet({hashes}, union_by_name = true) k
                LEFT JOIN read_parquet({best}, union_by_name = true) c
                  ON c.network = k.network AND c.block_hash = k.block_hash
                WHERE k.network = $network AND (c.height IS NULL OR c.height <= $height))
              SELECT $network AS network, $height::INTEGER AS height, u.script_type,
                CASE WHEN u.script_type IN ({at_rest}) THEN 'type'
                     WHEN r.hash IS NOT NULL THEN 'revealed_key' ELSE 'none' END AS cause,
                count(*) AS outputs, sum(u.value)::BIGINT AS value_sat
              FROM read_parquet({_literal(utxo_path(root, network))}) u
              LEFT JOIN revealed r ON r.hash = u.key AND u.script_type IN ('p2pkh', 'p2wpkh', 'p2sh')
              GROUP BY ALL ORDER BY script_type, cause
            ) TO {_literal(temp)} (FORMAT parquet)
            """,
            {"network": network, "height": height},
        )
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    finally:
        con.close()
    publish(temp, target)
    return pl.read_parquet(target)
