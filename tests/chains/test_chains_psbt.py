"""BIP-174 PSBTs (chains/bitcoin/psbt.py) tested on BIP-174's vectors: the invalid, valid and
Signer-check PSBTs, the Creator and Updater steps of its workflow, and read-back by an
independent library (embit), including BIP-371 taproot fields built on the BIP-86 vectors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from embit.psbt import PSBT as EmbitPsbt  # type: ignore[import-untyped]

from chains.bitcoin.bip32 import HARDENED, parse_extended_key
from chains.bitcoin.psbt import (
    InvalidPsbt,
    KeyOrigin,
    Psbt,
    PsbtInput,
    PsbtOutput,
    TapKeyOrigin,
    create_psbt,
    decode_psbt,
    encode_psbt,
    parse_psbt,
    serialize_psbt,
    with_input,
    with_output,
)
from chains.bitcoin.script import (
    OP_CHECKSIG,
    classify_script,
    script_keys,
    tagged_hash,
    taproot_output_key,
    witness_program,
    witness_script_pubkey,
)
from chains.bitcoin.tx import TxOut, parse_transaction
from pqc.hashes import hash160, sha256

Loader = Callable[[str], Any]
VECTORS = "wallets/psbt_bip174.json"
#: The fingerprint of the workflow's master key (its tprv), in every derivation of the Updater's result.
WORKFLOW_FINGERPRINT = bytes.fromhex("d90c6a4f")
SEQUENCE_FINAL = 0xFFFFFFFF
#: The x coordinate of secp256k1's generator: a valid x-only key that no test output pays.
G_X = bytes.fromhex("79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")

#: Why each of BIP-174's invalid PSBTs is refused: a fragment of the ``InvalidPsbt`` message.
INVALID_REASONS = {
    "Network transaction, not PSBT format": "magic",
    "PSBT missing outputs": "output 0: PSBT truncated",
    "PSBT where one input has a filled scriptSig in the unsigned tx": "has a scriptSig",
    "PSBT where inputs and outputs are provided but without an unsigned tx": "no unsigned transaction",
    "PSBT with duplicate keys in an input": "input 0: key 00 appears twice",
    "PSBT with invalid global transaction typed key": "global map: key type 0x00 takes no key data",
    "PSBT with invalid input witness utxo typed key": "input 0: key type 0x01 takes no key data",
    "PSBT with invalid pubkey length for input partial signature typed key": "input 0: .* not a SEC public key",
    "PSBT with invalid redeemscript typed key": "input 0: key type 0x04 takes no key data",
    "PSBT with invalid witnessscript typed key": "input 0: key type 0x05 takes no key data",
    "PSBT with invalid pubkey in input BIP 32 derivation paths typed key": "input 0: .* not a SEC public key",
    "PSBT with invalid non-witness utxo typed key": "input 0: key type 0x00 takes no key data",
    "PSBT with invalid final scriptsig typed key": "input 0: key type 0x07 takes no key data",
    "PSBT with invalid final script witness typed key": "input 1: key type 0x08 takes no key data",
    "PSBT with invalid pubkey in output BIP 32 derivation paths typed key": "output 0: .* not a SEC public key",
    "PSBT with invalid input sighash type typed key": "input 0: key type 0x03 takes no key data",
    "PSBT with invalid output redeemScript typed key": "output 0: key type 0x00 takes no key data",
    "PSBT with invalid output witnessScript typed key": "output 1: key type 0x01 takes no key data",
    "PSBT with unsigned tx serialized with witness serialization format": "in the witness serialisation",
    "PSBT with an invalid value data due to its size being not the stated size": "trailing bytes after the unsigned",
}


def _path(text: str) -> tuple[int, ...]:
    """``m/0'/0'/1'`` -> child numbers, hardened ones with ``HARDENED`` added."""
    steps = text.split("/")
    assert steps[0] == "m"
    return tuple(int(s.rstrip("'")) + (HARDENED if s.endswith("'") else 0) for s in steps[1:])


