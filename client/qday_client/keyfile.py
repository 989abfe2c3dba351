"""Post-quantum key pairs made and kept on this machine.

``generate`` uses the same ``pqc`` code as the server, so a local key has the
server's encodings (docs/crypto.md): the FIPS 204 expanded ``privateKey`` plus
the 32-byte ``seed`` for ML-DSA, the 64-byte FIPS 205 key plus 48-byte seed for
SLH-DSA. Nothing here talks to the network.

A key file is JSON (``format: qday-pq-key-v1``, hex fields), created with mode
0600 and never overwritten unless asked. ``load`` refuses a file that group or
others can read (as ssh does) and one whose seed does not re-create its keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import pqc
from qday_client.errors import LocalError
from qday_client.models import GeneratedKey
from qday_client.private_files import read_private, write_private

KEY_FILE_FORMAT = "qday-pq-key-v1"
_FIELDS = ("algorithm", "publicKey", "privateKey", "seed")


def generate(algorithm: str = "ml-dsa-65") -> pqc.KeyPair:
    """A fresh key pair from this machine's CSPRNG (``PQC_001`` family error for an unknown algorithm)."""
    try:
        return pqc.generate_keypair(algorithm)
    except pqc.PqcError as exc:
        raise LocalError(exc.message) from None


def sign(keypair: pqc.KeyPair, message: bytes, context: bytes = b"") -> bytes:
    """A pure-mode FIPS 204/205 signature with ``context`` (ML-DSA signs from the seed, the fast path)."""
    ml_dsa = pqc.SPECS[keypair.algorithm].family is pqc.Family.ML_DSA
    return pqc.sign(keypair.algorithm, keypair.seed if ml_dsa else keypair.private_key, message, context)


def _document(keypair: pqc.KeyPair) -> bytes:
    return (
        json.dumps(
            {
                "format": KEY_FILE_FORMAT,
                "algorithm": keypair.algorithm.value,
                "publicKey": keypair.public_key.hex(),
                "privateKey": keypair.private_key.hex(),
                "seed": keypair.seed.hex(),
                "fingerprint": pqc.public_key_fingerprint(keypair.public_key),
            },
            indent=2,
        ).encode()
        + b"\n"
    )


def save(keypair: pqc.KeyPair, path: Path, *, overwrite: bool = False) -> Path:
    """Write the key pair to ``path`` readable by its owner only (0600); an
    existing file is an error unless ``overwrite``."""
    write_private(path, _document(keypair), overwrite=overwrite)
    return path


def load(path: Path) -> pqc.KeyPair:
    """The key pair in a key file, after checking its permissions and that its
    seed re-creates the stored public and private keys."""
    text = read_private(path)
    try:
        doc = json.loads(text)
        if doc.get("format") != KEY_FILE_FORMAT or not all(isinstance(doc.get(f), str) for f in _FIELDS):
            raise ValueError("not a qday key file")
        stored = pqc.KeyPair(
            pqc.parse_algorithm(doc["algorithm"]),
            bytes.fromhex(doc["publicKey"]),
            bytes.fromhex(doc["privateKey"]),
            bytes.fromhex(doc["seed"]),
        )
    except (ValueError, AttributeError, pqc.PqcError):
        raise LocalError(f"{path} is not a {KEY_FILE_FORMAT} key file") from None
    return _checked(stored, str(path))


def _checked(stored: pqc.KeyPair, origin: str) -> pqc.KeyPair:
    try:
        again = pqc.generate_keypair(stored.algorithm, stored.seed)
    except pqc.PqcError:
        raise LocalError(f"{origin}: the seed has the wrong length for {stored.algorithm.value}") from None
    if again.public_key != stored.public_key or again.private_key != stored.private_key:
        raise LocalError(f"{origin}: the seed does not re-create the stored keys (damaged key file?)")
    return stored


def from_generated(key: GeneratedKey) -> pqc.KeyPair:
    """The key pair of a server-generated (self-custody, hex) key, checked like a key file,
    so keys made by ``POST /v1/keys/generate`` can be saved and used locally."""
    if key.format != "hex":
        raise LocalError(f"expected a hex-format key, got {key.format}")
    stored = pqc.KeyPair(
        pqc.parse_algorithm(key.algorithm),
        bytes.fromhex(key.public_key),
        bytes.fromhex(key.private_key),
        bytes.fromhex(key.seed),
    )
    return _checked(stored, f"server key {key.id}")
