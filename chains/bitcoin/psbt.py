"""Partially signed Bitcoin transactions, version 0 (BIP-174), with BIP-371's taproot fields (pure: no I/O).

The migration service builds unsigned PSBTs for a hardware wallet to sign; the service never
signs. ``create_psbt`` is BIP-174's Creator, ``with_input``/``with_output`` its Updater, and
``parse_psbt``/``serialize_psbt`` (``decode_psbt``/``encode_psbt`` for base64) read and write
the format.

References:

* BIP-174 "Specification" (v1.4.2): the magic ``psbt`` 0xFF, a global map, then one map per
  input and one per output of the unsigned transaction. A map is key-value pairs, each a
  compact-size length and that many bytes, closed by a 0x00 byte; a key is a compact-size
  key type followed by key data.
* BIP-371 "Specification": the taproot input and output fields.

Interpreted (decoded, checked, and written back from the dataclass fields):

* global: 0x00 unsigned transaction, 0x01 xpub, 0xFB version. Only version 0 is accepted:
  version 2 (BIP-370) has no unsigned transaction and another layout.
* input: 0x00 non-witness UTXO, 0x01 witness UTXO, 0x02 partial signature, 0x03 sighash
  type, 0x04 redeem script, 0x05 witness script, 0x06 BIP-32 derivation, 0x07 final
  scriptSig, 0x08 final scriptWitness, 0x16 taproot BIP-32 derivation, 0x17 taproot internal
  key, 0x18 taproot Merkle root.
* output: 0x00 redeem script, 0x01 witness script, 0x02 BIP-32 derivation, 0x05 taproot
  internal key, 0x07 taproot BIP-32 derivation.

Not interpreted: every other key is kept verbatim in ``unknown`` (full key, key type included,
to value) and written back unchanged. Examples are the hash preimages (input 0x0A-0x0D), the
taproot signatures and leaf scripts (input 0x13-0x15), the taproot tree (output 0x06) and
proprietary keys (0xFC). Signatures are stored as given: they are never checked or made.

Sizes: public keys are SEC-encoded, 33 or 65 bytes; x-only keys, leaf hashes and Merkle roots
are 32 bytes; a key origin is a 4-byte master-key fingerprint then 4 bytes (uint32
little-endian) per derivation step; a global xpub key is the 78-byte BIP-32 serialisation; the
sighash type and the version are uint32 little-endian; a txid is given as 64 hex digits in
display (byte-reversed) order.

``parse_psbt`` is strict and raises ``InvalidPsbt`` with the reason for: a missing magic;
truncated data; non-canonical compact sizes; trailing bytes; a key repeated in a map; a key of
an interpreted type with the wrong key data (key data where there is none, public keys not
33/65 bytes, x-only keys not 32 bytes, xpubs not 78 bytes); a value of the wrong size or form;
a missing unsigned transaction, or one in the witness serialisation or with a scriptSig; a
non-witness UTXO that is not the transaction the input spends, or lacks the output spent; a
version other than 0; a key type BIP-370 reserves for version 2 (global 0x02-0x06, input
0x0E-0x12, output 0x03-0x04). The
Signer's checks, which a valid PSBT may fail (a witness UTXO on a legacy input, scripts that
do not match the spent output), belong to the Updater here (``with_input``). ``parse_psbt``
does not apply them.

Writing: a map's pairs are sorted by key type, then by key data, with two exceptions that
follow how Bitcoin Core keys its maps. Partial signatures are sorted by key id, HASH160 of the
public key (BIP-174's Combiner vector has them in that order, not in public-key order). Global
xpubs are sorted by origin: fingerprint, path length, path. This is the order in which Core
writes the standard fields, except that Core writes proprietary and unknown keys last. Every
PSBT among BIP-174's test vectors re-serialises byte for byte. A map read in another order is
written back in this one, with the same pairs; the order never carries meaning.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, TypeVar

from coincurve import PublicKey as Secp256k1Point

from chains.bitcoin.script import (
    OutputType,
    classify_script,
    is_pubkey,
    p2sh_script,
    taproot_output_key,
    witness_program,
)
from chains.bitcoin.tx import Transaction, TxIn, TxOut, parse_transaction
from chains.errors import MalformedChainData
from pqc.ecdsa_messages import compact_size
from pqc.hashes import hash160, sha256, sha256d

#: BIP-174 "magic bytes": ``psbt`` followed by the 0xFF separator.
MAGIC = b"psbt\xff"

_SEPARATOR = b"\x00"
_FINGERPRINT_SIZE = 4
_HASH_SIZE = 32  # x-only keys, leaf hashes, Merkle roots, txids
_XPUB_SIZE = 78
#: BIP-144: the marker and flag that follow the version in the witness serialisation.
_SEGWIT_MARKER_FLAG = b"\x00\x01"
#: BIP-371 PSBT_OUT_TAP_TREE, kept in ``unknown``: with it, an output's Merkle root is unknown here.
_OUT_TAP_TREE = b"\x06"
#: A compact size's first byte -> (width of the number that follows, smallest value that needs it).
_COMPACT_WIDTH = MappingProxyType({0xFD: (2, 0xFD), 0xFE: (4, 0x1_0000), 0xFF: (8, 0x1_0000_0000)})


class InvalidPsbt(ValueError):
    """The bytes or fields do not form a valid version-0 PSBT. The message says why, and in which map."""


@dataclass(frozen=True, slots=True)
class KeyOrigin:
    """Where a key comes from (BIP-174's BIP-32 derivation value). ``fingerprint`` is the 4-byte
    fingerprint of the master key. ``path`` lists the uint32 child numbers from it; hardened steps
    have ``bip32.HARDENED`` added. Serialised as 4 + 4·len(path) bytes."""

    fingerprint: bytes
    path: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.fingerprint) != _FINGERPRINT_SIZE:
            raise InvalidPsbt(f"a key fingerprint is 4 bytes, got {len(self.fingerprint)}")
        for step in self.path:
            _check_uint(step, 4, "a derivation step")


@dataclass(frozen=True, slots=True)
class TapKeyOrigin:
    """BIP-371's taproot BIP-32 derivation value. ``leaf_hashes`` holds the 32-byte hashes of the
    script leaves that use the key; it is empty for a key used only on the key path. ``origin`` is
    where the key comes from."""

    leaf_hashes: tuple[bytes, ...]
    origin: KeyOrigin

    def __post_init__(self) -> None:
        if any(len(leaf) != _HASH_SIZE for leaf in self.leaf_hashes):
            raise InvalidPsbt("a taproot leaf hash is 32 bytes")


@dataclass(frozen=True, slots=True)
class PsbtInput:
    """One input map.

    ``non_witness_utxo`` is the whole previous transaction (raw, either serialisation), and
    ``witness_utxo`` is only the output spent. Partial signatures and BIP-32 derivations are keyed
    by SEC public key (33 or 65 bytes), taproot derivations by x-only key (32 bytes).
    ``final_script_witness`` is the serialised witness stack: the item count, then each item with
    its length. ``unknown`` maps each uninterpreted full key (key type included) to its value.
    """

    non_witness_utxo: bytes | None = None
    witness_utxo: TxOut | None = None
    partial_sigs: dict[bytes, bytes] = field(default_factory=dict)
    sighash_type: int | None = None
    redeem_script: bytes | None = None
    witness_script: bytes | None = None
    bip32_derivations: dict[bytes, KeyOrigin] = field(default_factory=dict)
    final_script_sig: bytes | None = None
    final_script_witness: bytes | None = None
    tap_bip32_derivations: dict[bytes, TapKeyOrigin] = field(default_factory=dict)
    tap_internal_key: bytes | None = None
    tap_merkle_root: bytes | None = None
    unknown: dict[bytes, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.witness_utxo is not None:
            _check_uint(self.witness_utxo.value, 8, "a witness UTXO amount")
        if self.sighash_type is not None:
            _check_uint(self.sighash_type, 4, "a sighash type")
        for key in (*self.partial_sigs, *self.bip32_derivations):
            _check_pubkey(key)
        for key in self.tap_bip32_derivations:
            _check_xonly(key, "a taproot derivation key")
        if self.tap_internal_key is not None:
            _check_xonly(self.tap_internal_key, "the taproot internal key")
        if self.tap_merkle_root is not None and len(self.tap_merkle_root) != _HASH_SIZE:
            raise InvalidPsbt(f"the taproot Merkle root is 32 bytes, got {len(self.tap_merkle_root)}")
        if self.final_script_witness is not None:
            _check_witness_stack(self.final_script_witness)
        _check_unknown(self.unknown, _INPUT)


@dataclass(frozen=True, slots=True)
class PsbtOutput:
    """One output map. The scripts and key origins let a signer recognise its change. Keys are as
    in ``PsbtInput``, and so is ``unknown``."""

    redeem_script: bytes | None = None
    witness_script: bytes | None = None
    bip32_derivations: dict[bytes, KeyOrigin] = field(default_factory=dict)
    tap_internal_key: bytes | None = None
    tap_bip32_derivations: dict[bytes, TapKeyOrigin] = field(default_factory=dict)
    unknown: dict[bytes, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in self.bip32_derivations:
            _check_pubkey(key)
        for key in self.tap_bip32_derivations:
            _check_xonly(key, "a taproot derivation key")
        if self.tap_internal_key is not None:
            _check_xonly(self.tap_internal_key, "the taproot internal key")
        _check_unknown(self.unknown, _OUTPUT)


@dataclass(frozen=True, slots=True)
class Psbt:
    """A version-0 PSBT.

    ``unsigned_tx`` is the raw unsigned transaction in the non-witness serialisation, with every
    scriptSig empty; ``transaction`` is its parse. ``xpubs`` maps a 78-byte BIP-32 serialisation
    to its origin. ``version`` is the explicit PSBT_GLOBAL_VERSION: ``None`` when absent, else 0.
    There is one input map and one output map per transaction input and output. ``unknown`` holds
    the uninterpreted global keys. Construction checks all of this, so a ``Psbt`` always
    serialises to a valid PSBT. Treat the dicts as read-only: change a PSBT with ``with_input``,
    ``with_output`` or ``dataclasses.replace``, which run the checks again.
    """

    unsigned_tx: bytes
    inputs: tuple[PsbtInput, ...]
    outputs: tuple[PsbtOutput, ...]
    xpubs: dict[bytes, KeyOrigin] = field(default_factory=dict)
    version: int | None = None
    unknown: dict[bytes, bytes] = field(default_factory=dict)
    transaction: Transaction = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_version(self.version)
        tx = _read_unsigned_tx(self.unsigned_tx)
        object.__setattr__(self, "transaction", tx)
        if len(self.inputs) != len(tx.inputs) or len(self.outputs) != len(tx.outputs):
            raise InvalidPsbt(
                f"{len(self.inputs)} input and {len(self.outputs)} output maps for a transaction "
                f"with {len(tx.inputs)} inputs and {len(tx.outputs)} outputs"
            )
        for xpub in self.xpubs:
            if len(xpub) != _XPUB_SIZE:
                raise InvalidPsbt(f"a global xpub is the 78-byte BIP-32 serialisation, got {len(xpub)} bytes")
        _check_unknown(self.unknown, _GLOBAL)
        for index, (txin, psbt_input) in enumerate(zip(tx.inputs, self.inputs, strict=True)):
            if psbt_input.non_witness_utxo is not None:
                _spent_output(psbt_input.non_witness_utxo, txin, f"input {index}")


# --- byte-level reading and writing -----------------------------------------------------------


class _Reader:
    """A cursor over bytes. It raises ``InvalidPsbt`` on a short read or a non-canonical compact size."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str, pos: int = 0) -> None:
        self.data = data
        self.what = what
        self.pos = pos

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            left = len(self.data) - self.pos
            raise InvalidPsbt(f"{self.what} truncated: {size} bytes needed at byte {self.pos}, {left} left")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "little")

    def compact_size(self) -> int:
        first = self.uint(1)
        if first not in _COMPACT_WIDTH:
            return first
        width, smallest = _COMPACT_WIDTH[first]
        value = self.uint(width)
        if value < smallest:
            raise InvalidPsbt(f"{self.what}: non-canonical compact size {value} at byte {self.pos - width - 1}")
        return value

    def var_bytes(self) -> bytes:
        return self.take(self.compact_size())

    def finish(self) -> None:
        if self.pos != len(self.data):
            raise InvalidPsbt(f"{len(self.data) - self.pos} trailing bytes after the {self.what}")