def _compact(n: int) -> bytes:
    return bytes((n,)) if n < 0xFD else b"\xfd" + n.to_bytes(2, "little")


def _raw_psbt(*maps: list[tuple[bytes, bytes]]) -> bytes:
    """A PSBT written by hand from its maps (global first), for the refusal tests."""
    body = b"".join(b"".join(_compact(len(k)) + k + _compact(len(v)) + v for k, v in pairs) + b"\x00" for pairs in maps)
    return b"psbt\xff" + body


def _creator(vectors: dict[str, Any]) -> Psbt:
    creator = vectors["workflow"]["creator"]
    inputs = [(i["txid"], i["index"], SEQUENCE_FINAL) for i in creator["inputs"]]
    outputs = [
        TxOut(int(Decimal(o["amount_btc"]) * 100_000_000), bytes.fromhex(o["scriptPubKey"])) for o in creator["outputs"]
    ]
    return create_psbt(inputs, outputs)


def _updated(psbt: Psbt, updater: dict[str, Any]) -> Psbt:
    """BIP-174's Updater as a wallet does it: each input gets the UTXO it spends (the whole
    previous transaction for a legacy spend, the output alone for a segwit one), the scripts
    hashing to it and the origins of the keys in them; each output gets the origins of the
    keys it pays."""
    previous = {parse_transaction(raw).txid: raw for raw in map(bytes.fromhex, updater["previous_transactions"])}
    redeem_scripts = {hash160(s): s for s in map(bytes.fromhex, updater["redeem_scripts"])}
    witness_scripts = {sha256(s): s for s in map(bytes.fromhex, updater["witness_scripts"])}
    origins = {
        bytes.fromhex(k["key"]): KeyOrigin(WORKFLOW_FINGERPRINT, _path(k["derivation_path"]))
        for k in updater["public_keys"]
    }
    for index, txin in enumerate(psbt.transaction.inputs):
        raw = previous[txin.prev_txid]
        utxo = parse_transaction(raw).outputs[txin.vout]
        redeem = redeem_scripts[classify_script(utxo.script_pubkey).program]
        program = witness_program(redeem)
        fields: dict[str, Any] = {"redeem_script": redeem}
        if program is None:
            fields["non_witness_utxo"] = raw
            keys = script_keys(redeem)
        else:
            fields["witness_utxo"] = utxo
            fields["witness_script"] = witness_scripts[program[1]]
            keys = script_keys(fields["witness_script"])
        psbt = with_input(psbt, index, bip32_derivations={k: origins[k] for k in keys}, **fields)
    for index, txout in enumerate(psbt.transaction.outputs):
        paid = {k: o for k, o in origins.items() if witness_script_pubkey(0, hash160(k)) == txout.script_pubkey}
        psbt = with_output(psbt, index, bip32_derivations=paid)
    return psbt


# --- BIP-174's vectors -----------------------------------------------------------------------


def test_every_invalid_vector_is_refused_for_its_reason(load_vectors: Loader) -> None:
    vectors = load_vectors(VECTORS)["invalid"]
    assert [v["description"] for v in vectors] == list(INVALID_REASONS)
    for vector in vectors:
        reason = INVALID_REASONS[vector["description"]]
        with pytest.raises(InvalidPsbt, match=reason):
            parse_psbt(bytes.fromhex(vector["hex"]))
        with pytest.raises(InvalidPsbt, match=reason):
            decode_psbt(vector["base64"])


def test_valid_and_signer_check_vectors_parse_and_reserialise_byte_for_byte(load_vectors: Loader) -> None:
    vectors = load_vectors(VECTORS)
    cases = vectors["valid"] + vectors["fails_signer_checks"]
    assert (len(vectors["valid"]), len(vectors["fails_signer_checks"])) == (10, 4)
    for case in cases:
        psbt = parse_psbt(bytes.fromhex(case["hex"]))
        assert decode_psbt(case["base64"]) == psbt, case["description"]
        assert serialize_psbt(psbt).hex() == case["hex"], case["description"]
        assert encode_psbt(psbt) == case["base64"], case["description"]


