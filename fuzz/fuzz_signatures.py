"""Fuzz the signature and key parsers of ``pqc``: 65-byte recoverable ECDSA signatures
(rsv and BIP-137), strict DER, secp256k1 public keys, public-key recovery and verification,
and ML-DSA/SLH-DSA verification of arbitrary key and signature bytes.

Passes: a value with its property (DER and public keys re-encode to themselves; a recovered
key verifies the signature it came from), or a ``PqcError`` whose code is documented in
``api.errors.ERROR_CODES``. Input: byte 0 picks the operation, byte 1 is its
flag (layout, algorithm), the rest its bytes.
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["pqc"]):
    from pqc import secp256k1, signatures
    from pqc.algorithms import SPECS, Algorithm
    from pqc.ecdsa_der import decode_der_signature, encode_der_signature
    from pqc.errors import PqcError
    from pqc.secp256k1 import SignatureLayout

from api.errors import ERROR_CODES, code_of
from fuzz.runner import run
from fuzz.seeds import hex_values

_LAYOUTS = (SignatureLayout.RSV, SignatureLayout.BIP137)
_ALGORITHMS = tuple(Algorithm)


def _recoverable(flag: int, data: bytes) -> None:
    parsed = secp256k1.parse_recoverable_signature(data, _LAYOUTS[flag & 1])
    assert 0 < parsed.r < secp256k1.CURVE_ORDER and 0 < parsed.s <= secp256k1.HALF_ORDER
    assert parsed.recovery_id in range(4)


def _der(flag: int, data: bytes) -> None:
    r, s = decode_der_signature(data)
    if r < 2**256 and s < 2**256:
        assert encode_der_signature(r, s) == data, data.hex()
    compact = secp256k1.signature_from_der(data)
    assert int.from_bytes(compact[:32], "big") == r and int.from_bytes(compact[32:], "big") == s


def _public_key(flag: int, data: bytes) -> None:
    uncompressed = secp256k1.parse_public_key(data)
    assert len(uncompressed) == 65 and uncompressed[0] == 4
    assert secp256k1.parse_public_key(uncompressed) == uncompressed
    if len(data) == 65:
        assert uncompressed == data


def _recover(flag: int, data: bytes) -> None:
    layout = _LAYOUTS[flag & 1]
    digest, signature = data[:32], data[32:]
    key = secp256k1.recover_public_key(digest, signature, layout)
    body = signature[:64] if layout is SignatureLayout.RSV else signature[1:]
    secp256k1.verify(key, digest, body)  # what was recovered must verify: raising here is a bug


def _verify_ecdsa(flag: int, data: bytes) -> None:
    secp256k1.verify(data[:33], data[33:65], data[65:])


def _verify_pq(flag: int, rest: bytes) -> None:
    algorithm = _ALGORITHMS[flag % len(_ALGORITHMS)]
    spec = SPECS[algorithm]
    if flag & 0x80:  # right sizes, so the backend itself gets the bytes
        key = rest[: spec.public_key_size].ljust(spec.public_key_size, b"\0")
        signature = rest[spec.public_key_size :][: spec.signature_size].ljust(spec.signature_size, b"\0")
        message = rest[spec.public_key_size + spec.signature_size :]
    else:
        key, signature, message = rest[:64], rest[64:], b""
    signatures.verify(algorithm, key, message, signature)


_OPERATIONS = (_recoverable, _der, _public_key, _recover, _verify_ecdsa, _verify_pq)


def test_one_input(data: bytes) -> None:
    """libFuzzer's entry point: one operation on one input."""
    if len(data) < 2:
        return
    try:
        _OPERATIONS[data[0] % len(_OPERATIONS)](data[1], data[2:])
    except PqcError as exc:
        assert code_of(exc) in ERROR_CODES, exc


def seeds() -> list[bytes]:
    """Wycheproof DER signatures and public keys, and recoverable-signature shapes."""
    values = hex_values("crypto/wycheproof/ecdsa_secp256k1_sha256_bitcoin_test.json", max_length=300)[:200]
    found = [bytes([op, 0]) + v for v in values for op in range(len(_OPERATIONS))]
    low = (1).to_bytes(32, "big")
    found += [bytes([0, 0]) + low + low + b"\x1b", bytes([3, 0]) + b"\x11" * 32 + low + low + b"\x00"]
    found += [bytes([5, 0x80 | i]) for i in range(len(_ALGORITHMS))]
    return found


if __name__ == "__main__":
    run("signatures", test_one_input, seeds())