def _var_bytes(data: bytes) -> bytes:
    return compact_size(len(data)) + data


def _check_uint(value: int, size: int, what: str) -> None:
    if not 0 <= value < 1 << (8 * size):
        raise InvalidPsbt(f"{what} must be an unsigned {8 * size}-bit integer, got {value}")


def _uint_bytes(value: int, size: int, what: str) -> bytes:
    _check_uint(value, size, what)
    return value.to_bytes(size, "little")


# --- field checks ----------------------------------------------------------------------------


def _is_point(sec: bytes) -> bool:
    try:
        Secp256k1Point(sec)
    except ValueError:
        return False
    return True


def _check_pubkey(key: bytes) -> None:
    if not (is_pubkey(key) and _is_point(key)):
        raise InvalidPsbt(f"{key.hex()} ({len(key)} bytes) is not a SEC public key of 33 or 65 bytes")


def _check_xonly(key: bytes, what: str) -> None:
    if len(key) != _HASH_SIZE or not _is_point(b"\x02" + key):
        raise InvalidPsbt(f"{what} is not an x-only public key of 32 bytes: {key.hex()} ({len(key)} bytes)")


def _check_witness_stack(raw: bytes) -> None:
    r = _Reader(raw, "final scriptWitness")
    for _ in range(r.compact_size()):
        r.var_bytes()
    r.finish()