def test_workflow_results_reserialise_byte_for_byte(load_vectors: Loader) -> None:
    """Every PSBT of the workflow, including the Combiner's: its input 1 has the partial signature
    of 03089d… before that of 023add…, Bitcoin Core's key-id (HASH160) order."""
    workflow = load_vectors(VECTORS)["workflow"]
    steps = ("creator", "updater", "updater_sighash_all", "signer_1", "signer_2", "combiner", "input_finalizer")
    results = [workflow[step]["result"] for step in steps]
    results += [*workflow["combiner_unknown_kv"]["inputs"], workflow["combiner_unknown_kv"]["result"]]
    for result in results:
        assert serialize_psbt(parse_psbt(bytes.fromhex(result["hex"]))).hex() == result["hex"]
    combined = parse_psbt(bytes.fromhex(workflow["combiner"]["result"]["hex"])).inputs[1].partial_sigs
    assert [key.hex()[:6] for key in combined] == ["03089d", "023add"]


def test_the_creator_builds_the_bip_psbt(load_vectors: Loader) -> None:
    vectors = load_vectors(VECTORS)
    psbt = _creator(vectors)
    assert serialize_psbt(psbt).hex() == vectors["workflow"]["creator"]["result"]["hex"]
    assert encode_psbt(psbt) == vectors["workflow"]["creator"]["result"]["base64"]
    tx = psbt.transaction
    assert (tx.version, tx.locktime, [i.sequence for i in tx.inputs]) == (2, 0, [SEQUENCE_FINAL] * 2)
    assert psbt.inputs == (PsbtInput(), PsbtInput())


def test_the_updater_adds_utxos_scripts_and_derivations(load_vectors: Loader) -> None:
    vectors = load_vectors(VECTORS)
    workflow = vectors["workflow"]
    psbt = _updated(_creator(vectors), workflow["updater"])
    assert serialize_psbt(psbt).hex() == workflow["updater"]["result"]["hex"]
    legacy, segwit = psbt.inputs
    assert legacy.non_witness_utxo is not None and legacy.witness_utxo is None
    assert segwit.witness_utxo == TxOut(200_000_000, bytes.fromhex("a914b7f5faf40e3d40a5a459b1db3535f2b72fa921e887"))
    assert segwit.non_witness_utxo is None
    assert [o.path for o in legacy.bip32_derivations.values()] == [_path("m/0'/0'/0'"), _path("m/0'/0'/1'")]


def test_the_updater_adds_sighash_all(load_vectors: Loader) -> None:
    vectors = load_vectors(VECTORS)
    workflow = vectors["workflow"]
    psbt = _updated(_creator(vectors), workflow["updater"])
    for index in range(len(psbt.inputs)):
        psbt = with_input(psbt, index, sighash_type=1)
    assert serialize_psbt(psbt).hex() == workflow["updater_sighash_all"]["result"]["hex"]


# --- read back by embit ----------------------------------------------------------------------


def _embit_origins(derivations: dict[Any, Any]) -> dict[bytes, tuple[bytes, tuple[int, ...]]]:
    return {pub.sec(): (der.fingerprint, tuple(der.derivation)) for pub, der in derivations.items()}


def _origins(derivations: dict[bytes, KeyOrigin]) -> dict[bytes, tuple[bytes, tuple[int, ...]]]:
    return {key: (origin.fingerprint, origin.path) for key, origin in derivations.items()}


