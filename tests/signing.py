"""Client-side signing for tests: what a wallet and a PQ signer would send.

EIP-191 signatures come from eth-account (an independent implementation) and
BIP-137 ones are built with libsecp256k1 through coincurve. ``registered_signer`` and
``hybrid_body`` make the key and the ``/v1/sign/hybrid`` (or ``/v1/verify``) body the
hybrid-signing tests of the API and of the dashboard share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import coincurve
import httpx
from eth_account import Account
from eth_account.messages import encode_defunct

import pqc

if TYPE_CHECKING:
    from tests.support import Tenant


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


async def registered_signer(
    client: httpx.AsyncClient, tenant: Tenant, algorithm: str = "ml-dsa-65", key: str = "secret_live"
) -> PqSigner:
    """A PQ key pair generated for ``tenant`` through ``POST /v1/keys/generate`` with the API
    key named ``key`` (so registered in that key's environment), held as the client would
    hold it: what a hybrid signature's PQ half must be made with to verify."""
    r = await client.post(
        "/v1/keys/generate", json={"algorithm": algorithm, "chain": "ethereum"}, headers=tenant.auth(key)
    )
    assert r.status_code == 201, r.text
    data = r.json()["data"]
    keypair = pqc.KeyPair(
        pqc.parse_algorithm(algorithm),
        bytes.fromhex(data["publicKey"]),
        bytes.fromhex(data["privateKey"]),
        bytes.fromhex(data["seed"]),
    )
    return PqSigner(algorithm, keypair)


def hybrid_body(message: bytes, ecdsa_key: bytes, pq: PqSigner, **extra: Any) -> dict[str, Any]:
    """The JSON body of ``POST /v1/sign/hybrid`` (or ``/v1/verify``) for ``message``: an
    EIP-191 signature by ``ecdsa_key`` with its public key and a signature by ``pq``;
    ``extra`` adds or overrides fields (chain, scheme, strict, ...)."""
    return {
        "message": "0x" + message.hex(),
        "ecdsaSignature": eip191_signature(ecdsa_key, message).hex(),
        "ecdsaPublicKey": public_key(ecdsa_key).hex(),
        "pqcSignature": pq.sign(message).hex(),
        "pqcPublicKey": pq.public_hex,
        "algorithm": pq.algorithm,
        **extra,
    }