def _check_version(version: int | None) -> None:
    if version is not None and version != 0:
        raise InvalidPsbt(f"PSBT version {version} is not supported: only version 0 (BIP-174) is read")


def _split_key(key: bytes) -> tuple[int, bytes]:
    """A key's compact-size key type and the key data after it."""
    r = _Reader(key, "key type")
    key_type = r.compact_size()
    return key_type, key[r.pos :]


def _check_unknown(unknown: Mapping[bytes, bytes], kind: _MapKind) -> None:
    for key in unknown:
        key_type = _split_key(key)[0]
        if key_type in kind.v2_only:
            raise InvalidPsbt(f"key type 0x{key_type:02x} is for PSBT version 2 only (BIP-370)")
        if key_type in kind.fields:
            raise InvalidPsbt(f"unknown key {key.hex()} has an interpreted key type: set its field instead")


def _spent_output(non_witness_utxo: bytes, txin: TxIn, where: str) -> TxOut:
    """The output ``txin`` spends, from the previous transaction given as non-witness UTXO."""
    try:
        previous = parse_transaction(non_witness_utxo)
    except MalformedChainData as exc:
        raise InvalidPsbt(f"{where}: the non-witness UTXO is not a transaction: {exc}") from None
    if previous.txid != txin.prev_txid:
        raise InvalidPsbt(
            f"{where}: the non-witness UTXO is transaction {previous.txid}, the input spends {txin.prev_txid}"
        )
    if txin.vout >= len(previous.outputs):
        raise InvalidPsbt(f"{where}: the non-witness UTXO has no output {txin.vout}")
    return previous.outputs[txin.vout]


