"""The draft BIP's exposure vectors: scriptPubKey levels, the type table and history rules."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

import coincurve
import pytest

from chains.bitcoin.exposure import (
    HASH_COMMITTED,
    STRUCTURALLY_EXPOSED,
    SpendHistory,
    exposure_with_history,
    output_exposure,
    script_exposure,
)
from chains.bitcoin.script import (
    OutputType,
    classify_script,
    p2pkh_script,
    script_commits_to_key,
    taproot_output_key,
    witness_script_pubkey,
)
from chains.bitcoin.spend import InputDisclosure, SpendType, analyze_input
from chains.bitcoin.tx import parse_transaction
from chains.observation import Exposure
from pqc.hashes import hash160

Loader = Callable[[str], Any]

TABLE_ROWS = {
    "other_witness_version_or_program": OutputType.WITNESS_UNKNOWN,
    "nonstandard_or_unparsable": OutputType.NONSTANDARD,
}


@pytest.fixture(scope="module")
def vectors(load_vectors: Loader) -> Any:
    return load_vectors("bitcoin/exposure_vectors.json")


def _valid_point(key: bytes) -> bool:
    try:
        coincurve.PublicKeyXOnly(key) if len(key) == 32 else coincurve.PublicKey(key)
    except ValueError:
        return False
    return True


def test_script_vectors(vectors: Any) -> None:
    assert len(vectors["script_vectors"]) == 11
    for case in vectors["script_vectors"]:
        script = bytes.fromhex(case["script_pubkey"])
        info = classify_script(script)
        unknown = re.fullmatch(r"witness_v(\d+)_len(\d+)", case["output_type_derived"])
        if unknown:
            assert info.output_type is OutputType.WITNESS_UNKNOWN, case["name"]
            assert (info.witness_version, len(info.program)) == (int(unknown[1]), int(unknown[2]))
        else:
            assert info.output_type == case["output_type_derived"], case["name"]
        assert script_exposure(script) == Exposure(case["expected_level"]), case["name"]
        if "embedded_keys_valid_points_derived" in case:
            assert [_valid_point(key) for key in info.keys] == case["embedded_keys_valid_points_derived"]


def test_type_table(vectors: Any) -> None:
    for row, level in vectors["type_table_absent_prior_disclosure"].items():
        assert output_exposure(TABLE_ROWS.get(row) or OutputType(row)) == Exposure(level), row
    assert vectors["levels"] == [level.value for level in Exposure]


def test_types_outside_the_table_fail_closed() -> None:
    assert output_exposure(OutputType.OP_RETURN) is Exposure.UNDETERMINED
    assert {output_exposure(kind) for kind in OutputType} == {
        Exposure.EXPOSED_AT_REST,
        Exposure.EXPOSED_ON_SPEND,
        Exposure.UNDETERMINED,
    }


def _ts1_leaf_key(load_vectors: Loader) -> bytes:
    """The tapscript leaf key revealed by a real script-path spend (transactions.json)."""
    entry = next(e for e in load_vectors("bitcoin/transactions.json") if e["name"] == "taproot_ts1_spend")
    spend = parse_transaction(bytes.fromhex(entry["hex"]))
    disclosure = analyze_input(spend.inputs[1], bytes.fromhex(entry["inputs"][1]["prevout_script_pubkey"]))
    assert disclosure.spend_type is SpendType.P2TR_SCRIPTPATH
    return disclosure.revealed_keys[0]


def test_history_vectors(vectors: Any, load_vectors: Loader) -> None:
    p2pkh_spend = InputDisclosure(SpendType.P2PKH, (bytes.fromhex("02" + "11" * 32),), None, inferred=False)
    # The derived condition: a leaf key revealed by a script-path spend, reused by another output.
    leaf_key = _ts1_leaf_key(load_vectors)
    reusing_output = witness_script_pubkey(0, hash160(b"\x02" + leaf_key))
    assert script_commits_to_key(reusing_output, leaf_key)
    reused = SpendHistory(key_disclosed_elsewhere=script_commits_to_key(reusing_output, leaf_key))
    reusing_type = classify_script(reusing_output).output_type
    conditions = {
        "P2PKH script, one or more confirmed spends, balance remains": [
            (OutputType.P2PKH, SpendHistory.counted(2)),
            (OutputType.P2PKH, SpendHistory.complete([p2pkh_spend])),
        ],
        "P2WSH script, one or more confirmed spends, balance remains": [(OutputType.P2WSH, SpendHistory.counted(1))],
        "P2PKH script, no confirmed spend, retrieved history truncated": [(OutputType.P2PKH, SpendHistory.counted(0))],
        "P2PKH script, no confirmed spend, complete history available": [(OutputType.P2PKH, SpendHistory.complete([]))],
        "P2TR script, no transactions at all": [
            (OutputType.P2TR, SpendHistory()),
            (OutputType.P2TR, SpendHistory.complete([])),
        ],
        "P2MR script, no confirmed spend, complete history available": [(OutputType.P2MR, SpendHistory.complete([]))],
        "P2MR script, one or more confirmed spends, balance remains": [(OutputType.P2MR, SpendHistory.counted(3))],
        "P2MR script, script-path spend occurred, revealed leaf key reused elsewhere": [(reusing_type, reused)],
        "Hash-committed script (e.g. P2PKH), aggregate statistics unavailable, history incomplete": [
            (kind, SpendHistory()) for kind in sorted(HASH_COMMITTED)
        ],
    }
    assert set(conditions) == {case["condition"] for case in vectors["history_vectors"]}
    for case in vectors["history_vectors"]:
        required = case["required_level"]
        expected = Exposure.EXPOSED_AT_REST if required.startswith("revealed key") else Exposure(required)
        for output_type, history in conditions[case["condition"]]:
            assert exposure_with_history(output_type, history) is expected, (case["condition"], output_type)


def test_a_complete_history_without_key_material_keeps_the_type_level() -> None:
    hashlock = InputDisclosure(SpendType.P2WSH, (), bytes.fromhex("a820" + "00" * 32 + "87"), inferred=False)
    assert exposure_with_history(OutputType.P2WSH, SpendHistory.complete([hashlock])) is Exposure.EXPOSED_ON_SPEND
    unknown = InputDisclosure(SpendType.UNKNOWN, (), None, inferred=True)
    assert exposure_with_history(OutputType.P2WSH, SpendHistory.complete([unknown])) is Exposure.EXPOSED_AT_REST


def test_no_history_combination_ever_reads_as_not_exposed() -> None:
    spend = InputDisclosure(SpendType.P2WPKH, (bytes.fromhex("03" + "22" * 32),), None, inferred=False)
    histories = [SpendHistory(), SpendHistory.counted(0), SpendHistory.counted(5), SpendHistory.complete([])]
    histories += [SpendHistory.complete([spend]), SpendHistory(key_disclosed_elsewhere=True)]
    for output_type, history in itertools.product(OutputType, histories):
        level = exposure_with_history(output_type, history)
        assert level is not Exposure.NOT_EXPOSED
        if output_type in STRUCTURALLY_EXPOSED or history.key_disclosed_elsewhere:
            assert level is Exposure.EXPOSED_AT_REST
        if history == SpendHistory() and output_type not in STRUCTURALLY_EXPOSED:
            assert level is Exposure.UNDETERMINED


def test_inconsistent_history_is_refused() -> None:
    with pytest.raises(ValueError, match="contradicts"):
        SpendHistory(spends=(), spent_count=1)
    with pytest.raises(ValueError, match="negative"):
        SpendHistory.counted(-1)


def test_script_commits_to_key_across_output_types() -> None:
    key = coincurve.PrivateKey(b"\x01" * 32).public_key.format()
    uncompressed = coincurve.PublicKey(key).format(compressed=False)
    assert script_commits_to_key(p2pkh_script(hash160(key)), key)
    assert script_commits_to_key(p2pkh_script(hash160(uncompressed)), uncompressed)
    # One key in two encodings: revealing either reveals both (a false "not exposed" otherwise).
    assert script_commits_to_key(p2pkh_script(hash160(key)), uncompressed)
    assert script_commits_to_key(p2pkh_script(hash160(uncompressed)), key)
    assert script_commits_to_key(bytes([65]) + uncompressed + b"\xac", key)
    assert script_commits_to_key(witness_script_pubkey(1, taproot_output_key(key)), uncompressed)  # BIP-86
    assert not script_commits_to_key(witness_script_pubkey(1, taproot_output_key(key)[::-1]), key)
    nested = witness_script_pubkey(0, hash160(key))
    assert script_commits_to_key(bytes.fromhex("a914") + hash160(nested) + b"\x87", key)
    assert script_commits_to_key(bytes([33]) + key + b"\xac", key[1:])
    assert script_commits_to_key(witness_script_pubkey(1, key[1:]), key)
    assert not script_commits_to_key(witness_script_pubkey(0, bytes(32)), key)
