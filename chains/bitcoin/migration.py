"""Plan moving a wallet's coins to a new wallet: which coins, in which transactions, to which addresses.

The plan follows BIP-360-style migration guidance: coins whose public key a quantum attacker
can already read move first, and no fresh address receives more than a cap. It is pure: the
caller brings the coins (from a scan) and fresh addresses of the destination wallet, and turns
each step into a PSBT elsewhere.

Sizes follow BIP-141: a transaction's weight is its serialisation without witness data times
4, plus the witness data (segwit marker and flag, each input's stack-item count, each item's
length and bytes) once; its virtual size is the weight divided by 4, rounded up. An input is
sized at its worst case, with 73-byte ECDSA signatures (a 72-byte DER encoding plus the sighash
byte: Bitcoin Core assumes 72 in all for its own wallet, which grinds for low R, but the
signer here may be any device) and 64-byte Schnorr signatures (BIP-341 ``SIGHASH_DEFAULT``).
Taproot inputs are sized as key-path spends. Dust follows Bitcoin Core's ``GetDustThreshold``
(src/policy/policy.cpp); transactions stay within its ``MAX_STANDARD_TX_WEIGHT`` (policy.h).

The policy of ``plan_migration``:

* Coins are taken by ``(exposure_rank, -value, txid, vout)``: exposed coins first, the larger
  first. A coin is skipped when its value does not exceed the fee its own input costs.
* A step (one transaction) spends coins of one exposure rank only, so every exposed coin sits
  in an earlier step than any less exposed one; it takes at most ``max_inputs_per_step`` coins
  and stays under the standard weight.
* A step pays all its value, less its fee, to fresh destinations (no change): each output gets
  the cap, the last one the rest. Each output uses a new destination, in the order given.
* The fee is the step's virtual size times the fee rate, rounded up. When the rest for the
  last output would be dust, that output is dropped and the rest goes to the fee (as a wallet
  drops uneconomic change), so no output is ever above the cap or below the dust threshold.
  A step whose single output would be dust is not made: its coins are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from chains.bitcoin.descriptors import Descriptor, KeyExpression
from chains.bitcoin.script import OP_RETURN, OutputType, classify_script, p2pkh_script, witness_program

#: Weight units per virtual byte (BIP-141): non-witness bytes weigh 4, witness bytes 1.
WITNESS_SCALE_FACTOR = 4
#: Bitcoin Core's largest standard transaction (policy.h ``MAX_STANDARD_TX_WEIGHT``).
MAX_STANDARD_TX_WEIGHT = 400_000
#: Bitcoin Core's default ``-dustrelayfee`` (policy.h ``DUST_RELAY_TX_FEE``), in sat per 1000 vbytes.
DUST_RELAY_FEE_SAT_PER_KVB = 3000
#: A DER-encoded ECDSA signature at its largest (72 bytes) with its sighash byte.
ECDSA_SIGNATURE_SIZE = 73
#: A BIP-340 signature with ``SIGHASH_DEFAULT``, which adds no sighash byte.
SCHNORR_SIGNATURE_SIZE = 64

_OUTPOINT_AND_SEQUENCE = 32 + 4 + 4
_VERSION_AND_LOCKTIME = 4 + 4
_SEGWIT_MARKER_AND_FLAG = 2  # weight units, once per transaction
_MAX_SCRIPT_SIZE = 10_000  # a longer scriptPubKey is unspendable (Core's IsUnspendable)
_COMPRESSED_KEY = 33
_P2PKH_SCRIPT = 25
_P2WPKH_PROGRAM_PUSH = 22  # the redeem script of sh(wpkh()): OP_0 <20 bytes>
_P2WSH_PROGRAM_PUSH = 34  # the redeem script of sh(wsh()): OP_0 <32 bytes>
_OP_PUSHDATA1_LIMIT, _OP_PUSHDATA2_LIMIT = 0xFF, 0xFFFF
_DIRECT_PUSH_LIMIT = 75
_EXPOSURE_RANKS = range(3)
#: BIP-341's provably unspendable internal key H: a tr() with it has no key path.
_NUMS_KEY = bytes.fromhex("50929b74c1a04954b78b4b6035e97a5e078a5a0f28ec96d547bfee9ace803ac0")
#: An address's scriptPubKey is at most a 40-byte witness program with its two opcodes.
_MAX_DESTINATION_OUTPUT_WEIGHT = WITNESS_SCALE_FACTOR * (8 + 1 + 42)


class UnplannableInput(ValueError):
    """The size of an input spending the descriptor's outputs cannot be known from the descriptor.

    ``addr()`` and ``raw()`` say nothing of how their outputs are spent, and a ``tr()`` whose
    internal key is BIP-341's unspendable point can only be spent by a script path."""


