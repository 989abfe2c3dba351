"""The packaged readiness file, its validation and the grading rule."""

from __future__ import annotations

import copy
import itertools
import tomllib
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import pytest

from scoring import ReadinessData, ReadinessDataError, grade_chain, load_readiness, parse_readiness
from scoring.model import (
    CHAIN_FACTORS_BY_FAMILY,
    CHAIN_FAMILY,
    CHAIN_GRADES,
    SCORING_VERSION,
    SUPPORTED_CHAINS,
    ChainFactorId,
    ChainFactorStatus,
)
from scoring.readiness import ChainFactor

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
    assert (grades["bitcoin"], grades["ethereum"], grades["solana"]) == ("D", "C", "D")
    assert {grades[c] for c in SUPPORTED_CHAINS if c not in ("bitcoin", "ethereum", "solana")} == {"F"}


def _factor(readiness: ReadinessData, chain: str, factor: ChainFactorId) -> ChainFactor:
    return next(f for f in readiness.chains[chain].factors if f.factor is factor)


def test_bitcoin_utxo_model_counts_the_coins_on_revealed_keys(readiness: ReadinessData) -> None:
    utxo = _factor(readiness, "bitcoin", ChainFactorId.UTXO_MODEL)
    assert utxo.status is S.VULNERABLE  # a third of all BTC sits on revealed keys: not protective
    for figure in ("6.5 million BTC", "32.7%", "1.7 million BTC in P2PK", "4.5 million BTC", "Chaincode Labs"):
        assert figure in utxo.detail
    assert "as of 2025" in utxo.detail and utxo.source == "https://chaincode.com/bitcoin-post-quantum.pdf"
    assert readiness.chains["bitcoin"].grade.letter == "D"  # 5 of 16 points: 31 %


# What a phrase in a grade label would claim about a chain's statuses.
_SIGNATURE, _PLAN = ChainFactorId.SIGNATURE_SCHEME, ChainFactorId.PQC_MIGRATION_PLAN
_CLAIMS: dict[str, Callable[[Mapping[ChainFactorId, ChainFactorStatus]], bool]] = {
    "no public plan": lambda s: s[_PLAN] in (S.NONE, S.VULNERABLE),
    "no plan": lambda s: s[_PLAN] in (S.NONE, S.VULNERABLE),
    "quantum-vulnerable signatures": lambda s: s[_SIGNATURE] is S.VULNERABLE,
    "in production": lambda s: s[_SIGNATURE] in (S.ACTIVE, S.PROTECTIVE),
    "not yet deployed": lambda s: s[_SIGNATURE] not in (S.ACTIVE, S.PROTECTIVE),
    "migration path proposed": lambda s: s[_PLAN] in (S.PLANNED, S.ACTIVE, S.PROTECTIVE),
    "migration under way": lambda s: s[_PLAN] in (S.ACTIVE, S.PROTECTIVE),
}


def test_grade_labels_claim_nothing_the_grade_does_not_imply() -> None:
    """A grade is a share of points; every mix of statuses reaching it must fit its label."""
    for factors in set(CHAIN_FACTORS_BY_FAMILY.values()):
        for statuses in itertools.product(S, repeat=len(factors)):
            label = grade_chain(statuses).label.lower()
            named = dict(zip(factors, statuses, strict=True))
            for phrase, holds in _CLAIMS.items():
                assert phrase not in label or holds(named), f"{label!r} is false for {named}"
    assert len({grade.label for grade in CHAIN_GRADES}) == len(CHAIN_GRADES)


def test_zksync_label_agrees_with_its_account_abstraction_path(readiness: ReadinessData) -> None:
    zksync = readiness.chains["zksync"]
    plan = _factor(readiness, "zksync", _PLAN)
    assert plan.status is S.NONE and "account abstraction" in plan.detail and "a path is not a plan" in plan.detail
    assert zksync.grade.letter == "F" and "plan" not in zksync.grade.label  # no claim its detail contradicts


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
        ([S.VULNERABLE, S.PLANNED, S.ACTIVE, S.PROTECTIVE], "C"),  # 9/16 = 56 % (Bitcoin until 2026.11.2)
        ([S.VULNERABLE, S.PLANNED, S.ACTIVE, S.VULNERABLE], "D"),  # 5/16 = 31 % (Bitcoin and Solana today)
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
