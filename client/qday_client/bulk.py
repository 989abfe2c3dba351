"""Bulk wallet scans: read addresses from a CSV file, scan them a few at a time,
and write a CSV or JSON report with one row per input line.

Rate limits are the client's business (``QdayClient`` pauses every request on
``429`` for ``Retry-After`` seconds), so a bulk run slows down to the plan's
pace instead of failing. A row whose scan fails (bad address, no activity,
chain down) is reported with its error code; a bad credential or an
unreachable server stops the run.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from qday_client.client import QdayClient
from qday_client.errors import ApiError, AuthError, LocalError
from qday_client.models import WalletScan

REPORT_FIELDS = (
    "line",
    "address",
    "chain",
    "status",
    "riskScore",
    "riskLabel",
    "riskValue",
    "publicKeyExposed",
    "balanceAtRisk",
    "chainGrade",
    "cached",
    "errorCode",
    "errorMessage",
)


@dataclass(frozen=True)
class ScanTarget:
    """One address to scan, with the line of the input file it came from."""

    line: int
    address: str
    chain: str | None = None


@dataclass(frozen=True)
class ScanRow:
    """The outcome for one target: a result or an error code and message."""

    target: ScanTarget
    result: WalletScan | None = None
    error_code: str | None = None
    error_message: str | None = None

    def as_dict(self) -> dict[str, object]:
        """The report row (``REPORT_FIELDS``; empty values where not applicable)."""
        r = self.result
        return {
            "line": self.target.line,
            "address": self.target.address,
            "chain": r.chain if r else self.target.chain,
            "status": "ok" if r else "error",
            "riskScore": r and r.risk_score,
            "riskLabel": r and r.risk_label,
            "riskValue": r and r.risk_value,
            "publicKeyExposed": r and r.public_key_exposed,
            "balanceAtRisk": r and r.balance_at_risk,
            "chainGrade": r and r.chain_grade,
            "cached": r and r.cached,
            "errorCode": self.error_code,
            "errorMessage": self.error_message,
        }


def read_targets(path: Path) -> list[ScanTarget]:
    """Addresses from a CSV file: ``address[,chain]`` per line, an optional
    ``address,chain`` header, blank lines and ``#`` comments skipped."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise LocalError(f"cannot read {path}: {exc.strerror}") from None
    targets = []
    for line, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        cells = [cell.strip() for cell in row]
        if not cells or not cells[0] or cells[0].startswith("#"):
            continue
        if line == 1 and cells[0].lower() == "address":
            continue
        targets.append(ScanTarget(line, cells[0], cells[1] if len(cells) > 1 and cells[1] else None))
    if not targets:
        raise LocalError(f"{path} holds no addresses")
    return targets


class Progress:
    """A one-line progress bar on a stream (stderr), redrawn in place."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total, self.stream, self.width = total, stream or sys.stderr, width

    def __call__(self, done: int, failed: int) -> None:
        """Redraw the bar after ``done`` targets, ``failed`` of them with an error."""
        filled = self.width * done // self.total
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{self.total} scanned, {failed} failed"
        )
        if done == self.total:
            self.stream.write("\n")
        self.stream.flush()


async def scan_all(
    client: QdayClient,
    targets: list[ScanTarget],
    *,
    refresh: bool = False,
    concurrency: int = 4,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[ScanRow]:
    """Scan every target with at most ``concurrency`` requests in flight; rows
    come back in input order."""
    gate = asyncio.Semaphore(max(1, concurrency))
    counts = {"done": 0, "failed": 0}

    async def one(target: ScanTarget) -> ScanRow:
        async with gate:
            try:
                row = ScanRow(target, result=await client.scan_wallet(target.address, target.chain, refresh))
            except AuthError:
                raise
            except ApiError as exc:
                row = ScanRow(target, error_code=exc.code, error_message=exc.message)
        counts["done"] += 1
        counts["failed"] += row.result is None
        if on_progress is not None:
            on_progress(counts["done"], counts["failed"])
        return row

    return list(await asyncio.gather(*(one(t) for t in targets)))


def _cell(value: object) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def render_report(rows: list[ScanRow], fmt: str) -> str:
    """The report as ``csv`` (header ``REPORT_FIELDS``) or ``json`` (a list of objects)."""
    if fmt == "json":
        return json.dumps([row.as_dict() for row in rows], indent=2) + "\n"
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(REPORT_FIELDS)
    writer.writerows([_cell(row.as_dict()[f]) for f in REPORT_FIELDS] for row in rows)
    return out.getvalue()