def test_embit_reads_the_updater_psbt(load_vectors: Loader) -> None:
    vectors = load_vectors(VECTORS)
    psbt = with_input(_updated(_creator(vectors), vectors["workflow"]["updater"]), 1, sighash_type=1)
    raw = serialize_psbt(psbt)
    theirs = EmbitPsbt.parse(raw)
    assert theirs.serialize() == raw
    assert theirs.tx.txid().hex() == psbt.transaction.txid
    assert [(o.value, o.script_pubkey.data) for o in theirs.tx.vout] == [
        (o.value, o.script_pubkey) for o in psbt.transaction.outputs
    ]
    for ours, their_input in zip(psbt.inputs, theirs.inputs, strict=True):
        if ours.non_witness_utxo is None:
            assert their_input.non_witness_utxo is None
        else:
            assert their_input.non_witness_utxo.serialize() == ours.non_witness_utxo
        if ours.witness_utxo is None:
            assert their_input.witness_utxo is None
        else:
            their_utxo = their_input.witness_utxo
            assert (their_utxo.value, their_utxo.script_pubkey.data) == (
                ours.witness_utxo.value,
                ours.witness_utxo.script_pubkey,
            )
        assert their_input.redeem_script.data == ours.redeem_script
        assert (their_input.witness_script and their_input.witness_script.data) == ours.witness_script
        assert their_input.sighash_type == ours.sighash_type
        assert _embit_origins(their_input.bip32_derivations) == _origins(ours.bip32_derivations)
    for ours_out, their_output in zip(psbt.outputs, theirs.outputs, strict=True):
        assert _embit_origins(their_output.bip32_derivations) == _origins(ours_out.bip32_derivations)


def _taproot_psbt(load_vectors: Loader) -> tuple[Psbt, bytes]:
    """Two P2TR inputs of the BIP-86 wallet, one BIP-86 (key path only) and one whose output key
    also commits to a single-leaf script tree, and a P2TR change output; returns the leaf hash."""
    bip86 = load_vectors("wallets/bip86.json")
    fingerprint = parse_extended_key(bip86["rootpub"])[0].fingerprint
    receive, second, change = bip86["addresses"]
    key0, key1, change_key = (bytes.fromhex(a["internal_key"]) for a in (receive, second, change))
    leaf_script = bytes((32,)) + key1 + bytes((OP_CHECKSIG,))
    leaf_hash = tagged_hash("TapLeaf", bytes((0xC0, len(leaf_script))) + leaf_script)
    script_tree_spk = witness_script_pubkey(1, taproot_output_key(key1, leaf_hash))
    psbt = create_psbt(
        [("11" * 32, 0, 0xFFFFFFFD), ("22" * 32, 3, 0xFFFFFFFD)],
        [TxOut(129_000, bytes.fromhex(change["scriptPubKey"]))],
    )
    psbt = with_input(
        psbt,
        0,
        witness_utxo=TxOut(100_000, bytes.fromhex(receive["scriptPubKey"])),
        tap_internal_key=key0,
        tap_bip32_derivations={key0: TapKeyOrigin((), KeyOrigin(fingerprint, _path(receive["path"])))},
    )
    psbt = with_input(
        psbt,
        1,
        witness_utxo=TxOut(30_000, script_tree_spk),
        tap_internal_key=key1,
        tap_merkle_root=leaf_hash,
        tap_bip32_derivations={key1: TapKeyOrigin((leaf_hash,), KeyOrigin(fingerprint, _path(second["path"])))},
    )
    psbt = with_output(
        psbt,
        0,
        tap_internal_key=change_key,
        tap_bip32_derivations={change_key: TapKeyOrigin((), KeyOrigin(fingerprint, _path(change["path"])))},
    )
    return psbt, leaf_hash


def _embit_tap_origins(derivations: dict[Any, Any]) -> dict[bytes, tuple[list[bytes], bytes, tuple[int, ...]]]:
    return {
        pub.xonly(): (list(leaves), der.fingerprint, tuple(der.derivation))
        for pub, (leaves, der) in derivations.items()
    }


def _tap_origins(derivations: dict[bytes, TapKeyOrigin]) -> dict[bytes, tuple[list[bytes], bytes, tuple[int, ...]]]:
    return {k: (list(t.leaf_hashes), t.origin.fingerprint, t.origin.path) for k, t in derivations.items()}


