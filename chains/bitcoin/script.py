"""Bitcoin scripts: tokenising, output-type classification and the standard output templates.

Classification follows Bitcoin Core's ``Solver`` templates (P2PK, bare multisig, P2PKH,
P2SH, witness programs, OP_RETURN), plus P2MR (BIP 360: witness v2, 32-byte program) as the
draft exposure BIP's vectors name it. It needs no chain state.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from coincurve import PublicKey as Secp256k1Point

from chains.errors import MalformedChainData
from pqc.hashes import hash160

OP_0 = 0x00
OP_PUSHDATA1 = 0x4C
OP_PUSHDATA2 = 0x4D
OP_PUSHDATA4 = 0x4E
OP_1NEGATE = 0x4F
OP_1 = 0x51
OP_16 = 0x60
OP_RETURN = 0x6A
OP_DUP = 0x76
OP_EQUAL = 0x87
OP_EQUALVERIFY = 0x88
OP_HASH160 = 0xA9
OP_CHECKSIG = 0xAC
OP_CHECKSIGVERIFY = 0xAD
OP_CHECKMULTISIG = 0xAE
OP_CHECKSIGADD = 0xBA

#: The order of the secp256k1 group (SEC 2), the bound of a valid taproot tweak.
_SECP256K1_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_TAPSCRIPT_KEY_OPS = frozenset((OP_CHECKSIG, OP_CHECKSIGVERIFY, OP_CHECKSIGADD))
_PUSHDATA_WIDTH = MappingProxyType({OP_PUSHDATA1: 1, OP_PUSHDATA2: 2, OP_PUSHDATA4: 4})
_P2PKH_HEAD, _P2PKH_TAIL = bytes((OP_DUP, OP_HASH160, 20)), bytes((OP_EQUALVERIFY, OP_CHECKSIG))
_P2SH_HEAD, _P2SH_TAIL = bytes((OP_HASH160, 20)), bytes((OP_EQUAL,))


class OutputType(enum.StrEnum):
    """What kind of output a scriptPubKey is (the ``address_type`` of Bitcoin addresses)."""

    P2PK = "p2pk"
    P2MS = "p2ms"  # bare multisig
    P2PKH = "p2pkh"
    P2SH = "p2sh"
    P2WPKH = "p2wpkh"
    P2WSH = "p2wsh"
    P2TR = "p2tr"
    P2MR = "p2mr"  # BIP 360 pay-to-Merkle-root, witness v2 with a 32-byte program
    OP_RETURN = "op_return"  # null data: provably unspendable
    WITNESS_UNKNOWN = "witness_unknown"  # witness version/length with no assigned meaning
    NONSTANDARD = "nonstandard"


@dataclass(frozen=True, slots=True)
class ScriptInfo:
    """A classified scriptPubKey.

    ``program`` is what an address of the output encodes (the key or script hash, or the
    witness program) and is empty for types that have no address. ``keys`` are the public
    keys the script itself shows (P2PK, bare multisig, the P2TR output key).
    """

    output_type: OutputType
    program: bytes = b""
    keys: tuple[bytes, ...] = ()
    witness_version: int | None = None


def iter_script(script: bytes) -> Iterator[tuple[int, bytes | None]]:
    """Yield ``(opcode, pushed data or None)``; raise ``MalformedChainData`` on a truncated push."""
    pos, end = 0, len(script)
    while pos < end:
        op = script[pos]
        pos += 1
        if op > OP_PUSHDATA4 or op == OP_0:
            yield op, (b"" if op == OP_0 else None)
            continue
        if op < OP_PUSHDATA1:
            size = op
        else:
            width = _PUSHDATA_WIDTH[op]
            if pos + width > end:
                raise MalformedChainData("script ends inside a push-length field")
            size = int.from_bytes(script[pos : pos + width], "little")
            pos += width
        if pos + size > end:
            raise MalformedChainData(f"script push of {size} bytes runs past the end of the script")
        yield op, script[pos : pos + size]
        pos += size


def push_items(script: bytes) -> tuple[bytes, ...] | None:
    """The data items of a push-only script (a scriptSig), or None when it holds other opcodes.

    OP_1..OP_16 and OP_1NEGATE count as pushes of their small number, as in Core's ``IsPushOnly``.
    """
    items = []
    try:
        for op, data in iter_script(script):
            if data is not None:
                items.append(data)
            elif op == OP_1NEGATE or OP_1 <= op <= OP_16:
                items.append(bytes([0x81 if op == OP_1NEGATE else op - OP_1 + 1]))
            else:
                return None
    except MalformedChainData:
        return None
    return tuple(items)


def is_pubkey(data: bytes) -> bool:
    """True when ``data`` has the size and prefix of a SEC1 secp256k1 public key (as Core's ``ValidSize``)."""
    if len(data) == 33:
        return data[0] in (2, 3)
    return len(data) == 65 and data[0] in (4, 6, 7)


def script_keys(script: bytes) -> tuple[bytes, ...]:
    """Public keys pushed by a legacy or segwit-v0 script (redeem or witness script)."""
    try:
        return tuple(data for _, data in iter_script(script) if data is not None and is_pubkey(data))
    except MalformedChainData:
        return ()


def tapscript_keys(script: bytes) -> tuple[bytes, ...]:
    """x-only keys of a tapscript leaf: 32-byte pushes consumed by a signature-checking opcode."""
    try:
        ops = list(iter_script(script))
    except MalformedChainData:
        return ()
    return tuple(
        data
        for (_, data), (next_op, _) in itertools.pairwise(ops)
        if data is not None and len(data) == 32 and next_op in _TAPSCRIPT_KEY_OPS
    )


def _small_int(op: int) -> int | None:
    return op - OP_1 + 1 if OP_1 <= op <= OP_16 else None


def _multisig_keys(script: bytes) -> tuple[bytes, ...] | None:
    if len(script) < 3 or script[-1] != OP_CHECKMULTISIG:
        return None
    try:
        ops = list(iter_script(script[:-1]))
    except MalformedChainData:
        return None
    m, n = _small_int(ops[0][0]), _small_int(ops[-1][0])
    keys = tuple(data for _, data in ops[1:-1] if data is not None and is_pubkey(data))
    if m is None or n is None or len(keys) != len(ops) - 2 or len(keys) != n or m > n:
        return None
    return keys


def witness_program(script: bytes) -> tuple[int, bytes] | None:
    """``(version, program)`` when the script is a witness program (Core's ``IsWitnessProgram``)."""
    if not 4 <= len(script) <= 42 or script[1] + 2 != len(script):
        return None
    version = 0 if script[0] == OP_0 else _small_int(script[0])
    return None if version is None else (version, script[2:])


_WITNESS_TYPES = MappingProxyType(
    {
        (0, 20): OutputType.P2WPKH,
        (0, 32): OutputType.P2WSH,
        (1, 32): OutputType.P2TR,
        (2, 32): OutputType.P2MR,
    }
)


def classify_script(script: bytes) -> ScriptInfo:
    """Classify a scriptPubKey into its output type, address payload and visible keys."""
    size = len(script)
    if size == 25 and script.startswith(_P2PKH_HEAD) and script.endswith(_P2PKH_TAIL):
        return ScriptInfo(OutputType.P2PKH, script[3:23])
    if size == 23 and script.startswith(_P2SH_HEAD) and script.endswith(_P2SH_TAIL):
        return ScriptInfo(OutputType.P2SH, script[2:22])
    if size in (35, 67) and script[0] == size - 2 and script[-1] == OP_CHECKSIG and is_pubkey(script[1:-1]):
        return ScriptInfo(OutputType.P2PK, keys=(script[1:-1],))
    witness = witness_program(script)
    if witness is not None:
        version, program = witness
        kind = _WITNESS_TYPES.get((version, len(program)))
        if kind is None:
            kind = OutputType.NONSTANDARD if version == 0 else OutputType.WITNESS_UNKNOWN
        keys = (program,) if kind is OutputType.P2TR else ()
        return ScriptInfo(kind, program, keys, version)
    if size and script[0] == OP_RETURN:
        return ScriptInfo(OutputType.OP_RETURN)
    multisig = _multisig_keys(script)
    if multisig is not None:
        return ScriptInfo(OutputType.P2MS, keys=multisig)
    return ScriptInfo(OutputType.NONSTANDARD)


def p2pkh_script(key_hash: bytes) -> bytes:
    """The P2PKH scriptPubKey paying a 20-byte key hash."""
    return _P2PKH_HEAD + key_hash + _P2PKH_TAIL


def p2sh_script(script_hash: bytes) -> bytes:
    """The P2SH scriptPubKey paying a 20-byte script hash."""
    return _P2SH_HEAD + script_hash + _P2SH_TAIL


def witness_script_pubkey(version: int, program: bytes) -> bytes:
    """The scriptPubKey of a witness program: the version opcode, then the program as one push."""
    return bytes([OP_0 if version == 0 else OP_1 + version - 1, len(program)]) + program


def _full_keys(key: bytes) -> Sequence[bytes]:
    """A key in every SEC form it may have been hashed or pushed in: compressed and
    uncompressed are one key (an x-only key has two parities, each in both forms). A
    byte string that is no point is matched only as given."""
    candidates = (b"\x02" + key, b"\x03" + key) if len(key) == 32 else (key,)
    forms: list[bytes] = []
    for candidate in candidates:
        try:
            point = Secp256k1Point(candidate)
        except ValueError:
            forms.append(candidate)
            continue
        forms += [point.format(compressed=True), point.format(compressed=False)]
    return forms


def _x_only(key: bytes) -> bytes | None:
    """The 32-byte x coordinate of a key given x-only or in SEC form."""
    if len(key) == 32:
        return key
    if len(key) == 33:
        return key[1:]
    if len(key) == 65:
        return key[1:33]
    return None


def tagged_hash(tag: str, data: bytes) -> bytes:
    """BIP-340's tagged hash: SHA-256(SHA-256(tag) || SHA-256(tag) || data), 32 bytes."""
    tag_hash = hashlib.sha256(tag.encode()).digest()
    return hashlib.sha256(tag_hash + tag_hash + data).digest()


def taproot_output_key(internal_key: bytes, merkle_root: bytes = b"") -> bytes:
    """The taproot output key (x-only, 32 bytes) of a key (x-only or SEC) used as internal
    key: Q = P + H_TapTweak(x(P) || merkle_root)·G, with P the point of even y at x (BIP-341);
    no ``merkle_root`` (no script tree) is BIP-86. ``ValueError`` when the key is no point."""
    x = _x_only(internal_key)
    if x is None:
        raise ValueError(f"a taproot internal key is 32, 33 or 65 bytes, got {len(internal_key)}")
    tweak = tagged_hash("TapTweak", x + merkle_root)
    if int.from_bytes(tweak, "big") >= _SECP256K1_ORDER:  # probability ~2^-128; BIP-341 fails here too
        raise ValueError("taproot tweak out of range for this key")
    return Secp256k1Point(b"\x02" + x).add(tweak).format(compressed=True)[1:]


def _bip86_output(x: bytes) -> bytes | None:
    try:
        return taproot_output_key(x)
    except ValueError:  # not a point: it commits to nothing
        return None


def script_commits_to_key(script_pubkey: bytes, key: bytes) -> bool:
    """True when the output pays ``key`` directly or through a hash of it.

    This is the draft BIP's "derived" disclosure: once a key is public anywhere on chain, every
    output committing to it is exposed at rest. ``key`` is SEC-encoded (33/65 bytes) or x-only
    (32 bytes). P2SH is recognised only as nested P2WPKH; other script hashes cannot be
    matched without the script.
    """
    info = classify_script(script_pubkey)
    kind = info.output_type
    if kind in (OutputType.P2PK, OutputType.P2MS):
        return any(k in info.keys for k in _full_keys(key))
    if kind is OutputType.P2TR:
        x = _x_only(key)
        # the key as output key (revealed by a key-path spend) or as BIP-86 internal key
        return x is not None and info.program in (x, _bip86_output(x))
    if kind in (OutputType.P2PKH, OutputType.P2WPKH):
        return any(hash160(k) == info.program for k in _full_keys(key))
    if kind is OutputType.P2SH:
        return any(hash160(witness_script_pubkey(0, hash160(k))) == info.program for k in _full_keys(key))
    return False
