"""What spending an output publishes: the public keys and scripts an input reveals.

A spend is what turns a hash-committed output (P2PKH, P2WPKH, P2SH, P2WSH) from
"exposed on spend" into "exposed at rest" for every other output paying the same script
or key. With the spent output's scriptPubKey the spend type is exact; without it (e.g. a
block input whose funding transaction is elsewhere) the type is inferred from the shape of
the scriptSig and witness, and ``inferred`` says so.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType

from chains.bitcoin.script import (
    OutputType,
    classify_script,
    is_pubkey,
    push_items,
    script_keys,
    tapscript_keys,
)
from chains.bitcoin.tx import TxIn

_ANNEX_TAG = 0x50
_TAPROOT_LEAF_MASK = 0xFE
_TAPSCRIPT_LEAF = 0xC0


class SpendType(enum.StrEnum):
    """How an input spends its output."""

    COINBASE = "coinbase"
    P2PK = "p2pk"
    P2MS = "p2ms"
    P2PKH = "p2pkh"
    P2SH = "p2sh"
    P2SH_P2WPKH = "p2sh_p2wpkh"
    P2SH_P2WSH = "p2sh_p2wsh"
    P2WPKH = "p2wpkh"
    P2WSH = "p2wsh"
    P2TR_KEYPATH = "p2tr_keypath"
    P2TR_SCRIPTPATH = "p2tr_scriptpath"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class InputDisclosure:
    """The key material one input publishes.

    ``revealed_keys`` are public keys the spend puts on chain that the spent scriptPubKey did
    not already show: the P2PKH/P2WPKH key, keys in a revealed redeem or witness script, the
    x-only keys of a tapscript leaf and the taproot internal key. P2PK, bare-multisig and
    taproot key-path spends reveal nothing new (their keys are in the output itself).
    ``script`` is the revealed redeem, witness or leaf script, if any. ``inferred`` is True
    when the spend type was read from the input's shape because the prevout was not given.
    """

    spend_type: SpendType
    revealed_keys: tuple[bytes, ...]
    script: bytes | None
    inferred: bool

    @property
    def discloses_key_material(self) -> bool:
        """True when the spend published key material (an unrecognised spend counts: fail closed)."""
        return bool(self.revealed_keys) or self.spend_type is SpendType.UNKNOWN


def _unique(keys: tuple[bytes, ...]) -> tuple[bytes, ...]:
    return tuple(dict.fromkeys(keys))


def _pubkeys(items: tuple[bytes, ...]) -> tuple[bytes, ...]:
    return tuple(item for item in items if is_pubkey(item))


def _taproot_stack(witness: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """The witness stack without its BIP-341 annex."""
    if len(witness) >= 2 and witness[-1][:1] == bytes([_ANNEX_TAG]):
        return witness[:-1]
    return witness


def _is_control_block(item: bytes) -> bool:
    return len(item) >= 33 and (len(item) - 33) % 32 == 0 and len(item) <= 33 + 128 * 32


def _is_signature(item: bytes) -> bool:
    """A DER ECDSA signature with a sighash byte (the shape, not its validity)."""
    return 9 <= len(item) <= 73 and item[0] == 0x30 and item[1] == len(item) - 3


def _taproot_shape(witness: tuple[bytes, ...], *, strict: bool) -> SpendType | None:
    """Key path or script path by the witness shape; None when it is neither.

    ``strict`` (no prevout to go by) also asks for a 64/65-byte signature or the tapscript
    leaf version, so that a P2WSH witness is not taken for a taproot one.
    """
    stack = _taproot_stack(witness)
    if len(stack) == 1 and (not strict or len(stack[0]) in (64, 65)):
        return SpendType.P2TR_KEYPATH
    tapscript = len(stack) >= 2 and _is_control_block(stack[-1])
    if tapscript and (not strict or stack[-1][0] & _TAPROOT_LEAF_MASK == _TAPSCRIPT_LEAF):
        return SpendType.P2TR_SCRIPTPATH
    return None


def _nested_spend(redeem: bytes) -> SpendType:
    """The spend type of a P2SH input given its redeem script (nested segwit or plain P2SH)."""
    return _NESTED.get(classify_script(redeem).output_type, SpendType.P2SH)


_NESTED = MappingProxyType({OutputType.P2WPKH: SpendType.P2SH_P2WPKH, OutputType.P2WSH: SpendType.P2SH_P2WSH})
_BY_OUTPUT = MappingProxyType(
    {
        OutputType.P2PK: SpendType.P2PK,
        OutputType.P2MS: SpendType.P2MS,
        OutputType.P2PKH: SpendType.P2PKH,
        OutputType.P2WPKH: SpendType.P2WPKH,
        OutputType.P2WSH: SpendType.P2WSH,
    }
)


def _spend_type_from_prevout(txin: TxIn, items: tuple[bytes, ...] | None, prevout: bytes) -> SpendType:
    kind = classify_script(prevout).output_type
    if kind is OutputType.P2SH:
        return _nested_spend(items[-1]) if items else SpendType.UNKNOWN
    if kind is OutputType.P2TR:
        return _taproot_shape(txin.witness, strict=False) or SpendType.UNKNOWN
    return _BY_OUTPUT.get(kind, SpendType.UNKNOWN)


def _infer_spend_type(txin: TxIn, items: tuple[bytes, ...] | None) -> SpendType:
    """Guess the spend type from the scriptSig and witness alone (no prevout at hand)."""
    witness = txin.witness
    if items is None or not (items or witness):
        return SpendType.UNKNOWN
    if not items:
        if len(witness) == 2 and is_pubkey(witness[1]):
            return SpendType.P2WPKH
        return _taproot_shape(witness, strict=True) or SpendType.P2WSH
    if len(items) == 1 and witness:
        return _nested_spend(items[0])
    if len(items) == 1 and _is_signature(items[0]):
        return SpendType.P2PK
    if len(items) >= 2 and items[0] == b"" and all(_is_signature(item) for item in items[1:]):
        return SpendType.P2MS
    if len(items) == 2 and is_pubkey(items[1]):
        return SpendType.P2PKH
    return SpendType.P2SH


def _revealed(
    spend_type: SpendType, items: tuple[bytes, ...], witness: tuple[bytes, ...]
) -> tuple[tuple[bytes, ...], bytes | None]:
    """The keys and script a spend of the given type reveals."""
    match spend_type:
        case SpendType.P2PKH:
            return _pubkeys(items), None
        case SpendType.P2WPKH | SpendType.P2SH_P2WPKH:
            return _pubkeys(witness), None
        case SpendType.P2SH if items:
            return _pubkeys(items[:-1]) + script_keys(items[-1]), items[-1]
        case SpendType.P2WSH | SpendType.P2SH_P2WSH if witness:
            return _pubkeys(witness[:-1]) + script_keys(witness[-1]), witness[-1]
        case SpendType.P2TR_SCRIPTPATH:
            stack = _taproot_stack(witness)
            leaf, control = stack[-2], stack[-1]
            return (*tapscript_keys(leaf), control[1:33]), leaf
        case SpendType.UNKNOWN:
            return _pubkeys(items + witness), None
        case _:  # nothing new (P2PK, bare multisig, key path), or a malformed, unconfirmable input
            return (), None


def analyze_input(txin: TxIn, prevout_script: bytes | None = None) -> InputDisclosure:
    """Tell which public keys (and script) an input publishes.

    Pass the spent output's scriptPubKey when known; without it the spend type is inferred.
    """
    if txin.is_coinbase:
        return InputDisclosure(SpendType.COINBASE, (), None, inferred=False)
    items = push_items(txin.script_sig)
    if prevout_script is None:
        spend_type = _infer_spend_type(txin, items)
    else:
        spend_type = _spend_type_from_prevout(txin, items, prevout_script)
    keys, script = _revealed(spend_type, items or (), txin.witness)
    return InputDisclosure(spend_type, _unique(keys), script, inferred=prevout_script is None)