# --- the unsigned transaction ----------------------------------------------------------------


def _read_txin(r: _Reader) -> TxIn:
    prev_txid = r.take(_HASH_SIZE)[::-1].hex()
    vout = r.uint(4)
    script_sig = r.var_bytes()
    return TxIn(prev_txid, vout, script_sig, r.uint(4), ())


def _display_hash(data: bytes) -> str:
    return sha256d(data)[::-1].hex()


def _read_tx(raw: bytes, *, witness: bool) -> Transaction:
    """A transaction in the serialisation asked for: the non-witness one, or with ``witness``
    BIP-144's (marker 0x00, flag 0x01, then one witness stack per input, which may be empty).
    ``tx.parse_transaction`` picks the serialisation by the marker instead, but a zero-input
    transaction with one output starts like a marker and flag too."""
    r = _Reader(raw, "unsigned transaction")
    version = r.uint(4)
    if witness and r.take(2) != _SEGWIT_MARKER_FLAG:
        raise InvalidPsbt("no segwit marker and flag")
    body_start = r.pos
    inputs = tuple(_read_txin(r) for _ in range(r.compact_size()))
    outputs = tuple(TxOut(r.uint(8), r.var_bytes()) for _ in range(r.compact_size()))
    body_end = r.pos
    if witness:
        stacks = [tuple(r.var_bytes() for _ in range(r.compact_size())) for _ in inputs]
        inputs = tuple(replace(txin, witness=stack) for txin, stack in zip(inputs, stacks, strict=True))
    locktime = r.uint(4)
    r.finish()
    txid = _display_hash(raw[:4] + raw[body_start:body_end] + raw[-4:])
    return Transaction(version, inputs, outputs, locktime, txid, _display_hash(raw))


def _is_witness_serialised(raw: bytes) -> bool:
    try:
        _read_tx(raw, witness=True)
    except InvalidPsbt:
        return False
    return True


