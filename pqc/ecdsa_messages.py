"""How wallets turn a message into the 32-byte digest they sign with secp256k1.

Kept apart from signature recovery (as eth-account's ``messages.py`` is): the
caller picks a scheme, gets the digest, then recovers or verifies over it.

* ``eip191``: Ethereum ``personal_sign`` (EIP-191 version 0x45):
  keccak256(b"\\x19Ethereum Signed Message:\\n" + decimal length + message).
* ``bip137``: Bitcoin Core ``signmessage``: SHA256d(varint(24) +
  b"Bitcoin Signed Message:\\n" + varint(len(message)) + message).
* ``digest``: the message already is the 32-byte hash (no further hashing).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from pqc.errors import InvalidInput
from pqc.hashes import keccak256, sha256d

_EIP191_PREFIX: Final = b"\x19Ethereum Signed Message:\n"
_BITCOIN_MAGIC: Final = b"Bitcoin Signed Message:\n"
DIGEST_SIZE: Final = 32


class MessageScheme(StrEnum):
    """Message-hashing conventions accepted for ECDSA signatures."""

    EIP191 = "eip191"
    BIP137 = "bip137"
    DIGEST = "digest"


def compact_size(n: int) -> bytes:
    """Bitcoin's CompactSize (varint) encoding of a length."""
    if n < 0xFD:
        return bytes((n,))
    if n <= 0xFFFF:
        return b"\xfd" + n.to_bytes(2, "little")
    if n <= 0xFFFF_FFFF:
        return b"\xfe" + n.to_bytes(4, "little")
    return b"\xff" + n.to_bytes(8, "little")


def parse_scheme(name: str) -> MessageScheme:
    """The MessageScheme for a name; raises InvalidInput listing the accepted names."""
    try:
        return MessageScheme(name.lower())
    except ValueError:
        raise InvalidInput(
            f"unknown message scheme {name[:40]!r}", field="scheme", supported=[s.value for s in MessageScheme]
        ) from None


def message_digest(scheme: MessageScheme | str, message: bytes) -> bytes:
    """The 32-byte digest a wallet signs for ``message`` under ``scheme``, so a
    signature from MetaMask, Bitcoin Core or a raw signer can be checked alike."""
    match parse_scheme(scheme):
        case MessageScheme.EIP191:
            return keccak256(_EIP191_PREFIX + str(len(message)).encode() + message)
        case MessageScheme.BIP137:
            framed = compact_size(len(_BITCOIN_MAGIC)) + _BITCOIN_MAGIC + compact_size(len(message)) + message
            return sha256d(framed)
        case MessageScheme.DIGEST:
            if len(message) != DIGEST_SIZE:
                raise InvalidInput(
                    f"a 'digest' message must be exactly {DIGEST_SIZE} bytes, got {len(message)}",
                    field="message",
                    expected=DIGEST_SIZE,
                    length=len(message),
                )
            return message
