"""Metering of managed custody: per account, environment and calendar month (UTC),
key-months and signatures in blocks of 10,000 (the spec's billing units)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from chains.environment import Environment
from services.errors import InvalidRequest
from storage.models import ManagedKeyState, ManagedKeyUsage

#: Signatures per billing block (spec: billed "per 10,000 signing operations").
SIGNATURES_PER_BLOCK = 10_000
_MONTH = re.compile(r"([0-9]{4})-(0[1-9]|1[0-2])")  # ASCII digits only, matched in full
#: The months ``month_bounds`` accepts: far from the calendar's ends (year 1, year 9999).
FIRST_YEAR, LAST_YEAR = 2000, 2999


def month_of(at: datetime) -> str:
    """The calendar month (UTC) of a time, as ``YYYY-MM``."""
    return at.astimezone(UTC).strftime("%Y-%m")


def month_bounds(month: str) -> tuple[datetime, datetime]:
    """[start, end) of a ``YYYY-MM`` month in UTC; REQ_001 when malformed or outside
    2000-01 to 2999-12."""
    match = _MONTH.fullmatch(month)
    if match is None:
        raise InvalidRequest("invalid request: month must be YYYY-MM (field 'month')", field="month")
    year, number = int(match.group(1)), int(match.group(2))
    if not FIRST_YEAR <= year <= LAST_YEAR:
        raise InvalidRequest(
            f"invalid request: month must be between {FIRST_YEAR}-01 and {LAST_YEAR}-12 (field 'month')",
            field="month",
        )
    start = datetime(year, number, 1, tzinfo=UTC)
    end = datetime(year + (number == 12), number % 12 + 1, 1, tzinfo=UTC)
    return start, end


@dataclass(frozen=True, slots=True)
class Usage:
    """Managed-custody counts of one account, environment and month."""

    month: str
    environment: Environment
    active_keys: int
    key_months: int
    signatures: int
    signature_blocks: int
    billable_units: int
    keys: list[ManagedKeyUsage]


def usage_of(month: str, environment: Environment, keys: list[ManagedKeyUsage]) -> Usage:
    """The month's billable counts from its per-key usage rows: one key-month per
    key that existed in the month, plus one unit per started block of signatures."""
    signatures = sum(k.signatures for k in keys)
    key_months = len(keys)
    blocks = math.ceil(signatures / SIGNATURES_PER_BLOCK)
    active = sum(1 for k in keys if k.state is ManagedKeyState.ACTIVE)
    return Usage(month, environment, active, key_months, signatures, blocks, key_months + blocks, keys)