def _read_unsigned_tx(raw: bytes) -> Transaction:
    """The unsigned transaction as BIP-174 requires it: the non-witness serialisation, every scriptSig empty."""
    try:
        tx = _read_tx(raw, witness=False)
    except InvalidPsbt:
        if _is_witness_serialised(raw):
            raise InvalidPsbt(
                "the unsigned transaction is in the witness serialisation, not the non-witness one"
            ) from None
        raise
    for index, txin in enumerate(tx.inputs):
        if txin.script_sig:
            raise InvalidPsbt(f"input {index} of the unsigned transaction has a scriptSig: it must be empty")
    return tx


# --- value codecs and the key type tables ----------------------------------------------------


def _decode_uint32(value: bytes) -> int:
    if len(value) != 4:
        raise InvalidPsbt(f"the value is a 4-byte integer, got {len(value)} bytes")
    return int.from_bytes(value, "little")


def _encode_uint32(value: int) -> bytes:
    return value.to_bytes(4, "little")


def _decode_txout(value: bytes) -> TxOut:
    r = _Reader(value, "witness UTXO")
    txout = TxOut(r.uint(8), r.var_bytes())
    r.finish()
    return txout


def _encode_txout(txout: TxOut) -> bytes:
    return txout.value.to_bytes(8, "little") + _var_bytes(txout.script_pubkey)


def _decode_origin(value: bytes) -> KeyOrigin:
    if len(value) < _FINGERPRINT_SIZE or len(value) % 4:
        raise InvalidPsbt(f"a key origin is a 4-byte fingerprint and 4 bytes per step, got {len(value)} bytes")
    path = tuple(int.from_bytes(value[i : i + 4], "little") for i in range(_FINGERPRINT_SIZE, len(value), 4))
    return KeyOrigin(value[:_FINGERPRINT_SIZE], path)


def _encode_origin(origin: KeyOrigin) -> bytes:
    return origin.fingerprint + b"".join(step.to_bytes(4, "little") for step in origin.path)


def _decode_tap_origin(value: bytes) -> TapKeyOrigin:
    r = _Reader(value, "taproot key origin")
    leaf_hashes = tuple(r.take(_HASH_SIZE) for _ in range(r.compact_size()))
    return TapKeyOrigin(leaf_hashes, _decode_origin(value[r.pos :]))


def _encode_tap_origin(tap_origin: TapKeyOrigin) -> bytes:
    leaves = compact_size(len(tap_origin.leaf_hashes)) + b"".join(tap_origin.leaf_hashes)
    return leaves + _encode_origin(tap_origin.origin)


@dataclass(frozen=True, slots=True)
class _Field:
    """One interpreted key type of a map. ``name`` is the dataclass field it fills. ``keyed`` is
    True when the key carries data: a public key or an xpub, one dict entry per key. Otherwise the
    key is the key type alone. ``decode`` and ``encode`` are the value codec. ``order`` is the
    sort key of a keyed entry (key data, value) within its type; by default the key data."""

    name: str
    keyed: bool
    decode: Callable[[bytes], Any]
    encode: Callable[[Any], bytes]
    order: Callable[[bytes, Any], Any] | None = None


@dataclass(frozen=True, slots=True)
class _MapKind:
    """The key types of one kind of map: those interpreted, by key type, and those BIP-370 defines
    for PSBT version 2 only, which a version-0 map must not hold."""

    fields: Mapping[int, _Field]
    v2_only: frozenset[int]


def _partial_sig_order(pubkey: bytes, _signature: bytes) -> bytes:
    """Core keys partial signatures by key id (``std::map<CKeyID, SigPair>``): HASH160 of the public key."""
    return hash160(pubkey)


def _xpub_order(xpub: bytes, origin: KeyOrigin) -> tuple[bytes, int, tuple[int, ...], bytes]:
    """Core keys global xpubs by origin (``std::map<KeyOriginInfo, …>``): fingerprint, path length, path."""
    return origin.fingerprint, len(origin.path), origin.path, xpub


def _raw(name: str) -> _Field:
    return _Field(name, False, bytes, bytes)


