"""Output script descriptors (BIP-380 to BIP-386 and BIP-389), parsed and expanded without I/O.

A descriptor names the scriptPubKeys of a wallet: ``wpkh([d34db33f/84h/0h/0h]xpub.../0/*)``
is every P2WPKH output of one BIP-84 receive chain. The service takes descriptors to scan
wallets, so this module parses one into a tree (``Descriptor``), normalises it back to text
with its BIP-380 checksum (``Descriptor.canonical``) and derives the scriptPubKey and keys
at a child index (``Descriptor.expand``), with the key origins a PSBT needs.

Supported: BIP-380 key expressions and checksum; ``pk``, ``pkh``, ``sh`` (BIP-381);
``wpkh``, ``wsh`` (BIP-382); ``multi``, ``sortedmulti`` (BIP-383); ``addr``, ``raw``
(BIP-385); ``tr`` with an optional script tree of ``pk``/``pkh`` leaves (BIP-386); one
``<a;b;...>`` multipath step per extended key (BIP-389).

Refused on purpose:

* private keys (WIF, xprv ...): ``bip32.PrivateKeyRefused``, raised before any other error
  about the key and never quoting it. The service holds public data only.
* hardened steps after an extended public key (``xpub.../1h``, ``/*h``): deriving them needs
  the private key, which the service never has.
* ``combo()`` (BIP-384): it stands for up to four scripts, while an expansion is one script.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from coincurve import PublicKey as Secp256k1Point

from chains.bitcoin.bip32 import (
    HARDENED,
    ExtendedPublicKey,
    InvalidExtendedKey,
    PrivateKeyRefused,
    looks_private,
    parse_extended_key,
)
from chains.bitcoin.script import (
    OP_1,
    OP_CHECKMULTISIG,
    OP_CHECKSIG,
    p2pkh_script,
    p2sh_script,
    tagged_hash,
    taproot_output_key,
    witness_script_pubkey,
)
from chains.codecs.bitcoin import BitcoinAddress
from chains.errors import InvalidAddress
from chains.registry import Network
from pqc.hashes import hash160, sha256

# BIP-380 checksum: the character set a descriptor may use, the checksum alphabet and the
# generator of the BCH code over GF(32).
_INPUT_CHARSET = "0123456789()[],'/*abcdefgh@:$%{}IJKLMNOPQRSTUVWXYZ&+-.;<=>?!^_|~ijklmnopqrstuvwxyzABCDEFGH`#\"\\ "
_CHECKSUM_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_GENERATOR = (0xF5DEE51989, 0xA9FDCA3312, 0x1BAB10E32D, 0x3706B1677A, 0x644D626FFD)
_CHECKSUM_LENGTH = 8

_MAX_P2SH_SCRIPT = 520  # bytes of a redeem script (BIP-16 push limit)
_MAX_BARE_MULTISIG_KEYS = 3  # BIP-383, top-level multi()
_MAX_MULTISIG_KEYS = 20  # BIP-383, inside wsh()
_MAX_TAPROOT_DEPTH = 128  # BIP-341 control block limit
_TAPSCRIPT_LEAF_VERSION = 0xC0
_INDEX = re.compile(r"[0-9]+")
_ARGUMENT = re.compile(r"[^,)}]*")  # a key or number argument: up to the next separator
_FUNCTION = re.compile(r"[a-z_]+(?=\()")  # a script expression name, followed by "("


class InvalidDescriptor(InvalidAddress):
    """The descriptor text breaks BIP-380..386/389 or uses a feature the service refuses.

    The message says what is wrong and where (a character position or the fragment)."""


class _Context(enum.Enum):
    """Where a script expression sits: each BIP allows its expressions in some of these."""

    TOP = "top level"
    SH = "sh()"
    WSH = "wsh()"
    TAP = "a tr() script tree"


@dataclass(frozen=True, slots=True)
class DerivedKey:
    """One public key of an expansion, with its BIP-32 origin for PSBT derivation fields.

    ``pubkey`` is 33 bytes (65 for an uncompressed key) or 32 bytes x-only inside ``tr()``.
    ``fingerprint`` and ``path`` come from the key origin ``[fingerprint/path]`` followed by
    the derivation steps; without an origin, the fingerprint is that of the key written
    (HASH160 of the extended key's public key, or of the plain key, its first 4 bytes)."""

    pubkey: bytes
    fingerprint: bytes
    path: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Expansion:
    """The scriptPubKey a descriptor gives at one child index and multipath branch, and
    the keys it uses in the order they appear in the descriptor."""

    script_pubkey: bytes
    keys: tuple[DerivedKey, ...]


@dataclass(frozen=True, slots=True)
class KeyExpression:
    """A BIP-380 key expression: an optional origin, then a plain public key or an
    extended public key with unhardened steps (each a tuple of BIP-389 alternatives) and
    an optional final ``/*``. ``x_only`` marks keys used in ``tr()``, which derive to 32 bytes."""

    text: str
    origin_fingerprint: bytes | None
    origin_path: tuple[int, ...]
    pubkey: bytes | None
    xpub: ExtendedPublicKey | None = field(default=None, repr=False)
    steps: tuple[tuple[int, ...], ...] = ()
    wildcard: bool = False
    x_only: bool = False

    @property
    def multipath(self) -> int:
        """The number of BIP-389 alternatives of the key's multipath step (1 when none)."""
        return max((len(step) for step in self.steps), default=1)

    def derive(self, index: int, path: int) -> DerivedKey:
        """The key at child ``index`` (used when ranged) of multipath branch ``path``."""
        if self.xpub is None:
            assert self.pubkey is not None  # a key expression is one or the other
            key = self.pubkey
            sec = b"\x02" + key if len(key) == 32 else key
            own_fingerprint = hash160(sec)[:4]
            chosen: tuple[int, ...] = ()
        else:
            chosen = tuple(step[path] if len(step) > 1 else step[0] for step in self.steps)
            if self.wildcard:
                chosen += (index,)
            key = self.xpub.derive_path(chosen).public_key
            own_fingerprint = self.xpub.fingerprint
        if self.x_only and len(key) == 33:
            key = key[1:]
        if self.origin_fingerprint is None:
            return DerivedKey(key, own_fingerprint, chosen)
        return DerivedKey(key, self.origin_fingerprint, self.origin_path + chosen)


@dataclass(frozen=True, slots=True)
class TapBranch:
    """An inner node ``{left,right}`` of a BIP-386 script tree; leaves are ``Descriptor``s."""

    left: Descriptor | TapBranch
    right: Descriptor | TapBranch

    def text(self) -> str:
        """The branch as descriptor text."""
        return f"{{{_tree_text(self.left)},{_tree_text(self.right)}}}"


def _tree_text(node: Descriptor | TapBranch) -> str:
    return node.text() if isinstance(node, TapBranch) else node.body()


@dataclass(frozen=True, slots=True)
class Descriptor:
    """A parsed descriptor: one script expression and what it holds.

    ``function`` is the expression name (``pk``, ``sh``, ``multi``, ``tr`` ...); ``keys``
    its key expressions; ``inner`` the script inside ``sh()``/``wsh()``; ``threshold`` the
    ``k`` of ``multi()``; ``script`` the output of ``raw()``/``addr()`` (``address`` keeps
    the address text); ``tree`` the script tree of ``tr()``."""

    function: str
    keys: tuple[KeyExpression, ...] = ()
    inner: Descriptor | None = None
    threshold: int = 0
    script: bytes = b""
    address: str = ""
    tree: Descriptor | TapBranch | None = None

    def body(self) -> str:
        """The normalised descriptor text without checksum: lower-case hex, ``h`` as the
        hardened marker; extended keys as given."""
        if self.function in ("pk", "pkh", "wpkh"):
            return f"{self.function}({self.keys[0].text})"
        if self.inner is not None:
            return f"{self.function}({self.inner.body()})"
        if self.function in ("multi", "sortedmulti"):
            return f"{self.function}({self.threshold},{','.join(key.text for key in self.keys)})"
        if self.function == "addr":
            return f"addr({self.address})"
        if self.function == "raw":
            return f"raw({self.script.hex()})"
        tree = "" if self.tree is None else "," + _tree_text(self.tree)
        return f"tr({self.keys[0].text}{tree})"

    def canonical(self) -> str:
        """The normalised text with its BIP-380 checksum, e.g. to store or compare descriptors."""
        body = self.body()
        return f"{body}#{descriptor_checksum(body)}"

    def all_keys(self) -> tuple[KeyExpression, ...]:
        """Every key expression of the descriptor, inner scripts and script tree included."""
        found = list(self.keys)
        if self.inner is not None:
            found += self.inner.all_keys()
        pending: list[Descriptor | TapBranch] = [] if self.tree is None else [self.tree]
        while pending:
            node = pending.pop(0)
            if isinstance(node, TapBranch):
                pending[:0] = [node.left, node.right]
            else:
                found += node.all_keys()
        return tuple(found)

    @property
    def ranged(self) -> bool:
        """True when a key ends in ``/*``: the descriptor stands for one script per child index."""
        return any(key.wildcard for key in self.all_keys())

    @property
    def multipath(self) -> int:
        """The number of BIP-389 branches (e.g. 2 for ``/<0;1>/*``, receive and change), 1 when none."""
        return max((key.multipath for key in self.all_keys()), default=1)

    def expand(self, index: int = 0, path: int = 0) -> Expansion:
        """The scriptPubKey at child ``index`` of multipath branch ``path`` and its keys.

        ``index`` is ignored by a descriptor that is not ranged. ``ValueError`` when
        ``index`` is not an unhardened child number or ``path`` not a branch."""
        if not 0 <= index < HARDENED:
            raise ValueError(f"child index must be in 0..{HARDENED - 1}, got {index}")
        if not 0 <= path < self.multipath:
            raise ValueError(f"multipath branch must be in 0..{self.multipath - 1}, got {path}")
        keys: list[DerivedKey] = []
        return Expansion(self._script(index, path, keys), tuple(keys))

    def spend_scripts(self, index: int = 0, path: int = 0) -> tuple[bytes | None, bytes | None]:
        """The redeem script (``sh()``) and witness script (``wsh()``) a spender of the output
        at ``index`` of branch ``path`` reveals, None where the descriptor has none: what a
        PSBT's ``PSBT_IN_REDEEM_SCRIPT`` / ``PSBT_IN_WITNESS_SCRIPT`` carry (BIP-174)."""
        self.expand(index, path)  # the same argument checks
        if self.function == "wsh":
            assert self.inner is not None
            return None, self.inner._script(index, path, [])
        if self.function != "sh":
            return None, None
        assert self.inner is not None
        redeem = self.inner._script(index, path, [])
        if self.inner.function == "wsh":
            assert self.inner.inner is not None
            return redeem, self.inner.inner._script(index, path, [])
        return redeem, None

    def taproot_tree(self, index: int = 0, path: int = 0) -> tuple[bytes | None, dict[bytes, tuple[bytes, ...]]]:
        """For a ``tr()`` descriptor: the BIP-341 Merkle root of its script tree at ``index`` of
        branch ``path`` (None without a tree) and, for each x-only key of its leaves, the
        TapLeaf hashes of the leaves using it: what a PSBT's ``PSBT_IN_TAP_MERKLE_ROOT`` and
        ``PSBT_IN_TAP_BIP32_DERIVATION`` carry (BIP-371), so a signer can tweak the internal key
        for the key path or sign a leaf. ``ValueError`` for other descriptors."""
        if self.function != "tr":
            raise ValueError(f"{self.function}() has no taproot tree")
        self.expand(index, path)  # the same argument checks
        if self.tree is None:
            return None, {}
        leaves: dict[bytes, tuple[bytes, ...]] = {}
        pending: list[Descriptor | TapBranch] = [self.tree]
        while pending:
            node = pending.pop()
            if isinstance(node, TapBranch):
                pending += [node.left, node.right]
                continue
            keys: list[DerivedKey] = []
            leaf_hash = _tree_hash(node, index, path, keys)
            for key in keys:
                leaves[key.pubkey] = (*leaves.get(key.pubkey, ()), leaf_hash)
        return _tree_hash(self.tree, index, path, []), leaves

    def _script(self, index: int, path: int, keys: list[DerivedKey]) -> bytes:
        derived = [key.derive(index, path) for key in self.keys]
        keys += derived
        function = self.function
        if function == "pk":
            return _push(derived[0].pubkey) + bytes([OP_CHECKSIG])
        if function == "pkh":
            return p2pkh_script(hash160(derived[0].pubkey))
        if function == "wpkh":
            return witness_script_pubkey(0, hash160(derived[0].pubkey))
        if function == "sh":
            assert self.inner is not None
            return p2sh_script(hash160(self.inner._script(index, path, keys)))
        if function == "wsh":
            assert self.inner is not None
            return witness_script_pubkey(0, sha256(self.inner._script(index, path, keys)))
        if function in ("multi", "sortedmulti"):
            pubkeys = [key.pubkey for key in derived]
            if function == "sortedmulti":
                pubkeys.sort()
            pushes = b"".join(_push(key) for key in pubkeys)
            return _number(self.threshold) + pushes + _number(len(pubkeys)) + bytes([OP_CHECKMULTISIG])
        if function in ("raw", "addr"):
            return self.script
        merkle_root = b"" if self.tree is None else _tree_hash(self.tree, index, path, keys)
        return witness_script_pubkey(1, taproot_output_key(derived[0].pubkey, merkle_root))


def _push(data: bytes) -> bytes:
    # keys are 32, 33 or 65 bytes: a direct push (opcodes 1..75)
    return bytes([len(data)]) + data


def _number(value: int) -> bytes:
    """A multisig count (1..20): OP_1..OP_16, above that a one-byte push (BIP-383)."""
    return bytes([OP_1 + value - 1]) if value <= 16 else bytes([1, value])


def _tree_hash(node: Descriptor | TapBranch, index: int, path: int, keys: list[DerivedKey]) -> bytes:
    """BIP-341 Merkle hash of a script tree: TapLeaf of each leaf script, TapBranch of
    each sorted pair."""
    if isinstance(node, TapBranch):
        left = _tree_hash(node.left, index, path, keys)
        right = _tree_hash(node.right, index, path, keys)
        return tagged_hash("TapBranch", min(left, right) + max(left, right))
    leaf = node._script(index, path, keys)
    # pk() and pkh() leaves are under 253 bytes: their compact-size length is one byte
    return tagged_hash("TapLeaf", bytes([_TAPSCRIPT_LEAF_VERSION, len(leaf)]) + leaf)


def descriptor_checksum(text: str) -> str:
    """BIP-380's 8-character checksum of ``text`` (a descriptor without ``#...``).

    It detects errors in copied descriptors; ``InvalidDescriptor`` when ``text`` holds a
    character outside BIP-380's set."""
    symbols: list[int] = []
    groups: list[int] = []
    for position, char in enumerate(text):
        value = _INPUT_CHARSET.find(char)
        if value < 0:
            raise InvalidDescriptor(f"character {char!r} at position {position} is not allowed in a descriptor")
        symbols.append(value & 31)
        groups.append(value >> 5)
        if len(groups) == 3:
            symbols.append(groups[0] * 9 + groups[1] * 3 + groups[2])
            groups = []
    if len(groups) == 1:
        symbols.append(groups[0])
    elif len(groups) == 2:
        symbols.append(groups[0] * 3 + groups[1])
    residue = _polymod([*symbols, *[0] * _CHECKSUM_LENGTH]) ^ 1
    return "".join(_CHECKSUM_CHARSET[(residue >> (5 * (7 - i))) & 31] for i in range(_CHECKSUM_LENGTH))


def _polymod(symbols: list[int]) -> int:
    checksum = 1
    for value in symbols:
        top = checksum >> 35
        checksum = ((checksum & 0x7_FFFF_FFFF) << 5) ^ value
        for bit, generator in enumerate(_GENERATOR):
            if (top >> bit) & 1:
                checksum ^= generator
    return checksum


def parse_descriptor(text: str, *, require_checksum: bool = False) -> Descriptor:
    """Parse a descriptor (BIP-380..386, BIP-389) into a ``Descriptor``.

    A ``#checksum`` is verified when present (and required with ``require_checksum``).
    Private keys are refused with ``bip32.PrivateKeyRefused`` before anything else is said
    about them; every other fault raises ``InvalidDescriptor``."""
    body, hash_sign, checksum = text.partition("#")
    descriptor_checksum(body)  # the character set, before keys are looked at
    _refuse_private_keys(body)
    if hash_sign:
        if len(checksum) != _CHECKSUM_LENGTH:
            raise InvalidDescriptor(
                f"the checksum after '#' must be {_CHECKSUM_LENGTH} characters, not {len(checksum)}"
            )
        if checksum != descriptor_checksum(body):
            raise InvalidDescriptor("the checksum does not match the descriptor (a character was mistyped or lost)")
    elif require_checksum:
        raise InvalidDescriptor("the descriptor has no '#checksum'")
    parser = _Parser(body)
    descriptor = parser.script(_Context.TOP)
    if parser.pos != len(body):
        raise InvalidDescriptor(f"unexpected text after the descriptor at position {parser.pos}")
    lengths = {key.multipath for key in descriptor.all_keys()} - {1}
    if len(lengths) > 1:
        raise InvalidDescriptor(f"multipath specifiers of different lengths ({sorted(lengths)}) in one descriptor")
    return descriptor


#: The descriptor templates each SLIP-132 script type stands for (``%s``: the key expression);
#: ``None`` (``xpub``/``tpub``: SLIP-132 states no script) is every single-key type a wallet
#: may have used it for.
_SLIP132_TEMPLATES: dict[str | None, tuple[str, ...]] = {
    "p2sh-p2wpkh": ("sh(wpkh(%s))",),
    "p2wpkh": ("wpkh(%s)",),
    None: ("pkh(%s)", "sh(wpkh(%s))", "wpkh(%s)", "tr(%s)"),
}
_BIP32_VERSIONS = {"mainnet": bytes.fromhex("0488b21e"), "testnet": bytes.fromhex("043587cf")}


def extended_key_descriptors(text: str) -> list[Descriptor]:
    """The descriptors a bare extended public key stands for, receive and change branches as
    one BIP-389 multipath step (``<0;1>/*``): its SLIP-132 version's script (``ypub``/``upub``
    -> ``sh(wpkh())``, ``zpub``/``vpub`` -> ``wpkh()``), or for an ``xpub``/``tpub``, which
    states none, ``pkh``, ``sh(wpkh)``, ``wpkh`` and ``tr`` (a scan reports each). The key is
    written in its BIP-32 version (``xpub``/``tpub``), as BIP-380 key expressions are. A
    multisig version (``Ypub``, ``Zpub`` ...) is one cosigner: ``InvalidDescriptor`` asks for
    the whole descriptor. Private keys: ``PrivateKeyRefused``."""
    key, version = parse_extended_key(text.strip())
    templates = _SLIP132_TEMPLATES.get(version.script)
    if templates is None:
        raise InvalidDescriptor(
            f"a {version.name} is one cosigner of a multisig wallet: give the wallet's whole descriptor "
            "(e.g. wsh(sortedmulti(k, key1/<0;1>/*, key2/<0;1>/*, ...)))"
        )
    expression = f"{key.encode(_BIP32_VERSIONS[version.network])}/<0;1>/*"
    return [parse_descriptor(template % expression) for template in templates]


def _refuse_private_keys(body: str) -> None:
    """Raise ``PrivateKeyRefused`` when any argument's key part is private key material."""
    for match in re.finditer(r"[^(),{}]+", body):
        key = match.group().rpartition("]")[2].partition("/")[0]
        kind = looks_private(key)
        if kind is not None:
            raise PrivateKeyRefused(
                f"private key material ({kind}) at position {match.start()}: only public keys are accepted"
            )


class _Parser:
    """Recursive descent over the descriptor text; ``pos`` is the next character to read."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _fail(self, message: str, position: int | None = None) -> InvalidDescriptor:
        return InvalidDescriptor(f"{message} (at position {self.pos if position is None else position})")

    def _expect(self, char: str) -> None:
        if not self.text.startswith(char, self.pos):
            raise self._fail(f"expected {char!r}")
        self.pos += 1

    def _token(self) -> tuple[str, int]:
        """The argument up to the next ``,``, ``)`` or ``}`` and its start position."""
        start = self.pos
        match = _ARGUMENT.match(self.text, start)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()
        return match.group(), start

    def script(self, context: _Context) -> Descriptor:
        """A script expression ``NAME(...)`` allowed in ``context``."""
        start = self.pos
        match = _FUNCTION.match(self.text, start)
        if match is None:
            raise self._fail(f"expected a script expression such as pk(...) inside {context.value}")
        name = match.group()
        self.pos = match.end() + 1
        allowed = _ALLOWED_CONTEXTS.get(name)
        if allowed is None:
            raise self._fail(f"unknown script expression {name}()", start)
        if context not in allowed:
            where = " or ".join(c.value for c in allowed)
            raise self._fail(f"{name}() is not allowed in {context.value}, only in {where}", start)
        descriptor = self._arguments(name, context, start)
        self._expect(")")
        return descriptor

    def _arguments(self, name: str, context: _Context, start: int) -> Descriptor:
        if name == "combo":
            raise self._fail("combo() is not supported: it expands to several scripts", start)
        if name in ("pk", "pkh"):
            return Descriptor(name, (self._key(context, uncompressed=context in (_Context.TOP, _Context.SH)),))
        if name == "wpkh":
            return Descriptor(name, (self._key(context, uncompressed=False),))
        if name in ("sh", "wsh"):
            inner = self.script(_Context.SH if name == "sh" else _Context.WSH)
            return Descriptor(name, inner=inner)
        if name in ("multi", "sortedmulti"):
            return self._multi(name, context)
        if name == "raw":
            return self._raw()
        if name == "addr":
            return self._addr()
        return self._tr()

    def _multi(self, name: str, context: _Context) -> Descriptor:
        text, start = self._token()
        if _INDEX.fullmatch(text) is None:
            raise self._fail(f"the threshold of {name}() must be a number, not {text!r}", start)
        keys = []
        while self.text.startswith(",", self.pos):
            self.pos += 1
            keys.append(self._key(context, uncompressed=context is not _Context.WSH))
        threshold, count = int(text), len(keys)
        if not 1 <= threshold <= count:
            raise self._fail(f"{name}() threshold {threshold} must be between 1 and the {count} keys", start)
        limit = _MAX_BARE_MULTISIG_KEYS if context is _Context.TOP else _MAX_MULTISIG_KEYS
        if count > limit:
            raise self._fail(f"{name}() in {context.value} takes at most {limit} keys, not {count}", start)
        if context is _Context.SH:
            size = 3 + sum(1 + (65 if key.pubkey is not None and len(key.pubkey) == 65 else 33) for key in keys)
            if size > _MAX_P2SH_SCRIPT:
                raise self._fail(
                    f"{name}() in sh() makes a {size}-byte redeem script, above the {_MAX_P2SH_SCRIPT}-byte limit "
                    "(at most 15 compressed keys)",
                    start,
                )
        return Descriptor(name, tuple(keys), threshold=threshold)

    def _raw(self) -> Descriptor:
        text, start = self._token()
        if not text or len(text) % 2 or re.fullmatch(r"[0-9a-fA-F]*", text) is None:
            raise self._fail("raw() takes a script as a non-empty even number of hex digits", start)
        return Descriptor("raw", script=bytes.fromhex(text))

    def _addr(self) -> Descriptor:
        text, start = self._token()
        errors = []
        for network in Network:
            try:
                address = BitcoinAddress.decode(text, network=network)
            except InvalidAddress as exc:
                errors.append(str(exc))
            else:
                return Descriptor("addr", script=address.script_pubkey, address=text)
        raise self._fail(f"addr() holds no valid Bitcoin address: {errors[0]}", start)

    def _tr(self) -> Descriptor:
        key = self._key(_Context.TAP, uncompressed=False)
        if not self.text.startswith(",", self.pos):
            return Descriptor("tr", (key,))
        self.pos += 1
        return Descriptor("tr", (key,), tree=self._tree(0))

    def _tree(self, depth: int) -> Descriptor | TapBranch:
        if depth > _MAX_TAPROOT_DEPTH:
            raise self._fail(f"the script tree is deeper than BIP-341's {_MAX_TAPROOT_DEPTH} levels")
        if not self.text.startswith("{", self.pos):
            return self.script(_Context.TAP)
        self.pos += 1
        left = self._tree(depth + 1)
        self._expect(",")
        right = self._tree(depth + 1)
        self._expect("}")
        return TapBranch(left, right)

    def _key(self, context: _Context, *, uncompressed: bool) -> KeyExpression:
        """A key expression: ``[fingerprint/path]`` origin, then a hex key or an xpub with steps."""
        text, start = self._token()
        origin_fingerprint: bytes | None = None
        origin_path: tuple[int, ...] = ()
        origin_text = ""
        rest = text
        if text.startswith("["):
            close = text.find("]")
            if close < 0:
                raise self._fail("the key origin has no closing ']'", start)
            parts = text[1:close].split("/")
            if re.fullmatch(r"[0-9a-fA-F]{8}", parts[0]) is None:
                raise self._fail("a key origin fingerprint is 8 hex digits", start)
            origin_fingerprint = bytes.fromhex(parts[0])
            origin_path = tuple(self._index(step, start, where="key origin") for step in parts[1:])
            origin_text = "[" + "/".join([parts[0].lower(), *map(_index_text, origin_path)]) + "]"
            rest = text[close + 1 :]
        if "[" in rest or "]" in rest:
            raise self._fail("misplaced '[' or ']': a key has at most one origin, at its start", start)
        key_text, *steps = rest.split("/")
        if not key_text:
            raise self._fail("the key expression has no key", start)
        if re.fullmatch(r"[0-9a-fA-F]+", key_text):
            if steps:
                raise self._fail("derivation steps follow a plain public key; only extended keys derive", start)
            pubkey = self._plain_key(key_text, context, start, uncompressed=uncompressed)
            return KeyExpression(
                origin_text + key_text.lower(), origin_fingerprint, origin_path, pubkey, x_only=context is _Context.TAP
            )
        try:
            xpub, _version = parse_extended_key(key_text)
        except InvalidExtendedKey as exc:
            raise self._fail(f"not a public key or extended public key: {exc}", start) from None
        wildcard = bool(steps) and steps[-1] == "*"
        parsed = tuple(self._step(step, start) for step in (steps[:-1] if wildcard else steps))
        if sum(len(step) > 1 for step in parsed) > 1:
            raise self._fail("a key may have only one multipath <...> step (BIP-389)", start)
        step_text = "".join(
            "/" + ("<" + ";".join(map(str, step)) + ">" if len(step) > 1 else str(step[0])) for step in parsed
        )
        return KeyExpression(
            origin_text + key_text + step_text + ("/*" if wildcard else ""),
            origin_fingerprint,
            origin_path,
            None,
            xpub,
            parsed,
            wildcard,
            x_only=context is _Context.TAP,
        )

    def _plain_key(self, key_text: str, context: _Context, start: int, *, uncompressed: bool) -> bytes:
        if len(key_text) % 2:
            raise self._fail("a public key has an even number of hex digits", start)
        key = bytes.fromhex(key_text)
        if len(key) == 32:
            if context is not _Context.TAP:
                raise self._fail("x-only (32-byte) public keys are only allowed inside tr()", start)
            sec = b"\x02" + key
        elif len(key) == 33 and key[0] in (2, 3) or len(key) == 65 and key[0] == 4:
            sec = key
        else:
            raise self._fail(f"a {len(key)}-byte hex string is not a SEC public key", start)
        try:
            Secp256k1Point(sec)
        except ValueError:
            raise self._fail("the public key is not a point on secp256k1", start) from None
        if len(key) == 65 and not uncompressed:
            raise self._fail("uncompressed public key: wpkh(), wsh() and tr() take compressed keys only", start)
        return key

    def _step(self, step: str, start: int) -> tuple[int, ...]:
        """One derivation step after an extended key: an index or a BIP-389 ``<a;b;...>``."""
        if step in ("*'", "*h"):
            raise self._fail("a hardened wildcard needs the private key; only public keys are accepted", start)
        if step == "*":
            raise self._fail("the wildcard '*' may only be the last step", start)
        if step.startswith("<") and step.endswith(">"):
            alternatives = tuple(self._index(item, start, where="multipath step") for item in step[1:-1].split(";"))
            if len(alternatives) < 2:
                raise self._fail("a multipath step <...> needs at least two indexes (BIP-389)", start)
            if len(set(alternatives)) != len(alternatives):
                raise self._fail("a multipath step <...> repeats an index (BIP-389)", start)
            return alternatives
        return (self._index(step, start, where="derivation"),)

    def _index(self, step: str, start: int, *, where: str) -> int:
        """A BIP-32 index, ``h`` or ``'`` marking it hardened (allowed only in key origins)."""
        hardened = step.endswith(("h", "'"))
        digits = step[:-1] if hardened else step
        if _INDEX.fullmatch(digits) is None:
            raise self._fail(f"invalid {where} index {step!r}: a number, optionally followed by h or '", start)
        value = int(digits)
        if value >= HARDENED:
            raise self._fail(f"{where} index {digits} is out of range (at most {HARDENED - 1})", start)
        if hardened and where != "key origin":
            raise self._fail(
                f"hardened {where} step {step!r} after an extended public key needs the private key; "
                "only public keys are accepted",
                start,
            )
        return value + HARDENED if hardened else value


def _index_text(index: int) -> str:
    return f"{index - HARDENED}h" if index >= HARDENED else str(index)


_ALLOWED_CONTEXTS: dict[str, tuple[_Context, ...]] = {
    "pk": (_Context.TOP, _Context.SH, _Context.WSH, _Context.TAP),
    "pkh": (_Context.TOP, _Context.SH, _Context.WSH, _Context.TAP),
    "sh": (_Context.TOP,),
    "wpkh": (_Context.TOP, _Context.SH),
    "wsh": (_Context.TOP, _Context.SH),
    "multi": (_Context.TOP, _Context.SH, _Context.WSH),
    "sortedmulti": (_Context.TOP, _Context.SH, _Context.WSH),
    "combo": (_Context.TOP,),
    "addr": (_Context.TOP,),
    "raw": (_Context.TOP,),
    "tr": (_Context.TOP,),
}
