"""The stored form of a wallet-scan result, built the same way by the scan
endpoint and by the pipelines' publish step (so both serve identical answers)."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from chains.environment import Environment
from chains.observation import Observation
from scoring.result import WalletRisk
from storage.models import ScanResult

_ENCODER = msgspec.json.Encoder()  # compact JSON in C: json.dumps was a fifth of a published result's cost


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def scan_record(
    observation: Observation,
    risk: WalletRisk,
    account_id: str,
    environment: Environment,
    scanned_at: datetime,
    source: str,
) -> ScanResult:
    """A ``ScanResult`` whose ``result`` is the spec's wallet-scan object (plus
    ``dataAsOf``, ``scoringVersion`` and the data source), ready to store."""
    body = {
        "address": observation.address,
        "chain": observation.chain,
        **risk.to_dict(),
        "scannedAt": _iso(scanned_at),
        "dataAsOf": _iso(observation.observed_at),
        "dataSource": observation.source,
        "blockHeight": observation.height,
    }
    return ScanResult(
        account_id=account_id,
        environment=environment,
        chain=observation.chain,
        address=observation.address,
        result=_ENCODER.encode(body).decode(),
        risk_value=risk.risk_value,
        risk_score=risk.risk_score,
        scoring_version=risk.scoring_version,
        data_as_of=observation.observed_at,
        scanned_at=scanned_at,
        source=source,
    )
