"""Post-quantum and secp256k1 signature primitives: pure functions, no I/O."""

from pqc.algorithms import MAX_CONTEXT_BYTES, SPECS, Algorithm, AlgorithmSpec, Family, parse_algorithm
from pqc.ecdsa_messages import MessageScheme, message_digest, parse_scheme
from pqc.errors import (
    InvalidHex,
    InvalidInput,
    InvalidKeyFormat,
    InvalidSignature,
    MalformedSignature,
    PqcError,
    UnsupportedAlgorithm,
)
from pqc.hashes import hash160
from pqc.hexcodec import decode_hex
from pqc.mldsa import PreHash
from pqc.secp256k1 import (
    ClaimedSigner,
    RecoverableSignature,
    SignatureLayout,
    evm_address,
    parse_public_key,
    parse_recoverable_signature,
    recover_public_key,
    require_signer,
    signature_from_der,
    unsafe_verify_allowing_high_s,
)
from pqc.secp256k1 import verify as ecdsa_verify
from pqc.signatures import (
    KeyPair,
    generate_keypair,
    public_key_fingerprint,
    sign,
    verify,
    verify_prehashed,
)

__all__ = [
    "MAX_CONTEXT_BYTES",
    "SPECS",
    "Algorithm",
    "AlgorithmSpec",
    "ClaimedSigner",
    "Family",
    "InvalidHex",
    "InvalidInput",
    "InvalidKeyFormat",
    "InvalidSignature",
    "KeyPair",
    "MalformedSignature",
    "MessageScheme",
    "PqcError",
    "PreHash",
    "RecoverableSignature",
    "SignatureLayout",
    "UnsupportedAlgorithm",
    "decode_hex",
    "ecdsa_verify",
    "evm_address",
    "generate_keypair",
    "hash160",
    "message_digest",
    "parse_algorithm",
    "parse_public_key",
    "parse_recoverable_signature",
    "parse_scheme",
    "public_key_fingerprint",
    "recover_public_key",
    "require_signer",
    "sign",
    "signature_from_der",
    "unsafe_verify_allowing_high_s",
    "verify",
    "verify_prehashed",
]
