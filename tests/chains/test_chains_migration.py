"""The migration planner: input, output and transaction sizes against well-known figures and
against transactions serialised by an independent library (embit), Bitcoin Core's dust
thresholds, and the plan's invariants on generated wallets.

The well-known input figures (P2PKH 148 vB, P2WPKH 68 vB ...) assume 72-byte signatures with
their sighash byte; the planner sizes ECDSA signatures at 73 bytes, so each of its figures is
one byte (legacy) or a quarter vbyte (witness) per signature above them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest
from coincurve import PrivateKey
from embit.script import Script, Witness  # type: ignore[import-untyped]
from embit.transaction import Transaction, TransactionInput, TransactionOutput  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from chains.bitcoin.descriptors import Descriptor, parse_descriptor
from chains.bitcoin.migration import (
    MAX_STANDARD_TX_WEIGHT,
    Coin,
    Destination,
    InputSize,
    MigrationPlan,
    UnplannableInput,
    dust_threshold,
    input_size,
    output_vbytes,
    overhead_weight,
    plan_migration,
    transaction_weight,
    virtual_size,
)
from chains.bitcoin.script import p2pkh_script, p2sh_script, witness_script_pubkey

KEYS = [PrivateKey.from_int(i).public_key.format().hex() for i in range(1, 21)]
UNCOMPRESSED = PrivateKey.from_int(99).public_key.format(compressed=False).hex()
XPUB = "xpub6ERApfZwUNrhLCkDtcHTcxd75RbzS1ed54G1LkBUHQVHQKqhMkhgbmJbZRkrgZw4koxb5JaHWkY4ALHY2grBGRjaDMzQLcgJvLJuZZvRcEL"
NUMS = "50929b74c1a04954b78b4b6035e97a5e078a5a0f28ec96d547bfee9ace803ac0"
ECDSA_SIG = b"\x30" + bytes(71) + b"\x01"  # a 72-byte DER signature and its sighash byte
SCHNORR_SIG = bytes(64)
BTC = 100_000_000

P2WPKH = witness_script_pubkey(0, bytes(20))
P2TR = witness_script_pubkey(1, bytes(32))
P2WSH = witness_script_pubkey(0, bytes(32))
P2PKH = p2pkh_script(bytes(20))
P2SH = p2sh_script(bytes(20))

WPKH = input_size(parse_descriptor(f"wpkh({KEYS[0]})"))
PKH = input_size(parse_descriptor(f"pkh({KEYS[0]})"))
TR = input_size(parse_descriptor(f"tr({KEYS[0][2:]})"))
SH_MULTI = input_size(parse_descriptor(f"sh(multi(2,{','.join(KEYS[:3])}))"))


def _multi(k: int, n: int) -> str:
    return f"multi({k},{','.join(KEYS[:n])})"


# ---------------------------------------------------------------------------------------
# Input sizes


@pytest.mark.parametrize(
    ("descriptor", "weight", "known_vbytes_with_72_byte_signatures"),
    [
        (f"pkh({KEYS[0]})", 4 * 149, 148),
        (f"pkh({UNCOMPRESSED})", 4 * 181, 180),
        (f"pk({KEYS[0]})", 4 * 115, 114),
        (f"wpkh({KEYS[0]})", 273, 68),
        (f"sh(wpkh({KEYS[0]}))", 365, 91),
        (f"tr({KEYS[0][2:]})", 230, 57.5),
        (f"sh({_multi(2, 3)})", 4 * 299, 297),
        (f"sh(sortedmulti(2,{','.join(KEYS[:3])}))", 4 * 299, 297),
        (f"wsh({_multi(2, 3)})", 420, 104.5),
        (f"sh(wsh({_multi(2, 3)}))", 560, 139.5),
    ],
)
def test_input_sizes_match_the_well_known_figures(
    descriptor: str, weight: int, known_vbytes_with_72_byte_signatures: float
) -> None:
    size = input_size(parse_descriptor(descriptor))
    assert size.weight == weight
    signatures = 2 if "multi" in descriptor else 1
    per_signature = 0.25 if size.witness else 1
    if descriptor.startswith("tr("):
        per_signature = 0  # Schnorr signatures have one size
    assert size.vbytes == known_vbytes_with_72_byte_signatures + signatures * per_signature


def test_taproot_is_sized_as_a_key_path_spend_with_or_without_a_script_tree() -> None:
    bare = input_size(parse_descriptor(f"tr({KEYS[0][2:]})"))
    with_tree = input_size(parse_descriptor(f"tr({KEYS[0][2:]},{{pk({KEYS[1][2:]}),pk({KEYS[2][2:]})}})"))
    assert bare == with_tree == InputSize(230, witness=True)


def test_extended_keys_size_as_compressed_keys() -> None:
    assert input_size(parse_descriptor(f"wpkh({XPUB}/0/*)")) == input_size(parse_descriptor(f"wpkh({KEYS[0]})"))
    assert input_size(parse_descriptor(f"pkh({XPUB}/<0;1>/*)")) == input_size(parse_descriptor(f"pkh({KEYS[0]})"))


@pytest.mark.parametrize(
    "descriptor",
    [
        f"addr({'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4'})",
        f"raw(0014{'00' * 20})",
        f"tr({NUMS},pk({KEYS[0][2:]}))",
    ],
)
def test_unsizable_descriptors_are_refused(descriptor: str) -> None:
    with pytest.raises(UnplannableInput):
        input_size(parse_descriptor(descriptor))


def _push(data: bytes) -> bytes:
    """A minimal script push, written here independently of the module under test."""
    if not data:
        return b"\x00"
    if len(data) <= 75:
        return bytes([len(data)]) + data
    if len(data) <= 255:
        return b"\x4c" + bytes([len(data)]) + data
    return b"\x4d" + len(data).to_bytes(2, "little") + data


def _script(descriptor: Descriptor) -> bytes:
    return descriptor.expand().script_pubkey


def _key(descriptor: Descriptor) -> bytes:
    return descriptor.expand().keys[0].pubkey


def _satisfaction(script: Descriptor) -> list[bytes]:
    """Worst-case stack items for a pk/pkh/multi script, built from the expanded keys."""
    if script.function == "pk":
        return [ECDSA_SIG]
    if script.function == "pkh":
        return [ECDSA_SIG, _key(script)]
    return [b""] + [ECDSA_SIG] * script.threshold


def _dummy_spend(descriptor: Descriptor) -> tuple[bytes, list[bytes]]:
    """A signed-looking scriptSig and witness spending ``descriptor`` at its largest."""
    inner = descriptor.inner
    if descriptor.function == "tr":
        return b"", [SCHNORR_SIG]
    if descriptor.function == "wpkh":
        return b"", [ECDSA_SIG, _key(descriptor)]
    if descriptor.function == "wsh":
        assert inner is not None
        return b"", [*_satisfaction(inner), _script(inner)]
    if descriptor.function == "sh":
        assert inner is not None
        if inner.function == "wpkh":
            return _push(_script(inner)), [ECDSA_SIG, _key(inner)]
        if inner.function == "wsh":
            assert inner.inner is not None
            return _push(_script(inner)), [*_satisfaction(inner.inner), _script(inner.inner)]
        return b"".join(map(_push, _satisfaction(inner))) + _push(_script(inner)), []
    return b"".join(map(_push, _satisfaction(descriptor))), []


def _embit_weight(spends: list[tuple[bytes, list[bytes]]], outputs: list[bytes]) -> int:
    """BIP-141 weight of the transaction embit serialises: 3 x stripped size + full size."""

    def transaction(with_witness: bool) -> Transaction:
        vin = [
            TransactionInput(bytes(32), 0, Script(script_sig), witness=Witness(items if with_witness else []))
            for script_sig, items in spends
        ]
        return Transaction(vin=vin, vout=[TransactionOutput(1000, Script(script)) for script in outputs])

    return 3 * len(transaction(False).serialize()) + len(transaction(True).serialize())


@pytest.mark.parametrize(
    "descriptor",
    [
        f"pk({KEYS[0]})",
        f"pk({UNCOMPRESSED})",
        f"pkh({KEYS[0]})",
        f"pkh({UNCOMPRESSED})",
        _multi(1, 3),
        f"wpkh({KEYS[0]})",
        f"sh(wpkh({KEYS[0]}))",
        f"sh(pkh({UNCOMPRESSED}))",
        f"sh({_multi(1, 1)})",
        f"sh({_multi(2, 2)})",  # 71-byte redeem script: a direct push
        f"sh({_multi(2, 3)})",  # 105 bytes: OP_PUSHDATA1
        f"sh({_multi(15, 15)})",  # 513 bytes: OP_PUSHDATA2, scriptSig length in 3 bytes
        f"sh(multi(1,{UNCOMPRESSED},{KEYS[0]}))",
        f"wsh(pkh({KEYS[0]}))",
        f"wsh({_multi(2, 3)})",
        f"wsh({_multi(20, 20)})",  # counts above 16 are one-byte pushes
        f"sh(wsh({_multi(2, 3)}))",
        f"tr({KEYS[0][2:]})",
        f"tr({XPUB}/0/*,pk({KEYS[1][2:]}))",
    ],
)
def test_input_sizes_match_serialised_transactions(descriptor: str) -> None:
    parsed = parse_descriptor(descriptor)
    expected = _embit_weight([_dummy_spend(parsed)], [P2WPKH])
    assert transaction_weight([input_size(parsed)], [P2WPKH]) == expected


def test_a_legacy_input_in_a_segwit_transaction_gets_an_empty_witness() -> None:
    pkh = parse_descriptor(f"pkh({KEYS[0]})")
    wpkh = parse_descriptor(f"wpkh({KEYS[1]})")
    spends = [_dummy_spend(pkh), _dummy_spend(wpkh)]
    weight = transaction_weight([PKH, WPKH], [P2TR, P2PKH])
    assert weight == _embit_weight(spends, [P2TR, P2PKH])
    assert weight == overhead_weight(2, 2, segwit=True) + PKH.weight + 1 + WPKH.weight + 4 * (43 + 34)


def test_transaction_overhead_and_whole_transactions() -> None:
    assert overhead_weight(1, 1, segwit=True) == 42  # 10.5 vB
    assert overhead_weight(1, 1, segwit=False) == 40  # 10 vB
    assert overhead_weight(253, 1, segwit=False) == 40 + 4 * 2  # a 3-byte input count
    # 1-in-1-out P2WPKH: 10.5 + 68.25 + 31 (109.5 vB with 72-byte signatures)
    assert virtual_size(transaction_weight([WPKH], [P2WPKH])) == 110
    # 1-in-1-out P2PKH, no witness: 10 + 149 + 34 (192 vB with 72-byte signatures)
    assert transaction_weight([PKH], [P2PKH]) == 4 * 193
    wpkh_spends = [_dummy_spend(parse_descriptor(f"wpkh({KEYS[0]})"))] * 300  # a 3-byte input count
    assert transaction_weight([WPKH] * 300, [P2WPKH]) == _embit_weight(wpkh_spends, [P2WPKH])


@pytest.mark.parametrize(
    ("script", "vbytes", "dust"),
    [(P2PKH, 34, 546), (P2SH, 32, 540), (P2WPKH, 31, 294), (P2TR, 43, 330), (P2WSH, 43, 330)],
)
def test_output_sizes_and_core_dust_thresholds(script: bytes, vbytes: int, dust: int) -> None:
    assert output_vbytes(script) == vbytes
    assert dust_threshold(script) == dust


def test_dust_threshold_other_rates_and_unspendable_outputs() -> None:
    assert dust_threshold(P2WPKH, 1000) == 98
    assert dust_threshold(P2PKH, 1000) == 182
    assert dust_threshold(P2WPKH, 2500) == 245  # 98 x 2.5
    assert dust_threshold(P2PKH, 1001) == 183  # 182.182 rounded up, as Core's CFeeRate::GetFee
    assert dust_threshold(bytes.fromhex("6a04deadbeef")) == 0  # OP_RETURN
    assert dust_threshold(bytes(10_001)) == 0  # longer than a script may be


# ---------------------------------------------------------------------------------------
# The planner


def _coin(number: int, value: int, rank: int = 0, spend: InputSize = WPKH, vout: int = 0) -> Coin:
    return Coin(f"{number:064x}", vout, value, p2pkh_script(number.to_bytes(20, "big")), spend, rank)


def _destination(number: int) -> Destination:
    script = (P2WPKH[:2] + number.to_bytes(20, "big")) if number % 3 else (P2TR[:2] + number.to_bytes(32, "big"))
    return Destination(script, f"destination-{number}")


class _Fresh:
    """An endless iterator of fresh destinations that records what it handed out."""

    def __init__(self) -> None:
        self.given: list[Destination] = []
        self._numbers = itertools.count(1)

    def __iter__(self) -> Iterator[Destination]:
        return self

    def __next__(self) -> Destination:
        self.given.append(_destination(next(self._numbers)))
        return self.given[-1]


def _check(plan: MigrationPlan, coins: list[Coin], fresh: _Fresh, fee_rate: float, cap: int, max_inputs: int) -> None:
    """Every invariant of a plan."""
    assert [step.order for step in plan.steps] == list(range(1, len(plan.steps) + 1))
    planned = [coin for step in plan.steps for coin in step.inputs] + [skip.coin for skip in plan.skipped]
    assert sorted(planned, key=lambda coin: coin.outpoint) == sorted(coins, key=lambda coin: coin.outpoint)
    paid = [payment.destination for step in plan.steps for payment in step.outputs]
    assert len({destination.script_pubkey for destination in paid}) == len(paid)
    # destinations are used in the order given, none skipped; at most one drawn and left over
    assert paid + list(plan.unused_destinations) == fresh.given
    assert len(plan.unused_destinations) <= 1
    for step in plan.steps:
        assert step.in_sat == step.out_sat + step.fee_sat
        assert step.fee_sat >= step.vsize * fee_rate
        assert step.weight == transaction_weight(
            [coin.spend for coin in step.inputs], [payment.destination.script_pubkey for payment in step.outputs]
        )
        assert step.weight <= MAX_STANDARD_TX_WEIGHT
        assert 1 <= len(step.inputs) <= max_inputs
        assert len({coin.exposure_rank for coin in step.inputs}) == 1
        for payment in step.outputs:
            assert dust_threshold(payment.destination.script_pubkey) <= payment.value <= cap
    ranks = [step.inputs[0].exposure_rank for step in plan.steps]
    assert ranks == sorted(ranks)  # no exposed coin after a less exposed one
    assert plan.in_sat == plan.out_sat + plan.fee_sat


@st.composite
def _wallets(draw: st.DrawFn) -> tuple[list[Coin], int]:
    cap = draw(st.one_of(st.integers(546, 20_000), st.integers(546, 10 * BTC)))
    count = draw(st.integers(0, 40))
    spends = st.sampled_from([WPKH, PKH, TR, SH_MULTI])
    coins = [
        _coin(
            number,
            draw(st.one_of(st.integers(0, 3000), st.integers(0, 30 * cap))),
            draw(st.integers(0, 2)),
            draw(spends),
            draw(st.integers(0, 3)),
        )
        for number in range(1, count + 1)
    ]
    return coins, cap


@settings(max_examples=200, deadline=None)
@given(
    wallet=_wallets(),
    fee_rate=st.one_of(st.integers(1, 300).map(float), st.floats(1, 300)),
    max_inputs=st.integers(1, 25),
)
def test_plans_keep_every_invariant(wallet: tuple[list[Coin], int], fee_rate: float, max_inputs: int) -> None:
    coins, cap = wallet
    fresh = _Fresh()
    plan = plan_migration(coins, fresh, fee_rate, cap, max_inputs_per_step=max_inputs)
    _check(plan, coins, fresh, fee_rate, cap, max_inputs)
    for skip in plan.skipped:
        assert skip.reason


def test_a_coin_above_the_cap_is_split_and_the_last_output_pays_the_fee() -> None:
    fresh = _Fresh()
    plan = plan_migration([_coin(1, 120 * BTC)], fresh, 2, 50 * BTC)
    (step,) = plan.steps
    vsize = virtual_size(42 + WPKH.weight + 4 * (31 + 43 + 31))  # destinations 1, 2 P2WPKH; 3 P2TR
    assert step.vsize == vsize
    assert step.fee_sat == 2 * vsize
    assert [payment.value for payment in step.outputs] == [50 * BTC, 50 * BTC, 20 * BTC - 2 * vsize]
    assert [payment.destination for payment in step.outputs] == fresh.given
    assert (plan.in_sat, plan.out_sat, plan.fee_sat) == (120 * BTC, 120 * BTC - 2 * vsize, 2 * vsize)
    assert plan.skipped == ()
    assert plan.unused_destinations == ()


def test_a_rest_below_dust_goes_to_the_fee_and_its_destination_is_left_unused() -> None:
    cap = 1 * BTC
    # one P2WPKH input: 110 vB with one P2WPKH output, 141 vB with a second
    fresh = _Fresh()
    plan = plan_migration([_coin(1, cap + 110 + 100)], fresh, 1, cap)
    (step,) = plan.steps
    assert [payment.value for payment in step.outputs] == [cap]
    assert step.vsize == 110
    assert step.fee_sat == 210  # the 69 sat a second output would have held, and its 31 vB
    assert plan.unused_destinations == (fresh.given[1],)


def test_uneconomic_coins_are_skipped_with_a_reason() -> None:
    coins = [_coin(1, 100), _coin(2, 400), _coin(3, 10_000)]
    plan = plan_migration(coins[:2], _Fresh(), 2, BTC)
    assert plan.steps == ()
    reasons = {skip.coin.value: skip.reason for skip in plan.skipped}
    assert "137 sat fee of spending it" in reasons[100]  # 68.25 vB at 2 sat/vB
    assert "dust" in reasons[400]  # 400 - 220 sat fee is below 294

    plan = plan_migration(coins, _Fresh(), 2, BTC)
    (step,) = plan.steps
    assert step.inputs == (coins[2], coins[1])  # 400 sat moves along with a larger coin
    assert [skip.coin for skip in plan.skipped] == [coins[0]]


def test_exposed_coins_move_before_larger_unexposed_ones() -> None:
    unexposed, on_spend, exposed = _coin(1, 10 * BTC, rank=2), _coin(2, BTC, rank=1), _coin(3, 100_000, rank=0)
    plan = plan_migration([unexposed, on_spend, exposed], _Fresh(), 5, 50 * BTC)
    assert [step.inputs for step in plan.steps] == [(exposed,), (on_spend,), (unexposed,)]


def test_larger_coins_first_and_at_most_max_inputs_per_step() -> None:
    coins = [_coin(number, number * 100_000) for number in range(1, 6)]
    plan = plan_migration(coins, _Fresh(), 1, 50 * BTC, max_inputs_per_step=2)
    assert [[coin.value // 100_000 for coin in step.inputs] for step in plan.steps] == [[5, 4], [3, 2], [1]]


def test_steps_stay_under_the_standard_weight() -> None:
    coins = [_coin(number, BTC, spend=PKH) for number in range(1, 701)]
    fresh = _Fresh()
    plan = plan_migration(coins, fresh, 1, 100 * BTC, max_inputs_per_step=1000)
    assert len(plan.steps) == 2
    assert all(step.weight <= MAX_STANDARD_TX_WEIGHT for step in plan.steps)
    assert plan.steps[0].weight > 0.99 * MAX_STANDARD_TX_WEIGHT  # the first step is nearly full
    _check(plan, coins, fresh, 1, 100 * BTC, 1000)


@pytest.mark.parametrize("fee_rate", [0, 0.5, float("nan"), float("inf"), -1])
def test_fee_rate_below_one_sat_per_vbyte_is_refused(fee_rate: float) -> None:
    with pytest.raises(ValueError, match="fee rate"):
        plan_migration([_coin(1, BTC)], _Fresh(), fee_rate, BTC)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: plan_migration([_coin(1, BTC)], _Fresh(), 1, 545), "max_per_address_sat"),
        (lambda: plan_migration([_coin(1, BTC)], _Fresh(), 1, BTC, max_inputs_per_step=0), "max_inputs_per_step"),
        (lambda: plan_migration([_coin(1, BTC), _coin(1, 2 * BTC)], _Fresh(), 1, BTC), "listed twice"),
        (lambda: plan_migration([_coin(1, 3 * BTC)], iter([_destination(1)]), 1, BTC), "ran out"),
        (lambda: plan_migration([_coin(1, 3 * BTC)], [_destination(1)] * 3, 1, BTC), "given twice"),
        (
            lambda: plan_migration([_coin(1, BTC)], [Destination(_coin(1, BTC).script_pubkey, "old")], 1, BTC),
            "coins being moved",
        ),
        (lambda: plan_migration([_coin(1, 21_000_000 * BTC)], _Fresh(), 1, 1000), "raise max_per_address_sat"),
    ],
)
def test_bad_plans_are_refused(call: Callable[[], MigrationPlan], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "make",
    [
        lambda: Coin("ab" * 31, 0, 1, P2PKH, WPKH, 0),
        lambda: Coin("zz" * 32, 0, 1, P2PKH, WPKH, 0),
        lambda: Coin("ab" * 32, -1, 1, P2PKH, WPKH, 0),
        lambda: Coin("ab" * 32, 0, -1, P2PKH, WPKH, 0),
        lambda: Coin("ab" * 32, 0, 1, P2PKH, WPKH, 3),
        lambda: Destination(bytes.fromhex("6a00"), "op_return"),
        lambda: Destination(bytes.fromhex("21" + KEYS[0] + "ac"), "p2pk"),
        lambda: Destination(witness_script_pubkey(0, bytes(25)), "v0 program of no valid length"),
    ],
)
def test_malformed_coins_and_destinations_are_refused(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError):
        make()
