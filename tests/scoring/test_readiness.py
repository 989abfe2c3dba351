"""The packaged readiness file, its validation and the grading rule."""

from __future__ import annotations

import copy
import tomllib
from importlib import resources
from typing import Any

import pytest

from scoring import ReadinessData, ReadinessDataError, grade_chain, load_readiness, parse_readiness
from scoring.model import (
    CHAIN_FACTORS_BY_FAMILY,
    CHAIN_FAMILY,
    SCORING_VERSION,
    SUPPORTED_CHAINS,
    ChainFactorStatus,
)

S = ChainFactorStatus


@pytest.fixture()
def document() -> dict[str, Any]:
    """The packaged file, parsed but not validated, for mutation."""
    text = (resources.files("scoring") / "data" / "chain_readiness.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def test_packaged_file_covers_all_19_chains(readiness: ReadinessData) -> None:
    assert tuple(readiness.chains) == SUPPORTED_CHAINS
    assert readiness.scoring_version == SCORING_VERSION
    for chain, info in readiness.chains.items():
        assert info.family is CHAIN_FAMILY[chain]
        assert tuple(f.factor for f in info.factors) == CHAIN_FACTORS_BY_FAMILY[info.family]
        assert all(f.detail and f.source.startswith("https://") for f in info.factors)


def test_family_specific_factors(readiness: ReadinessData) -> None:
    def names(chain: str) -> set[str]:
        return {f.factor.value for f in readiness.chains[chain].factors}

    assert "utxo_model" in names("bitcoin") and "utxo_model" not in names("ethereum")
    assert "address_format_exposure" in names("solana") and "address_format_exposure" not in names("bitcoin")
    assert "community_activity" in names("ethereum")


def test_current_grades(readiness: ReadinessData) -> None:
    grades = {chain: info.grade.letter for chain, info in readiness.chains.items()}
    assert (grades["bitcoin"], grades["ethereum"], grades["solana"]) == ("C", "C", "D")
    assert {grades[c] for c in SUPPORTED_CHAINS if c not in ("bitcoin", "ethereum", "solana")} == {"F"}


def test_load_reads_the_file_on_each_call() -> None:
    assert load_readiness() == load_readiness() and load_readiness() is not load_readiness()


@pytest.mark.parametrize(
    ("statuses", "letter"),
    [
        ([S.PROTECTIVE] * 4, "A"),  # 100 %
        ([S.PROTECTIVE, S.PROTECTIVE, S.PROTECTIVE, S.NONE, S.PROTECTIVE], "A"),  # 17/20 = 85 %
        ([S.PROTECTIVE, S.PROTECTIVE, S.PROTECTIVE, S.VULNERABLE, S.PROTECTIVE], "A"),  # 16/20 = 80 % exactly
        ([S.PROTECTIVE, S.PROTECTIVE, S.ACTIVE, S.VULNERABLE, S.PROTECTIVE], "B"),  # 15/20 = 75 %
        ([S.ACTIVE, S.ACTIVE, S.VULNERABLE, S.ACTIVE, S.ACTIVE], "B"),  # 12/20 = 60 % exactly
        ([S.VULNERABLE, S.PLANNED, S.ACTIVE, S.PROTECTIVE], "C"),  # 9/16 = 56 % (Bitcoin today)
        ([S.VULNERABLE, S.PLANNED, S.ACTIVE], "C"),  # 5/12 = 42 % (Ethereum today)
        ([S.PLANNED, S.PLANNED, S.VULNERABLE, S.VULNERABLE], "D"),  # 4/16 = 25 %
        ([S.VULNERABLE, S.NONE, S.ACTIVE, S.VULNERABLE], "D"),  # 4/16 = 25 %
        ([S.NONE, S.VULNERABLE, S.VULNERABLE, S.VULNERABLE, S.VULNERABLE], "F"),  # 1/20 = 5 %
        ([S.VULNERABLE, S.NONE, S.NONE], "F"),  # 2/12 = 17 % (a typical EVM L2)
    ],
)
def test_grading_rule(statuses: list[ChainFactorStatus], letter: str) -> None:
    assert grade_chain(statuses).letter == letter


def test_grade_needs_a_factor() -> None:
    with pytest.raises(ValueError):
        grade_chain([])


def test_parse_accepts_the_packaged_document(document: dict[str, Any]) -> None:
    assert parse_readiness(document) == load_readiness()


def _problems(document: dict[str, Any]) -> str:
    with pytest.raises(ReadinessDataError) as caught:
        parse_readiness(document)
    return str(caught.value)


def test_missing_and_unknown_chains_are_reported(document: dict[str, Any]) -> None:
    bad = copy.deepcopy(document)
    del bad["chains"]["tron"]
    bad["chains"]["algorand"] = bad["chains"]["cosmos"]
    problems = _problems(bad)
    assert "missing chain 'tron'" in problems and "unsupported chain 'algorand'" in problems


def test_every_factor_problem_is_reported_at_once(document: dict[str, Any]) -> None:
    bad = copy.deepcopy(document)
    bad["chains"]["ethereum"]["signature_scheme"]["status"] = "quantum-safe"
    bad["chains"]["bitcoin"]["pqc_migration_plan"]["source"] = "http://insecure.example"
    bad["chains"]["solana"]["community_activity"]["detail"] = " "
    del bad["chains"]["bitcoin"]["utxo_model"]
    bad["chains"]["base"]["utxo_model"] = bad["chains"]["base"]["signature_scheme"]
    bad["chains"]["tron"]["signature_scheme"]["extra"] = 1
    problems = _problems(bad)
    for expected in (
        "ethereum.signature_scheme: status 'quantum-safe'",
        "bitcoin.pqc_migration_plan: source must be an https:// link",
        "solana.community_activity: detail must be a non-empty string",
        "bitcoin: missing factor 'utxo_model'",
        "base: factor 'utxo_model' is not used for evm chains",
        "tron.signature_scheme: keys must be exactly",
    ):
        assert expected in problems


def test_version_and_date_are_checked(document: dict[str, Any]) -> None:
    bad = copy.deepcopy(document)
    bad["scoring_version"] = "1999.1.1"
    bad["as_of"] = "yesterday"
    problems = _problems(bad)
    assert "scoring_version is '1999.1.1'" in problems and "as_of must be a date" in problems


def test_missing_chains_table(document: dict[str, Any]) -> None:
    del document["chains"]
    assert "missing [chains] table" in _problems(document)
