"""Scan results as the operational store keeps them: one ``ScanResult`` per tenant of a
scored scan (``scoring.records``), built the same way by the scan endpoint and the
pipelines' publish step."""

from __future__ import annotations

from datetime import datetime

from chains.environment import Environment
from chains.evidence import Coverage
from chains.observation import Observation
from scoring.records import ScoredScan, scored_scan
from scoring.result import WalletRisk
from storage.models import ScanResult


def scan_result(scan: ScoredScan, account_id: str, environment: Environment, source: str) -> ScanResult:
    """The record of ``scan`` for one tenant (``source``: ``api`` or ``pipeline``)."""
    return ScanResult(
        account_id=account_id,
        environment=environment,
        chain=scan.chain,
        address=scan.address,
        result=scan.result,
        risk_value=scan.risk_value,
        risk_score=scan.risk_score,
        scoring_version=scan.scoring_version,
        data_as_of=scan.data_as_of,
        scanned_at=scan.scanned_at,
        source=source,
    )


def scan_record(
    observation: Observation,
    risk: WalletRisk,
    account_id: str,
    environment: Environment,
    scanned_at: datetime,
    source: str,
    coverage: Coverage,
) -> ScanResult:
    """A ``ScanResult`` whose ``result`` is the spec's wallet-scan object (plus
    ``dataAsOf``, ``scoringVersion`` and the data source), ready to store."""
    return scan_result(scored_scan(observation, risk, scanned_at, coverage), account_id, environment, source)
