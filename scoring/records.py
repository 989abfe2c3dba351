"""The stored form of a wallet-scan result, built the same way by the scan endpoint
and by the pipelines' publish step (so both serve identical answers).

Pure: ``scored_scan`` returns a plain value; the operational store turns it into its
own record (``storage.scan_records``), once per tenant that asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from chains.evidence import Coverage
from chains.observation import Observation
from scoring.result import WalletRisk

_ENCODER = msgspec.json.Encoder()  # compact JSON in C: json.dumps was a fifth of a published result's cost


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class ScoredScan:
    """One address's wallet-scan result, the same for every tenant: ``result`` is the
    spec's wallet-scan object as JSON text (plus ``dataAsOf``, ``scoringVersion`` and
    the data source), the other fields are what is stored beside it."""

    chain: str
    address: str
    result: str
    risk_value: int
    risk_score: str
    scoring_version: str
    data_as_of: datetime
    scanned_at: datetime


def scored_scan(observation: Observation, risk: WalletRisk, scanned_at: datetime, coverage: Coverage) -> ScoredScan:
    """The wallet-scan result of ``observation`` scored as ``risk`` at ``scanned_at``, with
    its evidence (``observation.evidence``, filled in by ``chains.evidence.with_family``)
    and what the verdict could see (``coverage``)."""
    body = {
        "address": observation.address,
        "chain": observation.chain,
        **risk.to_dict(),
        "exposureEvidence": [evidence.to_dict() for evidence in observation.evidence],
        "coverage": coverage.to_dict(),
        "exposureComplete": coverage.complete,
        "scannedAt": _iso(scanned_at),
        "dataAsOf": _iso(observation.observed_at),
        "dataSource": observation.source,
        "blockHeight": observation.height,
    }
    return ScoredScan(
        chain=observation.chain,
        address=observation.address,
        result=_ENCODER.encode(body).decode(),
        risk_value=risk.risk_value,
        risk_score=risk.risk_score,
        scoring_version=risk.scoring_version,
        data_as_of=observation.observed_at,
        scanned_at=scanned_at,
    )