@dataclass(frozen=True, slots=True)
class InputSize:
    """What one input adds to a transaction, in BIP-141 weight units.

    ``weight`` counts the outpoint, sequence and scriptSig (with its length) four times and
    the witness (item count, item lengths and items) once. ``witness`` says the input has a
    witness: a transaction with any such input is serialised with the segwit marker and flag,
    and its other inputs each add a 1-byte empty witness (``transaction_weight`` counts both)."""

    weight: int
    witness: bool

    @property
    def vbytes(self) -> float:
        """The input's weight in virtual bytes (weight / 4, unrounded)."""
        return self.weight / WITNESS_SCALE_FACTOR


def _varint_size(value: int) -> int:
    """Bytes of Bitcoin's CompactSize encoding of ``value``."""
    return 1 if value < 0xFD else 3 if value <= 0xFFFF else 5 if value <= 0xFFFF_FFFF else 9


def _push_size(length: int) -> int:
    """Bytes of a minimal scriptSig push of ``length`` bytes (an empty item is OP_0)."""
    if length <= _DIRECT_PUSH_LIMIT:
        return 1 + length
    if length <= _OP_PUSHDATA1_LIMIT:
        return 2 + length
    return (3 if length <= _OP_PUSHDATA2_LIMIT else 5) + length


def _key_size(key: KeyExpression) -> int:
    """The serialised size of a key: as written for a plain key, compressed when derived."""
    return _COMPRESSED_KEY if key.pubkey is None else len(key.pubkey)


def _small_number_size(value: int) -> int:
    """Bytes of a multisig count in a script: OP_1..OP_16, above 16 a one-byte push."""
    return 1 if value <= 16 else 2


def _script_size(script: Descriptor) -> int:
    """Bytes of the script a ``pk``/``pkh``/``multi``/``sortedmulti`` expression makes."""
    if script.function == "pk":
        return 1 + _key_size(script.keys[0]) + 1  # <key> OP_CHECKSIG
    if script.function == "pkh":
        return _P2PKH_SCRIPT
    pushes = sum(1 + _key_size(key) for key in script.keys)
    return _small_number_size(script.threshold) + pushes + _small_number_size(len(script.keys)) + 1


def _satisfaction(script: Descriptor) -> list[int]:
    """The sizes of the stack items that satisfy a ``pk``/``pkh``/``multi`` script: its signatures,
    the key for ``pkh``, and the empty dummy item OP_CHECKMULTISIG pops."""
    if script.function == "pk":
        return [ECDSA_SIGNATURE_SIZE]
    if script.function == "pkh":
        return [ECDSA_SIGNATURE_SIZE, _key_size(script.keys[0])]
    return [0] + [ECDSA_SIGNATURE_SIZE] * script.threshold


def _input(script_sig: int, witness: Sequence[int] | None) -> InputSize:
    """An input with a ``script_sig``-byte scriptSig and these witness item sizes (None: no witness)."""
    weight = WITNESS_SCALE_FACTOR * (_OUTPOINT_AND_SEQUENCE + _varint_size(script_sig) + script_sig)
    if witness is None:
        return InputSize(weight, witness=False)
    items = _varint_size(len(witness)) + sum(_varint_size(item) + item for item in witness)
    return InputSize(weight + items, witness=True)


def _witness_script_input(script: Descriptor, script_sig: int) -> InputSize:
    """A P2WSH spend of ``script``: its satisfaction then the witness script itself."""
    return _input(script_sig, [*_satisfaction(script), _script_size(script)])