def test_embit_reads_taproot_fields(load_vectors: Loader) -> None:
    psbt, leaf_hash = _taproot_psbt(load_vectors)
    raw = serialize_psbt(psbt)
    assert parse_psbt(raw) == psbt
    theirs = EmbitPsbt.parse(raw)
    assert theirs.serialize() == raw
    for ours, their_input in zip(psbt.inputs, theirs.inputs, strict=True):
        assert ours.witness_utxo is not None
        assert their_input.witness_utxo.value == ours.witness_utxo.value
        assert their_input.witness_utxo.script_pubkey.data == ours.witness_utxo.script_pubkey
        assert their_input.taproot_internal_key.xonly() == ours.tap_internal_key
        assert their_input.taproot_merkle_root == ours.tap_merkle_root
        assert _embit_tap_origins(their_input.taproot_bip32_derivations) == _tap_origins(ours.tap_bip32_derivations)
    assert theirs.inputs[1].taproot_merkle_root == leaf_hash
    [their_output] = theirs.outputs
    assert their_output.taproot_internal_key.xonly() == psbt.outputs[0].tap_internal_key
    assert _embit_tap_origins(their_output.taproot_bip32_derivations) == _tap_origins(
        psbt.outputs[0].tap_bip32_derivations
    )


# --- refusals --------------------------------------------------------------------------------


def test_every_truncation_of_a_psbt_is_refused(load_vectors: Loader) -> None:
    raw = bytes.fromhex(load_vectors(VECTORS)["workflow"]["updater"]["result"]["hex"])
    for end in range(len(raw)):
        with pytest.raises(InvalidPsbt):
            parse_psbt(raw[:end])


def test_malformed_framing_is_refused(load_vectors: Loader) -> None:
    creator = bytes.fromhex(load_vectors(VECTORS)["workflow"]["creator"]["result"]["hex"])
    with pytest.raises(InvalidPsbt, match="1 trailing bytes after the PSBT"):
        parse_psbt(creator + b"\x00")
    # the global tx key's length 0x01 written as a 3-byte compact size
    with pytest.raises(InvalidPsbt, match="non-canonical compact size"):
        parse_psbt(creator[:5] + b"\xfd\x01\x00" + creator[6:])
    for text in ("not base64!", "cHNidP8", "cHNidP8BAA==é"):
        with pytest.raises(InvalidPsbt, match="not base64"):
            decode_psbt(text)


def test_global_version_other_than_zero_is_refused(load_vectors: Loader) -> None:
    creator = bytes.fromhex(load_vectors(VECTORS)["workflow"]["creator"]["result"]["hex"])
    tx = parse_psbt(creator).unsigned_tx
    for version in (1, 2):
        raw = _raw_psbt([(b"\x00", tx), (b"\xfb", version.to_bytes(4, "little"))], [], [], [], [])
        with pytest.raises(InvalidPsbt, match=f"PSBT version {version} is not supported"):
            parse_psbt(raw)
    explicit_zero = _raw_psbt([(b"\x00", tx), (b"\xfb", bytes(4))], [], [], [], [])
    assert parse_psbt(explicit_zero).version == 0
    assert serialize_psbt(parse_psbt(explicit_zero)) == explicit_zero
    with pytest.raises(InvalidPsbt, match="4-byte integer"):
        parse_psbt(_raw_psbt([(b"\x00", tx), (b"\xfb", bytes(3))], [], [], [], []))
    with pytest.raises(InvalidPsbt, match="version 2 only"):
        parse_psbt(_raw_psbt([(b"\x00", tx), (b"\x04", b"\x02")], [], [], [], []))


