"""Public BIP-32 derivation and SLIP-132 extended public keys (pure: no I/O).

A wallet's extended public key (xpub, or its SLIP-132 variants ypub, zpub, …) commits to
every receive and change key of an account: the scan derives them with ``CKDpub`` and
never needs, nor accepts, a private key. Private key material (an xprv/tprv/…, private
key data inside a public version, or a WIF key) is refused with ``PrivateKeyRefused``,
whose message names only the kind of key: the key text is never echoed, logged or kept.

References:

* BIP-32 "Serialization format": 78 bytes = version (4) ‖ depth (1) ‖ parent fingerprint (4)
  ‖ child number (4, big-endian) ‖ chain code (32) ‖ key data (33), base58check-encoded
  (a 4-byte double-SHA-256 checksum appended, 82 bytes before base58).
* BIP-32 "Public parent key → public child key" (``CKDpub``) and "Key identifiers"
  (the fingerprint is the first 4 bytes of HASH160 of the compressed key).
* BIP-32 "Test Vectors", vector 5: the invalid keys (key data prefix and version
  mismatches, zero depth with a parent fingerprint or child number, points off the curve).
* SLIP-132 "Registered HD version bytes": the Bitcoin and Bitcoin Testnet rows.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from coincurve import PublicKey as Secp256k1Point

from chains.codecs.base58 import Base58Error, b58check_decode, b58check_encode, b58decode
from chains.errors import InvalidAddress
from pqc.hashes import hash160

#: Child numbers at or above this are hardened (BIP-32 "Child key derivation (CKD)
#: functions"): only the private parent key can derive them.
HARDENED = 0x8000_0000

#: BIP-32 "Serialization format": the payload length before the 4-byte checksum.
_PAYLOAD_SIZE = 78
#: WIF version bytes (mainnet 0x80, testnet 0xEF), followed by 32 key bytes and an
#: optional 0x01 marking a compressed public key.
_WIF_VERSIONS = (0x80, 0xEF)


class InvalidExtendedKey(InvalidAddress):
    """The text is not a usable extended public key: not base58check, wrong length, an
    unknown version, invalid key data, or the depth-0 rules of BIP-32 test vector 5 broken;
    also a child key that cannot be derived (hardened index, BIP-32's invalid child)."""


class PrivateKeyRefused(InvalidAddress):
    """Private key material was given where only public keys are accepted. The message
    names the kind of key only, never the key text."""


@dataclass(frozen=True, slots=True)
class KeyVersion:
    """One SLIP-132 row for Bitcoin: the public prefix ``name`` (e.g. ``"zpub"``), its
    4 version bytes, the network and the script the key's addresses use (``None`` for
    xpub/tpub, whose row says "P2PKH or P2SH")."""

    name: str
    version: bytes
    network: str
    script: str | None


def _row(
    name: str, public_hex: str, private_name: str, private_hex: str, network: str, script: str | None
) -> tuple[KeyVersion, bytes, str]:
    """One table row: the public ``KeyVersion``, the private version bytes and prefix."""
    return KeyVersion(name, bytes.fromhex(public_hex), network, script), bytes.fromhex(private_hex), private_name


#: SLIP-132 "Registered HD version bytes", the Bitcoin and Bitcoin Testnet rows:
#: (public row, private version bytes, private prefix).
_SLIP132 = (
    _row("xpub", "0488b21e", "xprv", "0488ade4", "mainnet", None),
    _row("ypub", "049d7cb2", "yprv", "049d7878", "mainnet", "p2sh-p2wpkh"),
    _row("zpub", "04b24746", "zprv", "04b2430c", "mainnet", "p2wpkh"),
    _row("Ypub", "0295b43f", "Yprv", "0295b005", "mainnet", "p2sh-p2wsh"),
    _row("Zpub", "02aa7ed3", "Zprv", "02aa7a99", "mainnet", "p2wsh"),
    _row("tpub", "043587cf", "tprv", "04358394", "testnet", None),
    _row("upub", "044a5262", "uprv", "044a4e28", "testnet", "p2sh-p2wpkh"),
    _row("vpub", "045f1cf6", "vprv", "045f18bc", "testnet", "p2wpkh"),
    _row("Upub", "024289ef", "Uprv", "024285b5", "testnet", "p2sh-p2wsh"),
    _row("Vpub", "02575483", "Vprv", "02575048", "testnet", "p2wsh"),
)
_PUBLIC_VERSIONS = {row.version: row for row, _, _ in _SLIP132}
_PRIVATE_VERSIONS = {version: name for _, version, name in _SLIP132}


def key_version(version: bytes) -> KeyVersion | None:
    """The SLIP-132 row of 4 public version bytes; ``None`` for any other bytes
    (private versions included)."""
    return _PUBLIC_VERSIONS.get(version)


@dataclass(frozen=True, slots=True)
class ExtendedPublicKey:
    """A BIP-32 extended public key, the fields of its serialization: 4 version bytes,
    depth (0 for a master key), the parent's 4-byte fingerprint, the child number, the
    32-byte chain code and the 33-byte compressed SEC public key."""

    version: bytes
    depth: int
    parent_fingerprint: bytes
    child_number: int
    chain_code: bytes
    public_key: bytes

    @property
    def fingerprint(self) -> bytes:
        """BIP-32 "Key identifiers": the first 4 bytes of HASH160(public_key), the parent
        fingerprint of this key's children."""
        return hash160(self.public_key)[:4]

    def derive(self, index: int) -> ExtendedPublicKey:
        """BIP-32 ``CKDpub``: the child at non-hardened ``index`` (0 ≤ index < 2³¹).

        I = HMAC-SHA512(chain code, ser_P(K) ‖ ser_32(index)); the child key is
        point(I_L) + K and its chain code I_R. Where BIP-32 says to skip to the next index
        (I_L ≥ n or the child is the point at infinity, probability below 2⁻¹²⁷) this raises
        ``InvalidExtendedKey``: the caller decides. A hardened index needs the private key.
        """
        return next(self.children((index,)))

    def children(self, indexes: Iterable[int]) -> Iterator[ExtendedPublicKey]:
        """``derive`` of each of ``indexes``, in order, with the parent's point parsed and its
        fingerprint hashed once: a gap-limit scan derives thousands of children of one branch."""
        if self.depth == 0xFF:
            raise InvalidExtendedKey("depth 255 is the deepest a BIP-32 key can be serialized at")
        parent, fingerprint = Secp256k1Point(self.public_key), self.fingerprint
        for index in indexes:
            if not 0 <= index < 2**32:
                raise InvalidExtendedKey(f"child index {index} is outside 0..2^32-1")
            if index >= HARDENED:
                raise InvalidExtendedKey("hardened derivation needs the private key")
            digest = hmac.digest(self.chain_code, self.public_key + index.to_bytes(4, "big"), "sha512")
            try:
                child = parent.add(digest[:32])
            except ValueError:
                raise InvalidExtendedKey(
                    f"child {index} is invalid (BIP-32: I_L >= n or the point at infinity); use the next index"
                ) from None
            yield ExtendedPublicKey(
                version=self.version,
                depth=self.depth + 1,
                parent_fingerprint=fingerprint,
                child_number=index,
                chain_code=digest[32:],
                public_key=child.format(compressed=True),
            )

    def derive_path(self, path: Sequence[int]) -> ExtendedPublicKey:
        """The key at ``path`` (child numbers, e.g. ``(0, 5)`` for receive address 5) below
        this one, by ``derive`` at each step."""
        key = self
        for index in path:
            key = key.derive(index)
        return key

    def encode(self, version: bytes | None = None) -> str:
        """The base58check text (BIP-32 "Serialization format"), under this key's own
        version or another public SLIP-132 ``version`` (e.g. a zpub re-encoded as xpub)."""
        version = self.version if version is None else version
        if key_version(version) is None:
            raise InvalidExtendedKey(f"version {version.hex()} is not a public SLIP-132 version")
        return b58check_encode(
            version
            + bytes([self.depth])
            + self.parent_fingerprint
            + self.child_number.to_bytes(4, "big")
            + self.chain_code
            + self.public_key
        )


def _private_kind(raw: bytes) -> str | None:
    """The kind of private key material in decoded base58 bytes (checksum included, not
    checked: a mistyped private key is still secret), ``None`` when there is none."""
    if len(raw) == _PAYLOAD_SIZE + 4:
        private_name = _PRIVATE_VERSIONS.get(raw[:4])
        if private_name is not None:
            return f"extended private key ({private_name})"
        public = _PUBLIC_VERSIONS.get(raw[:4])
        if public is not None and raw[45] == 0:  # key data 0x00 ‖ 32-byte private key
            return f"private key data in an extended public key ({public.name})"
    if len(raw) in (37, 38) and raw[0] in _WIF_VERSIONS and (len(raw) == 37 or raw[33] == 1):
        return "WIF private key"
    return None


def looks_private(text: str) -> str | None:
    """A short label (``"extended private key (xprv)"``, ``"WIF private key"``, …) when
    ``text`` is private key material, ``None`` otherwise. Callers refuse such text without
    echoing it (the descriptor parser checks every key expression)."""
    try:
        raw = b58decode(text)
    except Base58Error:
        return None
    return _private_kind(raw)


def parse_extended_key(text: str) -> tuple[ExtendedPublicKey, KeyVersion]:
    """Parse a base58check extended public key and its SLIP-132 row.

    Raises ``PrivateKeyRefused`` for private key material (checked first, whatever else is
    wrong with it) and ``InvalidExtendedKey`` for the rest of BIP-32's invalid keys: bad
    base58 or checksum, not 78 bytes, an unknown version, key data that is not a
    compressed secp256k1 point, depth 0 with a parent fingerprint or child number.
    No message contains the key text.
    """
    try:
        kind = _private_kind(b58decode(text))
        if kind is not None:
            raise PrivateKeyRefused(f"private key material was given ({kind}); only public keys are accepted")
        payload = b58check_decode(text)
    except Base58Error as exc:
        raise InvalidExtendedKey(f"not an extended key: {exc}") from None
    if len(payload) != _PAYLOAD_SIZE:
        raise InvalidExtendedKey(f"an extended key is {_PAYLOAD_SIZE} bytes, not {len(payload)}")
    row = key_version(payload[:4])
    if row is None:
        raise InvalidExtendedKey(f"unknown extended key version {payload[:4].hex()}")
    depth, parent_fingerprint = payload[4], payload[5:9]
    child_number = int.from_bytes(payload[9:13], "big")
    chain_code, public_key = payload[13:45], payload[45:]
    if depth == 0 and parent_fingerprint != b"\0\0\0\0":
        raise InvalidExtendedKey("zero depth with a non-zero parent fingerprint")
    if depth == 0 and child_number != 0:
        raise InvalidExtendedKey("zero depth with a non-zero child number")
    if public_key[0] not in (2, 3):
        raise InvalidExtendedKey(f"invalid public key prefix {public_key[0]:02x} (a compressed key starts 02 or 03)")
    try:
        Secp256k1Point(public_key)
    except ValueError:
        raise InvalidExtendedKey("the public key is not a point on secp256k1") from None
    key = ExtendedPublicKey(row.version, depth, parent_fingerprint, child_number, chain_code, public_key)
    return key, row