def input_size(descriptor: Descriptor) -> InputSize:
    """The largest an input spending an output of ``descriptor`` can be, to price its fee.

    Every shape of BIP-381..386 with keys: ``pk``, ``pkh`` (compressed or uncompressed key),
    bare ``multi``, ``wpkh``, ``sh(...)`` and ``wsh(...)`` of these (``sh(wpkh)``,
    ``sh(multi)``, ``wsh(multi)``, ``sh(wsh(multi))`` ...) and ``tr`` as a key-path spend (a
    script tree is assumed unused: the holder of the internal key signs). ``UnplannableInput``
    for ``addr()``, ``raw()`` and a ``tr()`` with BIP-341's unspendable internal key."""
    function, inner = descriptor.function, descriptor.inner
    if function == "tr":
        if descriptor.keys[0].pubkey == _NUMS_KEY:
            raise UnplannableInput("tr() with the unspendable internal key H has no key path to size")
        return _input(0, [SCHNORR_SIGNATURE_SIZE])
    if function == "wpkh":
        return _input(0, [ECDSA_SIGNATURE_SIZE, _COMPRESSED_KEY])
    if function == "wsh":
        assert inner is not None  # the parser gives wsh() its script
        return _witness_script_input(inner, 0)
    if function == "sh":
        assert inner is not None
        if inner.function == "wpkh":
            return _input(_push_size(_P2WPKH_PROGRAM_PUSH), [ECDSA_SIGNATURE_SIZE, _COMPRESSED_KEY])
        if inner.function == "wsh":
            assert inner.inner is not None
            return _witness_script_input(inner.inner, _push_size(_P2WSH_PROGRAM_PUSH))
        pushes = sum(_push_size(item) for item in _satisfaction(inner))
        return _input(pushes + _push_size(_script_size(inner)), None)
    if function in ("pk", "pkh", "multi", "sortedmulti"):
        return _input(sum(_push_size(item) for item in _satisfaction(descriptor)), None)
    raise UnplannableInput(f"{function}() names an output script, not how to spend it: its inputs cannot be sized")


def output_vbytes(script_pubkey: bytes) -> int:
    """The size of an output paying ``script_pubkey``: 8-byte value, script length, script.

    Outputs carry no witness data, so this is also their weight divided by 4 (e.g. P2WPKH 31,
    P2TR and P2WSH 43, P2PKH 34, P2SH 32)."""
    return 8 + _varint_size(len(script_pubkey)) + len(script_pubkey)


def overhead_weight(inputs: int, outputs: int, *, segwit: bool) -> int:
    """The weight of a transaction's fixed fields: version, locktime, the input and output
    counts, and with ``segwit`` the marker and flag (42 WU = 10.5 vB for 1 input and 1 output
    with segwit, 40 WU = 10 vB without)."""
    fixed = WITNESS_SCALE_FACTOR * (_VERSION_AND_LOCKTIME + _varint_size(inputs) + _varint_size(outputs))
    return fixed + (_SEGWIT_MARKER_AND_FLAG if segwit else 0)


def transaction_weight(inputs: Sequence[InputSize], output_scripts: Sequence[bytes]) -> int:
    """The BIP-141 weight of a transaction spending ``inputs`` to outputs paying ``output_scripts``.

    With any witness input, the marker and flag and a 1-byte empty witness for each other input
    are counted."""
    segwit = any(spend.witness for spend in inputs)
    empty_witnesses = sum(not spend.witness for spend in inputs) if segwit else 0
    outputs = WITNESS_SCALE_FACTOR * sum(output_vbytes(script) for script in output_scripts)
    return (
        overhead_weight(len(inputs), len(output_scripts), segwit=segwit)
        + sum(spend.weight for spend in inputs)
        + empty_witnesses
        + outputs
    )


