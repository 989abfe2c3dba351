"""The flows that need local keys: proof-of-possession registration of a
post-quantum key and hybrid (ECDSA + ML-DSA) attestations.

Both private keys stay in this process; only public keys, the message and the
two signatures are sent.
"""

from __future__ import annotations

from typing import Any

import pqc
from qday_client import keyfile
from qday_client.client import QdayClient
from qday_client.ecdsa_signer import EcdsaSigner
from qday_client.errors import LocalError
from qday_client.models import Attestation, PqKey

#: ECDSA message scheme when the caller names none (as the server defaults, docs/api.md).
_DEFAULT_SCHEMES = {"ethereum": "eip191", "polygon": "eip191", "avalanche": "eip191", "bitcoin": "bip137"}


def default_scheme(chain: str) -> str:
    """The wallet message scheme of ``chain``; chains without one must be told."""
    try:
        return _DEFAULT_SCHEMES[chain]
    except KeyError:
        raise LocalError(
            f"chain {chain!r} has no default ECDSA message scheme; pass one (eip191, bip137, digest)"
        ) from None


async def register_key(client: QdayClient, keypair: pqc.KeyPair, chain: str) -> PqKey:
    """Register a local public key: fetch the server's challenge, sign it with the
    returned context, send the signature (``POST /v1/keys/register``)."""
    public_key = keypair.public_key.hex()
    challenge = await client.registration_challenge(keypair.algorithm.value, public_key)
    signature = keyfile.sign(keypair, challenge.challenge.encode(), bytes.fromhex(challenge.context))
    return await client.register_key(keypair.algorithm.value, chain, public_key, challenge.challenge, signature.hex())


async def attest(
    client: QdayClient,
    signer: EcdsaSigner,
    keypair: pqc.KeyPair,
    *,
    chain: str = "ethereum",
    scheme: str | None = None,
    message: bytes | None = None,
    context: bytes = b"",
    metadata: dict[str, Any] | None = None,
) -> Attestation:
    """Create a hybrid attestation. Without ``message`` it is strict: the server's
    single-use statement naming both keys is fetched and signed (replay-proof);
    with one, that message is signed as given."""
    chosen = scheme or default_scheme(chain)
    signer_key = signer.public_key().hex()
    pqc_public_key = keypair.public_key.hex()
    strict = message is None
    if message is None:
        statement = await client.attestation_challenge(signer_key, pqc_public_key, keypair.algorithm.value, chain)
        message = statement.statement.encode()
    return await client.sign_hybrid(
        message=message.hex(),
        ecdsa_signature=signer.sign(message, chosen).hex(),
        ecdsa_public_key=signer_key,
        pqc_signature=keyfile.sign(keypair, message, context).hex(),
        pqc_public_key=pqc_public_key,
        algorithm=keypair.algorithm.value,
        chain=chain,
        ecdsa_scheme=chosen,
        context=context.hex(),
        strict=strict,
        metadata=metadata,
    )
