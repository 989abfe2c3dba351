"""The operational tables beside the risk tables in an analyst's DuckDB session (``qday sql``).

DuckDB here cannot attach PostgreSQL or SQLite (its scanner extensions are not
installable offline), and a live attachment would put analysts' scans on the store the API
serves from. So ``copy_operational`` reads each table once, as one snapshot per table, in
chunks through Parquet files in a private folder, into the session's ``ops`` schema.

Only the columns below are copied: never a password hash, an API key's keyed hash,
managed custody's wrapped key material or its wrapping-key label, nor raw signatures and
public keys (fingerprints stand for keys), nor webhook secrets or URLs (a receiver's URL
often holds a token of its own). Timestamps become ``TIMESTAMPTZ``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import duckdb
import polars as pl

from storage.database import Database

#: Table → the columns an analyst may read, in order.
OPERATIONAL_TABLES: Final[dict[str, tuple[str, ...]]] = {
    "accounts": ("id", "email", "name", "plan", "created_at"),
    "api_keys": (
        "id",
        "account_id",
        "name",
        "type",
        "environment",
        "prefix",
        "created_at",
        "last_used_at",
        "expires_at",
        "deleted_at",
        "replaced_by",
    ),
    "watchlist": ("id", "account_id", "environment", "chain", "address", "label", "created_at"),
    "watch_counts": ("account_id", "n"),
    "watched_descriptors": (
        "id",
        "account_id",
        "environment",
        "descriptor",
        "label",
        "gap_limit",
        "derived_addresses",
        "summary",
        "scanned_at",
        "created_at",
    ),
    "scan_results": (
        "account_id",
        "environment",
        "chain",
        "address",
        "result",
        "risk_value",
        "risk_score",
        "scoring_version",
        "data_as_of",
        "scanned_at",
        "source",
    ),
    "key_scan_results": ("account_id", "environment", "subject", "result", "data_as_of", "scanned_at"),
    "pq_keys": ("id", "account_id", "environment", "algorithm", "chain", "fingerprint", "origin", "created_at"),
    "attestations": (
        "id",
        "account_id",
        "environment",
        "pq_key_id",
        "algorithm",
        "chain",
        "ecdsa_claim",
        "ecdsa_scheme",
        "challenge_id",
        "created_at",
    ),
    "managed_keys": (
        "id",
        "account_id",
        "environment",
        "algorithm",
        "chain",
        "fingerprint",
        "backend",
        "state",
        "created_at",
        "deletion_requested_at",
        "deletion_scheduled_at",
        "destroyed_at",
    ),
    "managed_key_events": ("id", "key_id", "account_id", "environment", "type", "state", "actor", "request_id", "at"),
    "managed_key_usage": ("key_id", "month", "account_id", "environment", "signatures"),
    "webhooks": (
        "id",
        "account_id",
        "environment",
        "events",
        "description",
        "created_at",
        "failing_since",
        "disabled_at",
        "disabled_reason",
    ),
    "webhook_events": ("id", "account_id", "environment", "type", "created_at"),
    "webhook_deliveries": (
        "id",
        "webhook_id",
        "event_id",
        "state",
        "attempts",
        "next_attempt_at",
        "created_at",
        "finished_at",
    ),
}
_INTEGERS: Final = frozenset({"n", "gap_limit", "derived_addresses", "risk_value", "signatures", "attempts"})
SCHEMA: Final = "ops"


def _is_time(column: str) -> bool:
    return column in ("at", "data_as_of", "failing_since") or column.endswith("_at")


def _duckdb_type(column: str) -> str:
    if column in _INTEGERS:
        return "BIGINT"
    return "TIMESTAMPTZ" if _is_time(column) else "VARCHAR"


async def copy_operational(db: Database, con: duckdb.DuckDBPyConnection, folder: Path, chunk: int = 100_000) -> int:
    """Copy ``OPERATIONAL_TABLES`` from ``db`` into schema ``ops`` of ``con``, staging
    chunks as Parquet files in ``folder`` (the caller's private, temporary folder; the files
    are removed once loaded); returns the rows copied."""
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    copied = 0
    for table, columns in OPERATIONAL_TABLES.items():
        schema = {c: pl.Int64() if c in _INTEGERS else pl.String() for c in columns}
        parts: list[Path] = []
        async for rows in db.stream(f"SELECT {', '.join(columns)} FROM {table}", (), chunk):
            part = folder / f"{table}-{len(parts)}.parquet"
            pl.DataFrame(rows, schema=schema, orient="row").write_parquet(part)
            parts.append(part)
            copied += len(rows)
        definition = ", ".join(f'"{c}" {_duckdb_type(c)}' for c in columns)
        con.execute(f"CREATE TABLE {SCHEMA}.{table} ({definition})")
        if parts:
            files = ", ".join(f"'{p}'" for p in parts)
            casts = ", ".join(f'CAST("{c}" AS {_duckdb_type(c)})' for c in columns)
            con.execute(f"INSERT INTO {SCHEMA}.{table} SELECT {casts} FROM read_parquet([{files}])")
        for part in parts:
            part.unlink()
    return copied