_GLOBAL = _MapKind(
    MappingProxyType(
        {
            0x00: _raw("unsigned_tx"),
            0x01: _Field("xpubs", True, _decode_origin, _encode_origin, _xpub_order),
            0xFB: _Field("version", False, _decode_uint32, _encode_uint32),
        }
    ),
    frozenset(range(0x02, 0x07)),  # tx version, fallback locktime, input/output counts, modifiable
)
_INPUT = _MapKind(
    MappingProxyType(
        {
            0x00: _raw("non_witness_utxo"),
            0x01: _Field("witness_utxo", False, _decode_txout, _encode_txout),
            0x02: _Field("partial_sigs", True, bytes, bytes, _partial_sig_order),
            0x03: _Field("sighash_type", False, _decode_uint32, _encode_uint32),
            0x04: _raw("redeem_script"),
            0x05: _raw("witness_script"),
            0x06: _Field("bip32_derivations", True, _decode_origin, _encode_origin),
            0x07: _raw("final_script_sig"),
            0x08: _raw("final_script_witness"),
            0x16: _Field("tap_bip32_derivations", True, _decode_tap_origin, _encode_tap_origin),
            0x17: _raw("tap_internal_key"),
            0x18: _raw("tap_merkle_root"),
        }
    ),
    frozenset(range(0x0E, 0x13)),  # previous txid, output index, sequence, required locktimes
)
_OUTPUT = _MapKind(
    MappingProxyType(
        {
            0x00: _raw("redeem_script"),
            0x01: _raw("witness_script"),
            0x02: _Field("bip32_derivations", True, _decode_origin, _encode_origin),
            0x05: _raw("tap_internal_key"),
            0x07: _Field("tap_bip32_derivations", True, _decode_tap_origin, _encode_tap_origin),
        }
    ),
    frozenset((0x03, 0x04)),  # amount, script
)


# --- maps ------------------------------------------------------------------------------------


def _read_map(r: _Reader, where: str) -> dict[bytes, bytes]:
    """The key-value pairs of one map, in the order read, up to its 0x00 separator."""
    pairs: dict[bytes, bytes] = {}
    try:
        while key := r.var_bytes():
            if key in pairs:
                raise InvalidPsbt(f"key {key.hex()} appears twice")
            pairs[key] = r.var_bytes()
    except InvalidPsbt as exc:
        raise InvalidPsbt(f"{where}: {exc}") from None
    return pairs


def _decode_map(pairs: Mapping[bytes, bytes], kind: _MapKind, where: str) -> dict[str, Any]:
    """The dataclass keyword arguments of one map's pairs."""
    unknown: dict[bytes, bytes] = {}
    kwargs: dict[str, Any] = {"unknown": unknown}
    try:
        for key, value in pairs.items():
            key_type, key_data = _split_key(key)
            spec = kind.fields.get(key_type)
            if spec is None:
                unknown[key] = value
                continue
            if not spec.keyed and key_data:
                raise InvalidPsbt(f"key type 0x{key_type:02x} takes no key data, got {len(key_data)} bytes")
            try:
                decoded = spec.decode(value)
            except InvalidPsbt as exc:
                raise InvalidPsbt(f"key type 0x{key_type:02x}: {exc}") from None
            if spec.keyed:
                kwargs.setdefault(spec.name, {})[key_data] = decoded
            else:
                kwargs[spec.name] = decoded
    except InvalidPsbt as exc:
        raise InvalidPsbt(f"{where}: {exc}") from None
    return kwargs


_Scope = TypeVar("_Scope", PsbtInput, PsbtOutput)


def _read_scope(r: _Reader, scope: type[_Scope], kind: _MapKind, where: str) -> _Scope:
    kwargs = _decode_map(_read_map(r, where), kind, where)
    try:
        return scope(**kwargs)
    except InvalidPsbt as exc:
        raise InvalidPsbt(f"{where}: {exc}") from None


def _encode_map(scope: Psbt | PsbtInput | PsbtOutput, kind: _MapKind) -> bytes:
    """One map, then the separator. Pairs are sorted by key type, then by key data, or by the
    type's ``order`` when it has one."""
    entries: list[tuple[tuple[bytes, Any], bytes, bytes]] = []  # (sort key, key, value)
    for key, value in scope.unknown.items():
        key_data = _split_key(key)[1]
        entries.append(((key[: len(key) - len(key_data)], key_data), key, value))
    for key_type, spec in kind.fields.items():
        prefix = compact_size(key_type)
        value = getattr(scope, spec.name)
        if spec.keyed:
            for key_data, item in value.items():
                rank = key_data if spec.order is None else spec.order(key_data, item)
                entries.append(((prefix, rank), prefix + key_data, spec.encode(item)))
        elif value is not None:
            entries.append(((prefix, b""), prefix, spec.encode(value)))
    entries.sort(key=lambda entry: entry[0])
    return b"".join(_var_bytes(key) + _var_bytes(value) for _, key, value in entries) + _SEPARATOR