def test_field_values_of_the_wrong_size_are_refused(load_vectors: Loader) -> None:
    tx = parse_psbt(bytes.fromhex(load_vectors(VECTORS)["workflow"]["creator"]["result"]["hex"])).unsigned_tx
    xonly = bytes.fromhex("cc8a4bc64d897bddc5fbc2f670f7a8ba0b386779106cf1223c6fc5d7cd6fc115")
    cases = {
        "x-only public key of 32 bytes": [(b"\x16" + xonly[:31], b"\x00" + bytes(4))],
        "taproot internal key is not": [(b"\x17", xonly + b"\x00")],
        "Merkle root is 32 bytes": [(b"\x18", bytes(31))],
        "4-byte fingerprint and 4 bytes per step, got 7": [(b"\x16" + xonly, b"\x00" + bytes(7))],
        "taproot leaf hash is 32|truncated": [(b"\x16" + xonly, b"\x01" + bytes(20))],
        "trailing bytes after the witness UTXO": [(b"\x01", bytes(8) + b"\x00\x00")],
        "final scriptWitness truncated": [(b"\x08", b"\x02\x01\xaa")],
        "4-byte integer, got 5": [(b"\x03", bytes(5))],
        "version 2 only": [(b"\x0e", bytes(32))],
    }
    for reason, input_map in cases.items():
        with pytest.raises(InvalidPsbt, match=f"input 0.*({reason})"):
            parse_psbt(_raw_psbt([(b"\x00", tx)], input_map, [], [], []))
    with pytest.raises(InvalidPsbt, match="global xpub is the 78-byte"):
        parse_psbt(_raw_psbt([(b"\x00", tx), (b"\x01" + bytes(77), bytes(4))], [], [], [], []))
    fingerprint_only = _raw_psbt([(b"\x00", tx)], [(b"\x16" + xonly, b"\x00" + bytes(4))], [], [], [])
    assert parse_psbt(fingerprint_only).inputs[0].tap_bip32_derivations[xonly] == TapKeyOrigin(
        (), KeyOrigin(bytes(4), ())
    )


def test_a_non_witness_utxo_must_be_the_transaction_spent(load_vectors: Loader) -> None:
    vectors = load_vectors(VECTORS)
    updated = parse_psbt(bytes.fromhex(vectors["workflow"]["updater"]["result"]["hex"]))
    other_tx = bytes.fromhex(vectors["workflow"]["updater"]["previous_transactions"][0])
    with pytest.raises(InvalidPsbt, match="input 0: the non-witness UTXO is transaction 1dea7cd0"):
        replace(updated, inputs=(replace(updated.inputs[0], non_witness_utxo=other_tx), updated.inputs[1]))
    tx = bytearray(updated.unsigned_tx)
    tx[5 + 32] = 5  # input 0 now spends output 5, which the previous transaction does not have
    with pytest.raises(InvalidPsbt, match="input 0: the non-witness UTXO has no output 5"):
        replace(updated, unsigned_tx=bytes(tx))
    with pytest.raises(InvalidPsbt, match="not a transaction"):
        replace(updated, inputs=(replace(updated.inputs[0], non_witness_utxo=b"\x02"), updated.inputs[1]))


def test_the_data_model_keeps_its_invariants(load_vectors: Loader) -> None:
    psbt = _creator(load_vectors(VECTORS))
    with pytest.raises(InvalidPsbt, match="2 input and 1 output maps"):
        replace(psbt, outputs=psbt.outputs[:1])
    with pytest.raises(InvalidPsbt, match="interpreted key type: set its field"):
        PsbtInput(unknown={b"\x04": b"\x51"})
    with pytest.raises(InvalidPsbt, match="interpreted key type"):
        PsbtOutput(unknown={b"\x02" + bytes(33): bytes(4)})
    with pytest.raises(InvalidPsbt, match="fingerprint is 4 bytes"):
        KeyOrigin(bytes(3), ())
    with pytest.raises(InvalidPsbt, match="derivation step"):
        KeyOrigin(bytes(4), (1 << 32,))
    with pytest.raises(InvalidPsbt, match="not a SEC public key"):
        PsbtInput(partial_sigs={b"\x02" + bytes(32): b"\x30"})  # x = 0 is not on the curve
    with pytest.raises(InvalidPsbt, match="sighash type"):
        PsbtInput(sighash_type=-1)
    unknown = {b"\x0a" + bytes(20): b"preimage", b"\xfc\x05qday!\x01": b"proprietary"}
    kept = replace(psbt, inputs=(PsbtInput(unknown=unknown), psbt.inputs[1]))
    assert parse_psbt(serialize_psbt(kept)).inputs[0].unknown == unknown


