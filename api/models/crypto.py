"""Models of the key, attestation and verification endpoints."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from api.models.accounts import Out, Strict, Timestamp

Hex = Annotated[str, Meta(max_length=40_000, description="Hex, with or without 0x")]
Algorithm = Annotated[
    str,
    Meta(
        max_length=40,
        description="ml-dsa-44, ml-dsa-65, ml-dsa-87, slh-dsa-128s (= slh-dsa-sha2-128s) or slh-dsa-shake-128s",
    ),
]
Chain = Annotated[str, Meta(max_length=40, description="Chain identifier")]
Scheme = Annotated[str, Meta(max_length=20, description="ECDSA message scheme: eip191, bip137 or digest")]
Signer = Annotated[
    str,
    Meta(
        max_length=200,
        description="secp256k1 public key (hex: 33, 65 or 64 bytes), EVM address, or Bitcoin P2PKH/P2WPKH address",
    ),
]
Context = Annotated[
    str, Meta(max_length=512, description="FIPS 204/205 context string, hex, 0-255 bytes (default empty)")
]


class GenerateKeyRequest(Strict):
    """Body of POST /v1/keys/generate."""

    algorithm: Algorithm
    chain: Chain
    format: Literal["hex", "base64", "raw"] = "hex"
    custody: Annotated[
        Literal["self", "managed"],
        Meta(
            description="self (default): the key pair is returned once and not kept. managed (Pro plan and above, "
            "ML-DSA only): the private key stays in the service's custody and is never returned"
        ),
    ] = "self"
    private_key_form: Annotated[
        Literal["expanded", "seed"],
        Meta(
            description="expanded (default): privateKey is the FIPS 204 expanded secret key (or the FIPS 205 SK), "
            "which every implementation accepts. seed (ML-DSA only): privateKey is the 32-byte seed, "
            "the seed form of RFC 9881 (OpenSSL 3.5+, Go, BoringSSL, pyca/cryptography); faster, "
            "and the seed re-creates the expanded key anywhere"
        ),
    ] = "expanded"


class GeneratedKeyOut(Out, tag_field="custody", tag="self"):
    """A generated key pair; the private key and seed are shown only here."""

    id: str
    algorithm: str
    chain: str
    public_key: str
    private_key: Annotated[
        str,
        Meta(
            description="FIPS 204 expanded secret key (ML-DSA; the 32-byte seed with "
            "privateKeyForm=seed) or FIPS 205 SK (SLH-DSA)"
        ),
    ]
    seed: Annotated[str, Meta(description="Seed that re-creates the key pair (ML-DSA: 32-byte xi; SLH-DSA: 48 bytes)")]
    fingerprint: Annotated[str, Meta(description="SHA-256 of the public key, hex")]
    format: Literal["hex", "base64"]
    created_at: Timestamp


class RegistrationChallengeRequest(Strict):
    """Body of POST /v1/keys/register/challenge."""

    algorithm: Algorithm
    public_key: Hex


class RegistrationChallengeOut(Out):
    """Text to sign with the private key being registered (UTF-8 bytes, given context)."""

    challenge: str
    context: Annotated[str, Meta(description="Hex of the FIPS 204/205 context to sign with")]
    expires_at: Timestamp


class RegisterKeyRequest(Strict):
    """Body of POST /v1/keys/register (bring your own key, with proof of possession)."""

    algorithm: Algorithm
    chain: Chain
    public_key: Hex
    challenge: Annotated[str, Meta(max_length=2000)]
    signature: Hex


class PqKeyOut(Out):
    """A post-quantum public key registered to the account."""

    id: str
    algorithm: str
    chain: str
    public_key: str
    fingerprint: str
    origin: Literal["generated", "registered"]
    created_at: Timestamp


class StatementRequest(Strict):
    """Body of POST /v1/attestations/challenge."""

    ecdsa_public_key: Signer
    pqc_public_key: Hex
    algorithm: Algorithm
    chain: Chain = "ethereum"


class StatementOut(Out):
    """A single-use statement for strict-mode attestations: sign its UTF-8 bytes
    with both keys and send it hex-encoded as ``message`` with ``strict: true``."""

    id: str
    statement: str
    message: Annotated[str, Meta(description="The statement as hex, ready for the message field")]
    expires_at: Timestamp


class HybridRequest(Strict):
    """Body of POST /v1/sign/hybrid."""

    message: Hex
    ecdsa_signature: Hex
    ecdsa_public_key: Signer
    pqc_signature: Hex
    pqc_public_key: Hex
    algorithm: Algorithm
    chain: Chain = "ethereum"
    metadata: dict[str, Any] = {}
    ecdsa_scheme: Scheme | None = None
    context: Context = ""
    strict: bool = False


class AttestationOut(Out):
    """A stored hybrid attestation (signatures are not returned)."""

    id: str
    status: Literal["verified"]
    message: str
    ecdsa_public_key: str
    pqc_public_key: str
    algorithm: str
    chain: str
    metadata: dict[str, Any]
    ecdsa_scheme: str
    context: str
    strict: bool
    created_at: Timestamp


class VerifyRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Body of POST /v1/verify, in one of three forms: ``attestationId``; the raw
    hybrid components; or the managed-custody form ``public_key``, ``message``,
    ``signature``, ``algorithm`` (snake_case as the spec shows)."""

    attestation_id: str | None = msgspec.field(default=None, name="attestationId")
    message: Hex | None = None
    ecdsa_signature: Hex | None = msgspec.field(default=None, name="ecdsaSignature")
    ecdsa_public_key: Signer | None = msgspec.field(default=None, name="ecdsaPublicKey")
    pqc_signature: Hex | None = msgspec.field(default=None, name="pqcSignature")
    pqc_public_key: Hex | None = msgspec.field(default=None, name="pqcPublicKey")
    algorithm: Algorithm | None = None
    chain: Chain | None = None
    ecdsa_scheme: Scheme | None = msgspec.field(default=None, name="ecdsaScheme")
    context: Context | None = None
    public_key: Hex | None = None
    signature: Hex | None = None


class VerificationOut(Out):
    """The outcome of a verification: ``valid`` only when every check passed."""

    valid: bool
    ecdsa_valid: bool | None
    pqc_valid: bool
    attestation_id: str | None
    algorithm: str
    chain: str | None
    verified_at: Timestamp