# --- public API --------------------------------------------------------------------------------


def parse_psbt(data: bytes) -> Psbt:
    """Parse a binary PSBT strictly. Every problem listed in the module docstring raises
    ``InvalidPsbt``, never another error, so untrusted input can be read safely."""
    raw = bytes(data)
    if not raw.startswith(MAGIC):
        raise InvalidPsbt("not a PSBT: it does not start with the magic bytes 70736274ff")
    r = _Reader(raw, "PSBT", len(MAGIC))
    global_fields = _decode_map(_read_map(r, "global map"), _GLOBAL, "global map")
    _check_version(global_fields.get("version"))
    if "unsigned_tx" not in global_fields:
        raise InvalidPsbt("the global map has no unsigned transaction (key type 0x00)")
    tx = _read_unsigned_tx(global_fields["unsigned_tx"])
    inputs = tuple(_read_scope(r, PsbtInput, _INPUT, f"input {i}") for i in range(len(tx.inputs)))
    outputs = tuple(_read_scope(r, PsbtOutput, _OUTPUT, f"output {i}") for i in range(len(tx.outputs)))
    r.finish()
    return Psbt(inputs=inputs, outputs=outputs, **global_fields)


def decode_psbt(text: str) -> Psbt:
    """Parse a base64 PSBT, the form wallets exchange as text. Surrounding whitespace is ignored.
    Anything that is not strict base64 raises ``InvalidPsbt``."""
    try:
        data = base64.b64decode(text.strip(), validate=True)
    except ValueError as exc:  # binascii.Error, or non-ASCII text
        raise InvalidPsbt(f"not base64: {exc}") from None
    return parse_psbt(data)


def serialize_psbt(psbt: Psbt) -> bytes:
    """The binary PSBT: magic, global map, input maps, output maps, each in the key order the
    module docstring gives (Bitcoin Core's for the fields it writes)."""
    maps = [_encode_map(psbt, _GLOBAL)]
    maps += [_encode_map(psbt_input, _INPUT) for psbt_input in psbt.inputs]
    maps += [_encode_map(psbt_output, _OUTPUT) for psbt_output in psbt.outputs]
    return MAGIC + b"".join(maps)


def encode_psbt(psbt: Psbt) -> str:
    """The base64 PSBT, the form a hardware wallet or its companion app imports."""
    return base64.b64encode(serialize_psbt(psbt)).decode("ascii")


def _txid_bytes(txid: str, where: str) -> bytes:
    try:
        prev = bytes.fromhex(txid)
    except ValueError:
        prev = b""
    if len(prev) != _HASH_SIZE:
        raise InvalidPsbt(f"{where}: a txid is 64 hex digits, got {txid!r}")
    return prev[::-1]


def create_psbt(
    inputs: Sequence[tuple[str, int, int]],
    outputs: Sequence[TxOut],
    *,
    version: int = 2,
    locktime: int = 0,
) -> Psbt:
    """BIP-174's Creator: a PSBT with empty maps around a new unsigned transaction.

    Each input is ``(txid, vout, sequence)``, with the txid as 64 hex digits in display order.
    ``version`` is the transaction version, not the PSBT version. The PSBT's inputs carry no
    UTXO yet: add them with ``with_input``.
    """
    parts = [_uint_bytes(version, 4, "the transaction version"), compact_size(len(inputs))]
    for index, (txid, vout, sequence) in enumerate(inputs):
        where = f"input {index}"
        parts += [_txid_bytes(txid, where), _uint_bytes(vout, 4, f"{where}: vout"), _var_bytes(b"")]  # empty scriptSig
        parts.append(_uint_bytes(sequence, 4, f"{where}: sequence"))
    parts.append(compact_size(len(outputs)))
    for index, txout in enumerate(outputs):
        parts += [_uint_bytes(txout.value, 8, f"output {index}: amount"), _var_bytes(txout.script_pubkey)]
    parts.append(_uint_bytes(locktime, 4, "the locktime"))
    return Psbt(b"".join(parts), tuple(PsbtInput() for _ in inputs), tuple(PsbtOutput() for _ in outputs))


def _check_index(index: int, count: int, what: str) -> None:
    if not 0 <= index < count:
        raise IndexError(f"no {what} {index}: the transaction has {count}")