def test_xpubs_are_written_in_core_origin_order(load_vectors: Loader) -> None:
    """Bitcoin Core keys global xpubs by origin, not by xpub bytes: a PSBT it writes for a
    multisig wallet lists cosigners by fingerprint."""
    p2wsh = load_vectors(VECTORS)["valid"][5]
    psbt = parse_psbt(bytes.fromhex(p2wsh["hex"]))
    low, high = psbt.xpubs
    assert low < high
    swapped = {low: KeyOrigin(b"\xff" * 4, (0,)), high: KeyOrigin(b"\x00" * 4, (0,))}
    raw = serialize_psbt(replace(psbt, xpubs=swapped))
    assert raw.index(high) < raw.index(low)
    assert parse_psbt(raw).xpubs == swapped


# --- Creator and Updater checks --------------------------------------------------------------


def test_the_creator_refuses_malformed_inputs_and_outputs() -> None:
    p2wpkh = TxOut(1_000, witness_script_pubkey(0, bytes(20)))
    with pytest.raises(InvalidPsbt, match="input 0: a txid is 64 hex digits"):
        create_psbt([("ab" * 31, 0, SEQUENCE_FINAL)], [p2wpkh])
    with pytest.raises(InvalidPsbt, match="input 0: a txid is 64 hex digits"):
        create_psbt([("zz" * 32, 0, SEQUENCE_FINAL)], [p2wpkh])
    with pytest.raises(InvalidPsbt, match="vout"):
        create_psbt([("ab" * 32, 1 << 32, SEQUENCE_FINAL)], [p2wpkh])
    with pytest.raises(InvalidPsbt, match="output 0: amount"):
        create_psbt([("ab" * 32, 0, SEQUENCE_FINAL)], [TxOut(-1, p2wpkh.script_pubkey)])
    empty = create_psbt([], [], version=1, locktime=800_000)
    assert parse_psbt(serialize_psbt(empty)) == empty
    assert (empty.transaction.version, empty.transaction.locktime) == (1, 800_000)


def test_the_updater_refuses_what_a_signer_would(load_vectors: Loader) -> None:
    vectors = load_vectors(VECTORS)
    updater = vectors["workflow"]["updater"]
    created = _creator(vectors)
    updated = _updated(created, updater)
    legacy_tx, segwit_utxo = updated.inputs[0].non_witness_utxo, updated.inputs[1].witness_utxo
    segwit_tx = bytes.fromhex(updater["previous_transactions"][0])
    assert legacy_tx is not None and segwit_utxo is not None
    redeem, nested_wsh = map(bytes.fromhex, updater["redeem_scripts"])
    legacy_utxo = parse_transaction(legacy_tx).outputs[0]
    refusals: dict[str, tuple[int, dict[str, Any]]] = {
        "a witness UTXO on a non-segwit input": (0, {"witness_utxo": legacy_utxo, "redeem_script": redeem}),
        "not output 0 of the non-witness UTXO": (0, {"non_witness_utxo": legacy_tx, "witness_utxo": segwit_utxo}),
        "redeem script does not hash": (0, {"non_witness_utxo": legacy_tx, "redeem_script": nested_wsh}),
        "a segwit input needs its witness UTXO": (1, {"non_witness_utxo": segwit_tx, "redeem_script": nested_wsh}),
        "witness script does not hash": (1, {"witness_script": redeem}),
        "witness script inside P2SH needs its redeem script": (1, {"redeem_script": None}),
        "taproot internal key and Merkle root do not give": (1, {"tap_internal_key": G_X}),
    }
    for reason, (index, changes) in refusals.items():
        base = created if "non_witness_utxo" in changes else updated
        with pytest.raises(InvalidPsbt, match=reason):
            with_input(base, index, **changes)
    with pytest.raises(IndexError, match="no input 2"):
        with_input(updated, 2, sighash_type=1)
    with pytest.raises(IndexError, match="no output -1"):
        with_output(updated, -1)
    with pytest.raises(InvalidPsbt, match="output 0: the redeem script does not hash"):
        with_output(updated, 0, redeem_script=redeem)
    with pytest.raises(InvalidPsbt, match="output 1: the taproot internal key does not give"):
        with_output(updated, 1, tap_internal_key=G_X)
