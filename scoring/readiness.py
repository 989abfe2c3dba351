"""Chain post-quantum readiness: the packaged data file, its validation, the A–F grade.

The facts live in ``scoring/data/chain_readiness.toml`` (one status, detail and source per
chain factor); the grading rule lives in ``scoring.model``. The file is read on each
``load_readiness()`` call, never at import: a long-running service loads it once at start
and passes the result to ``score_frame``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from importlib import resources
from types import MappingProxyType
from typing import Any, Final

from chains.registry import Family
from scoring.model import (
    CHAIN_FACTORS_BY_FAMILY,
    CHAIN_FAMILY,
    CHAIN_GRADES,
    MAX_STATUS_POINTS,
    SCORING_VERSION,
    STATUS_POINTS,
    ChainFactorId,
    ChainFactorStatus,
    ChainGrade,
)

_FACTOR_KEYS: Final = frozenset({"status", "detail", "source"})
_STATUSES: Final = frozenset(status.value for status in ChainFactorStatus)


class ReadinessDataError(ValueError):
    """The readiness data file is incomplete or malformed (every problem is listed)."""


@dataclass(frozen=True, slots=True)
class ChainFactor:
    """One chain-level factor: the spec's ``{factor, status, detail}`` plus its source link."""

    factor: ChainFactorId
    status: ChainFactorStatus
    detail: str
    source: str


@dataclass(frozen=True, slots=True)
class ChainReadiness:
    """Readiness of one chain: its family's factors, in order, and the grade they earn."""

    chain: str
    family: Family
    factors: tuple[ChainFactor, ...]
    grade: ChainGrade


@dataclass(frozen=True, slots=True)
class ReadinessData:
    """The whole validated file: every supported chain, keyed by chain identifier."""

    scoring_version: str
    as_of: date
    chains: Mapping[str, ChainReadiness]


def grade_chain(statuses: Iterable[ChainFactorStatus]) -> ChainGrade:
    """Grade a chain from its factor statuses (the rule of ``scoring.model``).

    Each status earns ``STATUS_POINTS``; the chain gets the best grade whose
    ``min_percent`` its share of the maximum possible points reaches. Integer arithmetic,
    so a share exactly on a threshold reaches it.
    """
    points = [STATUS_POINTS[status] for status in statuses]
    if not points:
        raise ValueError("a chain needs at least one factor to be graded")
    earned, possible = 100 * sum(points), MAX_STATUS_POINTS * len(points)
    return next(grade for grade in CHAIN_GRADES if earned >= grade.min_percent * possible)


def load_readiness() -> ReadinessData:
    """Read and validate the readiness file packaged with ``scoring`` (no other I/O)."""
    text = (resources.files("scoring") / "data" / "chain_readiness.toml").read_text(encoding="utf-8")
    return parse_readiness(tomllib.loads(text))


def parse_readiness(document: Mapping[str, Any]) -> ReadinessData:
    """Validate a parsed readiness document and build the graded ``ReadinessData``.

    Checks that the version matches ``SCORING_VERSION``, that exactly the 19 supported
    chains are present, that each has exactly its family's factors, and that every factor
    has an allowed status, a non-empty detail and an https source. Raises
    ``ReadinessDataError`` listing every problem found, so one run shows all fixes needed.
    """
    problems: list[str] = []
    if document.get("scoring_version") != SCORING_VERSION:
        problems.append(f"scoring_version is {document.get('scoring_version')!r}, expected {SCORING_VERSION!r}")
    as_of = document.get("as_of")
    if not isinstance(as_of, date):
        problems.append("as_of must be a date (YYYY-MM-DD)")
        as_of = None
    chains = document.get("chains")
    if not isinstance(chains, Mapping):
        raise ReadinessDataError("; ".join([*problems, "missing [chains] table"]))
    problems += [f"missing chain {chain!r}" for chain in CHAIN_FAMILY if chain not in chains]
    problems += [f"unsupported chain {chain!r}" for chain in chains if chain not in CHAIN_FAMILY]

    parsed: dict[str, ChainReadiness] = {}
    for chain, family in CHAIN_FAMILY.items():
        table = chains.get(chain)
        if not isinstance(table, Mapping):
            continue
        factors = _parse_factors(chain, family, table, problems)
        if factors:
            parsed[chain] = ChainReadiness(chain, family, factors, grade_chain(f.status for f in factors))
    if problems or as_of is None:
        raise ReadinessDataError("; ".join(problems))
    return ReadinessData(SCORING_VERSION, as_of, MappingProxyType(parsed))


def _parse_factors(
    chain: str, family: Family, table: Mapping[str, Any], problems: list[str]
) -> tuple[ChainFactor, ...]:
    """Parse one chain's factor tables, appending problems; empty if any factor is bad."""
    expected = CHAIN_FACTORS_BY_FAMILY[family]
    found = len(problems)
    problems += [f"{chain}: missing factor {factor.value!r}" for factor in expected if factor.value not in table]
    problems += [
        f"{chain}: factor {name!r} is not used for {family.value} chains" for name in table if name not in expected
    ]
    factors = []
    for factor in expected:
        entry = table.get(factor.value)
        if not isinstance(entry, Mapping):
            continue
        where = f"{chain}.{factor.value}"
        if set(entry) != _FACTOR_KEYS:
            problems.append(f"{where}: keys must be exactly {sorted(_FACTOR_KEYS)}, got {sorted(entry)}")
            continue
        status, detail, source = entry["status"], entry["detail"], entry["source"]
        if status not in _STATUSES:
            problems.append(f"{where}: status {status!r} is not one of {[s.value for s in ChainFactorStatus]}")
        if not isinstance(detail, str) or not detail.strip():
            problems.append(f"{where}: detail must be a non-empty string")
        if not isinstance(source, str) or not source.startswith("https://"):
            problems.append(f"{where}: source must be an https:// link")
        if len(problems) == found:
            factors.append(ChainFactor(factor, ChainFactorStatus(status), detail, source))
    return tuple(factors) if len(problems) == found else ()