def _inner_script(
    script_pubkey: bytes, redeem_script: bytes | None, witness_script: bytes | None, where: str
) -> bytes | None:
    """The script that may be a witness program: the redeem script of a P2SH output, else the
    scriptPubKey. It is ``None`` when the output is P2SH and its redeem script is not given yet.
    Raises ``InvalidPsbt`` when a given redeem or witness script does not hash to the output."""
    if redeem_script is not None:
        if script_pubkey != p2sh_script(hash160(redeem_script)):
            raise InvalidPsbt(f"{where}: the redeem script does not hash to the P2SH scriptPubKey")
        script = redeem_script
    elif classify_script(script_pubkey).output_type is OutputType.P2SH:
        if witness_script is not None:
            raise InvalidPsbt(f"{where}: a witness script inside P2SH needs its redeem script")
        return None
    else:
        script = script_pubkey
    if witness_script is not None and witness_program(script) != (0, sha256(witness_script)):
        raise InvalidPsbt(f"{where}: the witness script does not hash to the P2WSH program")
    return script


def _check_spend(psbt_input: PsbtInput, txin: TxIn, where: str) -> None:
    """The Updater's checks of one input against what it spends. They are the checks a signer
    makes: it refuses a PSBT that fails them."""
    spent = psbt_input.witness_utxo
    if psbt_input.non_witness_utxo is not None:
        output = _spent_output(psbt_input.non_witness_utxo, txin, where)
        if spent is not None and spent != output:
            raise InvalidPsbt(f"{where}: the witness UTXO is not output {txin.vout} of the non-witness UTXO")
        spent = output
    if spent is None:  # nothing to check the scripts against yet
        return
    script = _inner_script(spent.script_pubkey, psbt_input.redeem_script, psbt_input.witness_script, where)
    if script is None:
        return
    program = witness_program(script)
    if program is None and psbt_input.witness_utxo is not None:
        raise InvalidPsbt(f"{where}: a witness UTXO on a non-segwit input; give the non-witness UTXO")
    if program is not None and psbt_input.witness_utxo is None:
        raise InvalidPsbt(f"{where}: a segwit input needs its witness UTXO")
    if psbt_input.tap_internal_key is not None:
        output_key = taproot_output_key(psbt_input.tap_internal_key, psbt_input.tap_merkle_root or b"")
        if program != (1, output_key):
            raise InvalidPsbt(f"{where}: the taproot internal key and Merkle root do not give the spent output key")


def with_input(psbt: Psbt, index: int, **changes: Any) -> Psbt:
    """BIP-174's Updater for one input. Returns a copy of ``psbt`` in which input ``index`` has
    ``changes`` (``PsbtInput`` field names) applied.

    The result is checked against the output spent, as far as the UTXOs given so far allow:
    * the non-witness UTXO must be the previous transaction;
    * the witness UTXO must be the spent output;
    * the redeem and witness scripts must hash to it;
    * a segwit spend must have its witness UTXO, and a legacy spend must not have one;
    * a taproot internal key (with its Merkle root) must give the P2TR output key.
    Any failure raises ``InvalidPsbt``.
    """
    _check_index(index, len(psbt.inputs), "input")
    updated = replace(psbt.inputs[index], **changes)
    result = replace(psbt, inputs=(*psbt.inputs[:index], updated, *psbt.inputs[index + 1 :]))
    _check_spend(updated, result.transaction.inputs[index], f"input {index}")
    return result


def with_output(psbt: Psbt, index: int, **changes: Any) -> Psbt:
    """BIP-174's Updater for one output. Returns a copy of ``psbt`` in which output ``index`` has
    ``changes`` (``PsbtOutput`` field names) applied.

    The redeem and witness scripts must hash to the output's scriptPubKey. A taproot internal key
    must give the P2TR output key; this is checked only without a script tree, which is kept
    uninterpreted in ``unknown``. Any failure raises ``InvalidPsbt``.
    """
    _check_index(index, len(psbt.outputs), "output")
    updated = replace(psbt.outputs[index], **changes)
    result = replace(psbt, outputs=(*psbt.outputs[:index], updated, *psbt.outputs[index + 1 :]))
    where = f"output {index}"
    script_pubkey = result.transaction.outputs[index].script_pubkey
    script = _inner_script(script_pubkey, updated.redeem_script, updated.witness_script, where)
    if updated.tap_internal_key is not None and _OUT_TAP_TREE not in updated.unknown:
        program = None if script is None else witness_program(script)
        if program != (1, taproot_output_key(updated.tap_internal_key)):
            raise InvalidPsbt(f"{where}: the taproot internal key does not give the output key")
    return result