def virtual_size(weight: int) -> int:
    """Virtual bytes of a transaction of ``weight`` weight units: weight / 4 rounded up (BIP-141)."""
    return -(-weight // WITNESS_SCALE_FACTOR)


def dust_threshold(script_pubkey: bytes, dust_relay_fee_sat_per_kvb: int = DUST_RELAY_FEE_SAT_PER_KVB) -> int:
    """The smallest value an output paying ``script_pubkey`` may have without being dust, in sat.

    Bitcoin Core's ``GetDustThreshold``: the output's size plus that of an input spending it
    (148 bytes, or 32 + 4 + 1 + 107 / 4 + 4 = 67 in Core's integer arithmetic for a witness
    program), at the dust relay fee, rounded up as Core's ``CFeeRate::GetFee`` does; 0 for an
    unspendable output. P2PKH 546, P2SH 540, P2WPKH 294, P2TR and P2WSH 330 at 3000 sat/kvB."""
    if script_pubkey[:1] == bytes([OP_RETURN]) or len(script_pubkey) > _MAX_SCRIPT_SIZE:
        return 0
    spend = 32 + 4 + 1 + 107 // WITNESS_SCALE_FACTOR + 4 if witness_program(script_pubkey) else 32 + 4 + 1 + 107 + 4
    return -(-(output_vbytes(script_pubkey) + spend) * dust_relay_fee_sat_per_kvb // 1000)


#: No destination's dust threshold is higher: P2PKH has the longest non-witness address script.
_LARGEST_DESTINATION_DUST = dust_threshold(p2pkh_script(bytes(20)))


@dataclass(frozen=True, slots=True)
class Coin:
    """An unspent output of the wallet being emptied.

    ``value`` in sat; ``spend`` the size of the input spending it (``input_size`` of the
    wallet's descriptor); ``exposure_rank`` the order it should move in, lower first: 0 for a
    key public by the output type itself (exposed at rest: P2PK, P2TR), 1 for a key revealed
    by a spend or a reuse (or an undetermined level, failing closed), 2 for a key not on chain.
    ``path`` and ``index`` are the multipath branch and child index ``Descriptor.expand``
    derives it at, for the caller to sign with."""

    txid: str
    vout: int
    value: int
    script_pubkey: bytes
    spend: InputSize
    exposure_rank: int
    path: int = 0
    index: int = 0

    def __post_init__(self) -> None:
        if len(self.txid) != 64 or any(char not in "0123456789abcdefABCDEF" for char in self.txid):
            raise ValueError(f"txid must be 64 hex digits, got {self.txid!r}")
        if self.vout < 0 or self.value < 0:
            raise ValueError(f"vout and value must not be negative, got {self.vout} and {self.value}")
        if self.exposure_rank not in _EXPOSURE_RANKS:
            raise ValueError(f"exposure_rank must be 0, 1 or 2, got {self.exposure_rank}")

    @property
    def outpoint(self) -> str:
        """The coin as ``txid:vout``."""
        return f"{self.txid}:{self.vout}"


@dataclass(frozen=True, slots=True)
class Destination:
    """A fresh, never used address of the destination wallet and its scriptPubKey.

    ``ValueError`` when the script is no address's (P2PK, bare multisig, OP_RETURN ...)."""

    script_pubkey: bytes
    address: str

    def __post_init__(self) -> None:
        info = classify_script(self.script_pubkey)
        if not info.program or info.output_type is OutputType.NONSTANDARD:
            raise ValueError(f"destination {self.address!r} does not pay an address script")


@dataclass(frozen=True, slots=True)
class Payment:
    """One output of a step: ``value`` sat to ``destination``."""

    destination: Destination
    value: int


@dataclass(frozen=True, slots=True)
class Step:
    """One transaction of the plan: ``order`` (1 first) says when to broadcast it.

    ``weight`` is the signed transaction's worst-case BIP-141 weight; ``fee_sat`` what it pays,
    the inputs' total less the outputs'."""

    order: int
    inputs: tuple[Coin, ...]
    outputs: tuple[Payment, ...]
    weight: int
    fee_sat: int

    @property
    def vsize(self) -> int:
        """The transaction's virtual size in vbytes, rounded up."""
        return virtual_size(self.weight)

    @property
    def in_sat(self) -> int:
        """The value the step spends."""
        return sum(coin.value for coin in self.inputs)

    @property
    def out_sat(self) -> int:
        """The value the step pays to destinations."""
        return sum(payment.value for payment in self.outputs)


@dataclass(frozen=True, slots=True)
class SkippedCoin:
    """A coin the plan leaves where it is, and why (it costs more to move than it holds)."""

    coin: Coin
    reason: str


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    """The steps to broadcast in order, the coins left behind, and the destinations taken from
    the caller's iterator to size an output the plan then did not need (at most one, free to
    use later)."""

    steps: tuple[Step, ...]
    skipped: tuple[SkippedCoin, ...]
    unused_destinations: tuple[Destination, ...]

    @property
    def in_sat(self) -> int:
        """The value the plan moves, fees included."""
        return sum(step.in_sat for step in self.steps)

    @property
    def out_sat(self) -> int:
        """The value the destinations receive."""
        return sum(step.out_sat for step in self.steps)

    @property
    def fee_sat(self) -> int:
        """The fees of all steps."""
        return sum(step.fee_sat for step in self.steps)


class _Destinations:
    """The caller's destinations, drawn one at a time; one drawn but left unused is handed out
    again first. ``ValueError`` when they run out, repeat, or pay a coin being moved."""

    def __init__(self, destinations: Iterable[Destination], coin_scripts: set[bytes]) -> None:
        self._source = iter(destinations)
        self._coin_scripts = coin_scripts
        self._seen: set[bytes] = set()
        self.returned: list[Destination] = []

    def take(self) -> Destination:
        """The next destination to pay."""
        if self.returned:
            return self.returned.pop()
        destination = next(self._source, None)
        if destination is None:
            raise ValueError("the destinations ran out before every coin had one")
        if destination.script_pubkey in self._seen:
            raise ValueError(f"destination {destination.address!r} is given twice: each output needs a new one")
        if destination.script_pubkey in self._coin_scripts:
            raise ValueError(f"destination {destination.address!r} pays a script of the coins being moved")
        self._seen.add(destination.script_pubkey)
        return destination

    def give_back(self, destination: Destination) -> None:
        """Return an unused destination to be taken next."""
        self.returned.append(destination)


def _fee(weight: int, fee_rate: float) -> int:
    return math.ceil(virtual_size(weight) * fee_rate)


def _groups(coins: list[Coin], cap: int, max_inputs: int) -> list[list[Coin]]:
    """Split sorted coins into steps: consecutive coins of one rank, at most ``max_inputs``,
    whose transaction stays within the standard weight.

    The weight is bounded from above as if every input needed the segwit fields and every
    output were as large as an address's can be, with one output per ``cap`` of the coins'
    total (the fee only lowers it). ``ValueError`` for a coin too large for any step."""
    groups: list[list[Coin]] = []
    group: list[Coin] = []
    value = weight = 0
    for coin in coins:
        spend = coin.spend.weight + (0 if coin.spend.witness else 1)  # 1: an empty witness
        if (
            group
            and coin.exposure_rank == group[0].exposure_rank
            and len(group) < max_inputs
            and _weight_bound(len(group) + 1, value + coin.value, weight + spend, cap) <= MAX_STANDARD_TX_WEIGHT
        ):
            group.append(coin)
            value, weight = value + coin.value, weight + spend
            continue
        if _weight_bound(1, coin.value, spend, cap) > MAX_STANDARD_TX_WEIGHT:
            raise ValueError(
                f"coin {coin.outpoint} of {coin.value} sat needs {-(-coin.value // cap)} outputs of at most "
                f"{cap} sat, more than a standard transaction holds: raise max_per_address_sat"
            )
        if group:
            groups.append(group)
        group, value, weight = [coin], coin.value, spend
    if group:
        groups.append(group)
    return groups


def _weight_bound(inputs: int, value: int, inputs_weight: int, cap: int) -> int:
    """The most a step of ``inputs`` inputs weighing ``inputs_weight`` and spending ``value`` can weigh."""
    outputs = max(1, -(-value // cap))
    return overhead_weight(inputs, outputs, segwit=True) + inputs_weight + outputs * _MAX_DESTINATION_OUTPUT_WEIGHT


def _step(coins: list[Coin], order: int, destinations: _Destinations, fee_rate: float, cap: int) -> Step | str:
    """The step spending ``coins``, or why they are skipped (its only output would be dust).

    Outputs are added one at a time, each to the next destination, while the value left after
    the fee is more than ``cap`` per output; the last output takes the rest, or is dropped and
    the rest goes to the fee when it would be dust."""
    total = sum(coin.value for coin in coins)
    no_outputs = transaction_weight([coin.spend for coin in coins], ())

    def weight_with(outputs: list[Destination]) -> int:
        # the outputs' bytes and the growth of their count's CompactSize (1 byte for none)
        size = _varint_size(len(outputs)) - 1 + sum(output_vbytes(d.script_pubkey) for d in outputs)
        return no_outputs + WITNESS_SCALE_FACTOR * size

    chosen = [destinations.take()]
    while total - _fee(weight_with(chosen), fee_rate) > len(chosen) * cap:
        chosen.append(destinations.take())
    weight = weight_with(chosen)
    fee = _fee(weight, fee_rate)
    rest = total - fee - (len(chosen) - 1) * cap
    dust = dust_threshold(chosen[-1].script_pubkey)
    if rest >= dust:
        payments = [Payment(destination, cap) for destination in chosen[:-1]] + [Payment(chosen[-1], rest)]
        return Step(order, tuple(coins), tuple(payments), weight, fee)
    destinations.give_back(chosen.pop())
    if not chosen:
        return (
            f"its step ({len(coins)} coin(s), {total} sat) would keep {total - fee} sat after a {fee} sat fee, "
            f"below the {dust} sat dust threshold"
        )
    payments = [Payment(destination, cap) for destination in chosen]
    return Step(order, tuple(coins), tuple(payments), weight_with(chosen), total - cap * len(chosen))


def plan_migration(
    coins: Iterable[Coin],
    destinations: Iterable[Destination],
    fee_rate_sat_vb: float,
    max_per_address_sat: int,
    *,
    max_inputs_per_step: int = 100,
) -> MigrationPlan:
    """Plan moving ``coins`` to fresh ``destinations``, exposed coins first (see the module's policy).

    ``destinations`` may be a lazy iterator: it is read only as outputs need addresses (one
    more may be read, returned as ``unused_destinations``). ``fee_rate_sat_vb`` is at least 1
    (the default minimum relay fee); ``max_per_address_sat`` at least the largest dust
    threshold of an address (546 sat). ``ValueError`` on those, a repeated coin, destinations
    that run out, repeat or pay a coin being moved, and a coin too large to split into outputs
    of at most the cap within one standard transaction."""
    if not math.isfinite(fee_rate_sat_vb) or fee_rate_sat_vb < 1:
        raise ValueError(f"fee rate must be at least 1 sat/vB, got {fee_rate_sat_vb}")
    if max_per_address_sat < _LARGEST_DESTINATION_DUST:
        raise ValueError(f"max_per_address_sat must be at least {_LARGEST_DESTINATION_DUST}, got {max_per_address_sat}")
    if max_inputs_per_step < 1:
        raise ValueError(f"max_inputs_per_step must be at least 1, got {max_inputs_per_step}")
    ordered = sorted(coins, key=lambda coin: (coin.exposure_rank, -coin.value, coin.txid, coin.vout))
    outpoints = [(coin.txid.lower(), coin.vout) for coin in ordered]
    if len(set(outpoints)) != len(outpoints):
        raise ValueError("a coin is listed twice")
    skipped: list[SkippedCoin] = []
    movable: list[Coin] = []
    for coin in ordered:
        input_fee = math.ceil(coin.spend.vbytes * fee_rate_sat_vb)
        if coin.value <= input_fee:
            reason = f"holds {coin.value} sat, no more than the {input_fee} sat fee of spending it"
            skipped.append(SkippedCoin(coin, reason))
        else:
            movable.append(coin)
    pool = _Destinations(destinations, {coin.script_pubkey for coin in ordered})
    steps: list[Step] = []
    for group in _groups(movable, max_per_address_sat, max_inputs_per_step):
        result = _step(group, len(steps) + 1, pool, fee_rate_sat_vb, max_per_address_sat)
        if isinstance(result, Step):
            steps.append(result)
        else:
            skipped += [SkippedCoin(coin, result) for coin in group]
    return MigrationPlan(tuple(steps), tuple(skipped), tuple(pool.returned))
