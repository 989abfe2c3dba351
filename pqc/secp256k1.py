"""secp256k1 ECDSA through libsecp256k1 (``coincurve``): recovery, verification,
and comparing a recovered signer with what a client claims.

Signature layouts (65 bytes, choose with ``SignatureLayout``):

* ``rsv`` (Ethereum and most libraries): r (32) || s (32) || v, v in {0, 1, 27, 28}.
  EIP-155 chain-encoded v values (35+) are rejected: personal_sign never uses them.
* ``bip137`` (Bitcoin ``signmessage``, base64-decoded): header || r || s with
  header 27-42; recovery id = (header - 27) % 4; 27-30 uncompressed P2PKH,
  31-34 compressed P2PKH, 35-38 P2SH-P2WPKH, 39-42 P2WPKH.

Policy, everywhere: r and s must be in [1, n-1] (MalformedSignature otherwise)
and s <= n/2 (low-S, as Bitcoin and Ethereum require; InvalidSignature
otherwise). ``unsafe_verify_allowing_high_s`` is the one exception, for
standards-conformance checks only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from coincurve import PublicKey

from pqc.ecdsa_der import decode_der_signature, encode_der_signature
from pqc.ecdsa_messages import DIGEST_SIZE
from pqc.errors import InvalidInput, InvalidKeyFormat, InvalidSignature, MalformedSignature
from pqc.hashes import hash160, keccak256

#: Order of the secp256k1 group.
CURVE_ORDER: Final = 0xFFFFFFFF_FFFFFFFF_FFFFFFFF_FFFFFFFE_BAAEDCE6_AF48A03B_BFD25E8C_D0364141
HALF_ORDER: Final = CURVE_ORDER // 2
COMPACT_SIGNATURE_SIZE: Final = 64
RECOVERABLE_SIGNATURE_SIZE: Final = 65
UNCOMPRESSED_KEY_SIZE: Final = 65
COMPRESSED_KEY_SIZE: Final = 33
RAW_KEY_SIZE: Final = 64
ADDRESS_SIZE: Final = 20
_RSV_RECOVERY_BYTES: Final = {0: 0, 1: 1, 27: 0, 28: 1}
_BIP137_HEADERS: Final = range(27, 43)
_BIP137_FIRST_COMPRESSED: Final = 31


class SignatureLayout(StrEnum):
    """Byte order of a 65-byte recoverable signature."""

    RSV = "rsv"
    BIP137 = "bip137"


class ClaimedSigner(StrEnum):
    """How a client names the expected signer."""

    PUBLIC_KEY = "public_key"  # 33-byte compressed, 65-byte 0x04 uncompressed or 64-byte raw X||Y
    EVM_ADDRESS = "evm_address"  # 20 bytes: last 20 of keccak256(X||Y)
    HASH160 = "hash160"  # 20 bytes: RIPEMD160(SHA256(pubkey)), P2PKH / P2WPKH payload


@dataclass(frozen=True, slots=True)
class RecoverableSignature:
    """Parsed recoverable signature; ``compressed`` comes from a BIP-137 header
    (None for the rsv layout, which does not say)."""

    r: int
    s: int
    recovery_id: int
    compressed: bool | None


def _check_digest(digest: bytes) -> None:
    if len(digest) != DIGEST_SIZE:
        raise InvalidInput(
            f"ECDSA digest must be {DIGEST_SIZE} bytes, got {len(digest)}",
            field="digest",
            expected=DIGEST_SIZE,
            length=len(digest),
        )


def _check_range(r: int, s: int) -> None:
    for name, value in (("r", r), ("s", s)):
        if not 0 < value < CURVE_ORDER:
            raise MalformedSignature(f"signature {name} must be in [1, n-1]", field="signature", reason=f"{name}_range")


def _check_scalars(r: int, s: int) -> None:
    _check_range(r, s)
    if s > HALF_ORDER:
        raise InvalidSignature(
            "signature has a high S value (s > n/2); only low-S signatures are accepted",
            field="signature",
            reason="high_s",
        )


def parse_recoverable_signature(
    signature: bytes, layout: SignatureLayout = SignatureLayout.RSV
) -> RecoverableSignature:
    """Split a 65-byte signature in ``layout`` into r, s and recovery id, enforcing
    ranges and low-S; raises MalformedSignature / InvalidSignature with the reason."""
    if len(signature) != RECOVERABLE_SIGNATURE_SIZE:
        raise MalformedSignature(
            f"recoverable signature must be {RECOVERABLE_SIGNATURE_SIZE} bytes, got {len(signature)}",
            field="signature",
            reason="length",
            expected=RECOVERABLE_SIGNATURE_SIZE,
            length=len(signature),
        )
    if layout is SignatureLayout.BIP137:
        header, body = signature[0], signature[1:]
        if header not in _BIP137_HEADERS:
            raise MalformedSignature(
                f"BIP-137 header byte must be 27-42, got {header}", field="signature", reason="recovery_byte"
            )
        recovery_id, compressed = (header - 27) % 4, header >= _BIP137_FIRST_COMPRESSED
    else:
        body, v = signature[:64], signature[64]
        if v not in _RSV_RECOVERY_BYTES:
            raise MalformedSignature(
                f"recovery byte v must be 0, 1, 27 or 28, got {v}", field="signature", reason="recovery_byte"
            )
        recovery_id, compressed = _RSV_RECOVERY_BYTES[v], None
    r, s = int.from_bytes(body[:32], "big"), int.from_bytes(body[32:], "big")
    _check_scalars(r, s)
    return RecoverableSignature(r, s, recovery_id, compressed)


def recover_public_key(digest: bytes, signature: bytes, layout: SignatureLayout = SignatureLayout.RSV) -> bytes:
    """The 65-byte uncompressed public key that produced ``signature`` over the
    32-byte ``digest`` (see ``pqc.ecdsa_messages``), for checking a wallet signer."""
    _check_digest(digest)
    parsed = parse_recoverable_signature(signature, layout)
    rs = signature[1:] if layout is SignatureLayout.BIP137 else signature[:64]
    compact = rs + bytes((parsed.recovery_id,))
    try:
        key = PublicKey.from_signature_and_message(compact, digest, hasher=None)
    except ValueError:
        raise InvalidSignature(
            "no public key can be recovered from this signature", field="signature", reason="unrecoverable"
        ) from None
    return key.format(compressed=False)


def parse_public_key(public_key: bytes) -> bytes:
    """The 65-byte uncompressed form of a 33-byte compressed, 65-byte 0x04 or 64-byte
    raw key, checked to be on the curve; raises InvalidKeyFormat (hybrid 0x06/0x07
    encodings included)."""
    if len(public_key) == RAW_KEY_SIZE:
        public_key = b"\x04" + public_key
    valid_prefix = (len(public_key) == COMPRESSED_KEY_SIZE and public_key[0] in (2, 3)) or (
        len(public_key) == UNCOMPRESSED_KEY_SIZE and public_key[0] == 4
    )
    if valid_prefix:
        try:
            return PublicKey(public_key).format(compressed=False)
        except ValueError:
            pass
    raise InvalidKeyFormat(
        "secp256k1 public key must be 33 bytes (02/03), 65 bytes (04) or 64 bytes raw, on the curve",
        field="public_key",
        length=len(public_key),
    )


def evm_address(public_key: bytes) -> bytes:
    """The 20-byte EVM address of a secp256k1 public key (any encoding parse_public_key takes)."""
    return keccak256(parse_public_key(public_key)[1:])[-ADDRESS_SIZE:]


def _uncompressed(public_key: bytes) -> bytes:
    """``public_key`` in 65-byte 0x04 form; a key already in that form (what
    ``recover_public_key`` returns) is taken as it is, anything else is parsed."""
    if len(public_key) == UNCOMPRESSED_KEY_SIZE and public_key[0] == 4:
        return public_key
    return parse_public_key(public_key)


def _compressed(uncompressed: bytes) -> bytes:
    return bytes((2 + (uncompressed[-1] & 1),)) + uncompressed[1:33]


def _signer_ids(uncompressed: bytes, kind: ClaimedSigner) -> tuple[bytes, ...]:
    match kind:
        case ClaimedSigner.PUBLIC_KEY:
            return (uncompressed, _compressed(uncompressed), uncompressed[1:])
        case ClaimedSigner.EVM_ADDRESS:
            return (keccak256(uncompressed[1:])[-ADDRESS_SIZE:],)
        case ClaimedSigner.HASH160:
            return (hash160(_compressed(uncompressed)), hash160(uncompressed))


def require_signer(recovered: bytes, claimed: bytes, kind: ClaimedSigner = ClaimedSigner.PUBLIC_KEY) -> None:
    """Return None if the recovered key is the claimed signer, else raise
    InvalidSignature (InvalidKeyFormat if ``claimed`` is malformed). A public key
    matches in any of its three encodings; a hash160 matches either the compressed
    or the uncompressed key serialization: both belong to whoever holds the
    private key. A claim equal to the recovered (valid) key is valid itself, so it
    is parsed only when it does not match."""
    if kind is not ClaimedSigner.PUBLIC_KEY and len(claimed) != ADDRESS_SIZE:
        raise InvalidKeyFormat(
            f"{kind.value} must be {ADDRESS_SIZE} bytes, got {len(claimed)}",
            field="public_key",
            expected=ADDRESS_SIZE,
            length=len(claimed),
        )
    if claimed in _signer_ids(_uncompressed(recovered), kind):
        return
    if kind is ClaimedSigner.PUBLIC_KEY:
        parse_public_key(claimed)
    raise InvalidSignature(
        f"signature was made by a different key than the claimed {kind.value}",
        field="signature",
        reason="signer_mismatch",
    )


def signature_from_der(der: bytes) -> bytes:
    """The 64-byte r||s form of a strictly DER-encoded signature with r, s in
    [1, n-1], ready for ``verify``; raises MalformedSignature otherwise."""
    r, s = decode_der_signature(der)
    _check_range(r, s)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def _verify(public_key: bytes, digest: bytes, signature: bytes, *, allow_high_s: bool) -> None:
    _check_digest(digest)
    if len(signature) != COMPACT_SIGNATURE_SIZE:
        raise MalformedSignature(
            f"compact signature must be {COMPACT_SIGNATURE_SIZE} bytes, got {len(signature)}",
            field="signature",
            reason="length",
            expected=COMPACT_SIGNATURE_SIZE,
            length=len(signature),
        )
    key = PublicKey(parse_public_key(public_key))
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    if allow_high_s and s > HALF_ORDER:
        s = CURVE_ORDER - s
    _check_scalars(r, s)
    if not key.verify(encode_der_signature(r, s), digest, hasher=None):
        raise InvalidSignature("ECDSA signature does not verify", field="signature", reason="verification")


def verify(public_key: bytes, digest: bytes, signature: bytes) -> None:
    """Return None if the 64-byte r||s ``signature`` is a valid low-S ECDSA signature
    of the 32-byte ``digest`` under ``public_key``; raise otherwise."""
    _verify(public_key, digest, signature, allow_high_s=False)


def unsafe_verify_allowing_high_s(public_key: bytes, digest: bytes, signature: bytes) -> None:
    """Like ``verify`` but also accepts the malleable high-S twin of a valid
    signature (plain X9.62 rules). Unsafe for deduplication or replay protection;
    meant for conformance checks against generic ECDSA test vectors."""
    _verify(public_key, digest, signature, allow_high_s=True)
