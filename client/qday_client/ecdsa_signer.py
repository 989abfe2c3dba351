"""The secp256k1 half of a hybrid attestation: load a wallet key and sign.

A key comes from a hex string, ``env:VARIABLE`` (hex in an environment
variable, so it stays out of the process list and shell history), or a file:
an Ethereum V3 keystore (JSON), 32 raw bytes, or hex text. Message hashing is
``pqc.message_digest`` (the server's own code); signing is libsecp256k1
(coincurve), which always produces low-S signatures.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import coincurve

import pqc
from qday_client import keystore
from qday_client.errors import LocalError

PRIVATE_KEY_SIZE = 32
#: BIP-137 header for a compressed-key P2PKH signature: 31 + recovery id.
_BIP137_COMPRESSED_P2PKH = 31
#: Ethereum's v = 27 + recovery id.
_EIP191_V_OFFSET = 27


class EcdsaSigner:
    """A secp256k1 private key held in memory only; ``repr`` shows the address, never the key."""

    __slots__ = ("_key",)

    def __init__(self, private_key: bytes) -> None:
        if len(private_key) != PRIVATE_KEY_SIZE:
            raise LocalError(f"a secp256k1 private key is {PRIVATE_KEY_SIZE} bytes, got {len(private_key)}")
        try:
            self._key = coincurve.PrivateKey(private_key)
        except ValueError:
            raise LocalError("not a valid secp256k1 private key (zero or not below the group order)") from None

    def __repr__(self) -> str:
        return f"EcdsaSigner(address={self.address()!r})"

    def public_key(self, compressed: bool = True) -> bytes:
        """The SEC1 public key (33 bytes compressed, 65 uncompressed)."""
        return self._key.public_key.format(compressed=compressed)

    def address(self) -> str:
        """The EVM address (0x + 40 lowercase hex digits)."""
        return "0x" + pqc.evm_address(self.public_key(compressed=False)).hex()

    def sign(self, message: bytes, scheme: pqc.MessageScheme | str) -> bytes:
        """65 bytes as the server expects for ``scheme``: r‖s‖v (v = 27/28) for
        ``eip191`` and ``digest``; header‖r‖s (compressed P2PKH header) for ``bip137``."""
        chosen = pqc.parse_scheme(str(scheme))
        rs_recid = self._key.sign_recoverable(pqc.message_digest(chosen, message), hasher=None)
        rs, recovery_id = rs_recid[:64], rs_recid[64]
        if chosen is pqc.MessageScheme.BIP137:
            return bytes((_BIP137_COMPRESSED_P2PKH + recovery_id,)) + rs
        return rs + bytes((_EIP191_V_OFFSET + recovery_id,))


def _from_hex(text: str, origin: str) -> EcdsaSigner:
    try:
        return EcdsaSigner(pqc.decode_hex(text.strip(), field="ecdsaKey"))
    except pqc.PqcError:
        raise LocalError(f"{origin} is not a hex secp256k1 private key") from None


def load_signer(source: str, password: Callable[[], str]) -> EcdsaSigner:
    """The signer named by ``source`` (hex, ``env:VAR`` or a file path); ``password``
    is asked only for a keystore."""
    if source.startswith("env:"):
        value = os.environ.get(source[4:])
        if not value:
            raise LocalError(f"environment variable {source[4:]} is not set")
        return _from_hex(value, f"environment variable {source[4:]}")
    path = Path(source)
    if not path.is_file():
        return _from_hex(source, "the --ecdsa-key value (neither a file nor hex)")
    data = path.read_bytes()
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        document = None
    if keystore.is_keystore(document):
        return EcdsaSigner(keystore.decrypt(document, password()))
    if len(data) == PRIVATE_KEY_SIZE:
        return EcdsaSigner(data)
    try:
        return _from_hex(data.decode("ascii"), f"key file {path}")
    except UnicodeDecodeError:
        raise LocalError(f"key file {path} is neither a keystore, 32 raw bytes nor hex") from None
