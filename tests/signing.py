"""Client-side signing for tests: what a wallet and a PQ signer would send.

EIP-191 signatures come from eth-account (an independent implementation) and
BIP-137 ones are built with libsecp256k1 through coincurve.
"""

from __future__ import annotations

from dataclasses import dataclass

import coincurve
from eth_account import Account
from eth_account.messages import encode_defunct

import pqc


def eip191_signature(private_key: bytes, message: bytes) -> bytes:
    """r‖s‖v (v = 27/28) as MetaMask's personal_sign produces."""
    signed = Account.sign_message(encode_defunct(primitive=message), private_key=private_key)
    return bytes(signed.signature)


def bip137_signature(private_key: bytes, message: bytes, compressed: bool = True) -> bytes:
    """header‖r‖s as Bitcoin Core's signmessage produces (base64-decoded)."""
    digest = pqc.message_digest("bip137", message)
    rs_recid = coincurve.PrivateKey(private_key).sign_recoverable(digest, hasher=None)
    header = 27 + rs_recid[64] + (4 if compressed else 0)
    return bytes((header,)) + rs_recid[:64]


def digest_signature(private_key: bytes, digest: bytes) -> bytes:
    """r‖s‖v (v = 0/1) over a raw 32-byte digest."""
    return coincurve.PrivateKey(private_key).sign_recoverable(digest, hasher=None)


def public_key(private_key: bytes, compressed: bool = True) -> bytes:
    """The secp256k1 public key of a private key."""
    return coincurve.PrivateKey(private_key).public_key.format(compressed=compressed)


def evm_address(private_key: bytes) -> str:
    """The checksummed EVM address of a private key."""
    return Account.from_key(private_key).address


@dataclass
class PqSigner:
    """A post-quantum key pair held by the client."""

    algorithm: str
    keypair: pqc.KeyPair

    @classmethod
    def new(cls, algorithm: str = "ml-dsa-65") -> PqSigner:
        return cls(algorithm, pqc.generate_keypair(algorithm))

    @property
    def public_hex(self) -> str:
        return self.keypair.public_key.hex()

    def sign(self, message: bytes, context: bytes = b"") -> bytes:
        """ML-DSA signs from the seed (fast path); SLH-DSA from its secret key."""
        ml_dsa = pqc.SPECS[self.keypair.algorithm].family is pqc.Family.ML_DSA
        key = self.keypair.seed if ml_dsa else self.keypair.private_key
        return pqc.sign(self.algorithm, key, message, context)
