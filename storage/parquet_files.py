"""Parquet files with one writer each: table schemas, atomic publication, bounded-memory writes.

Every Parquet file of the analytics folder is written under a temporary name in its target
folder (``.<name>.<id>.tmp``, which no reader's glob matches), fsynced and renamed over the
target, so a reader sees the old file or the new one, never a partial one.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import polars as pl

EMPTY_FILE = "_empty.parquet"
"""The zero-row schema file of every table folder."""


@dataclass(frozen=True, slots=True)
class Table:
    """One analytical table: its folder, Parquet schema and row key.

    ``key`` identifies a row within one scan date; the view keeps one row per key and
    date, preferring the daily partition's row over a newly-watched batch's. A table with
    ``many_per_key`` (``key_exposure``: one row per evidence) keeps every row of the one
    observation chosen for a key.
    """

    name: str
    schema: pl.Schema
    key: tuple[str, ...]
    description: str
    many_per_key: bool = False


def conform(frame: pl.DataFrame, table: Table) -> pl.DataFrame:
    """``frame`` with exactly the table's columns, in order and cast (strictly) to its types."""
    missing = [c for c in table.schema if c not in frame.columns]
    if missing:
        raise ValueError(f"{table.name}: frame lacks columns {', '.join(missing)}")
    return frame.select(pl.col(name).cast(dtype, strict=True) for name, dtype in table.schema.items())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def temp_name(target: Path) -> Path:
    """A hidden temporary name beside ``target`` that no ``*.parquet`` glob matches."""
    return target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")


def publish(temp: Path, target: Path) -> None:
    """fsync ``temp`` and rename it over ``target`` (atomic on POSIX), then fsync the folder."""
    _fsync_file(temp)
    os.replace(temp, target)
    _fsync_dir(target.parent)


class CommitOnExit:
    """Use as a context manager: a clean exit commits, an exception aborts (the target keeps
    its previous content)."""

    def commit(self) -> object:
        """Publish what was written."""
        raise NotImplementedError

    def abort(self) -> None:
        """Drop what was written."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class ParquetFileWriter(CommitOnExit):
    """Writes one Parquet file from any number of frames with bounded memory.

    Frames are buffered up to ``rows_per_part`` rows and spilled as part files into a
    private scratch folder; ``commit`` streams the parts into a temporary file beside the
    target and renames it into place. Zero frames still give a (zero-row) file, so a
    re-run that finds nothing replaces yesterday's rows with none. With ``sort_by``, the
    file is sorted by those columns and rows repeating them are dropped (the first kept);
    that sort holds the rows' sort keys in memory. Use as a context manager: an
    exception aborts, leaving the previous file untouched.
    """

    def __init__(
        self,
        target: Path,
        table: Table,
        scratch_root: Path,
        *,
        rows_per_part: int = 10_000,
        row_group_size: int = 10_000,
        sort_by: Sequence[str] = (),
    ) -> None:
        self.target = target
        self.table = table
        self.rows = 0
        self._scratch = scratch_root / uuid.uuid4().hex
        self._buffer: list[pl.DataFrame] = []
        self._buffered = 0
        self._parts: list[Path] = []
        self._rows_per_part = rows_per_part
        self._row_group_size = row_group_size
        self._sort_by = list(sort_by)

    def write(self, frame: pl.DataFrame) -> None:
        """Add rows (cast to the table's schema; extra columns are dropped)."""
        if frame.height == 0:
            return
        frame = conform(frame, self.table)
        self._buffer.append(frame)
        self._buffered += frame.height
        self.rows += frame.height
        if self._buffered >= self._rows_per_part:
            self._spill()

    def _spill(self) -> None:
        if not self._buffer:
            return
        self._scratch.mkdir(parents=True, exist_ok=True)
        part = self._scratch / f"part-{len(self._parts):06d}.parquet"
        pl.concat(self._buffer, rechunk=False).write_parquet(part, row_group_size=self._row_group_size)
        self._parts.append(part)
        self._buffer, self._buffered = [], 0

    def _sorted(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        if not self._sort_by:
            return frame
        return frame.sort(self._sort_by, maintain_order=True).unique(
            subset=self._sort_by, keep="first", maintain_order=True
        )

    def _merge(self, temp: Path) -> None:
        """Write the spilled parts into ``temp`` (sorted and without repeated keys, with
        ``sort_by``: that sort holds the rows' keys in memory)."""
        self._sorted(pl.scan_parquet(self._parts)).sink_parquet(temp, row_group_size=self._row_group_size)
        if self._sort_by:
            self.rows = pl.scan_parquet(temp).select(pl.len()).collect().item()

    def commit(self) -> int:
        """Write the file atomically; returns its row count (after dropping repeated
        ``sort_by`` keys, when sorting)."""
        self.target.parent.mkdir(parents=True, exist_ok=True)
        temp = temp_name(self.target)
        try:
            if not self._parts:  # everything fits in one write
                frame = pl.concat(self._buffer) if self._buffer else self.table.schema.to_frame()
                frame = self._sorted(frame.lazy()).collect()
                self.rows = frame.height
                frame.write_parquet(temp, row_group_size=self._row_group_size)
            else:
                self._spill()
                self._merge(temp)
            publish(temp, self.target)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        finally:
            self._cleanup()
        return self.rows

    def abort(self) -> None:
        """Drop everything written so far; the target keeps its previous content."""
        self._cleanup()

    def _cleanup(self) -> None:
        self._buffer = []
        shutil.rmtree(self._scratch, ignore_errors=True)


def write_schema_file(path: Path, table: Table) -> None:
    """Write ``table``'s zero-row schema file at ``path`` unless it exists (temp name + rename;
    identical bytes if two processes race): it keeps a view's glob matching before any data."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = temp_name(path)
    try:
        table.schema.to_frame().write_parquet(temp)
        publish(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
