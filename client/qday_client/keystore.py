"""Ethereum keystore (Web3 Secret Storage, version 3) decryption.

The private key is AES-128-CTR encrypted under the first 16 bytes of a key
derived from the password with scrypt or PBKDF2-HMAC-SHA256; the MAC is
keccak256(derived[16:32] + ciphertext) and is checked (in constant time)
before decrypting, so a wrong password is reported as such.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from pqc.hashes import keccak256
from qday_client.errors import LocalError

#: Refuse KDF parameters needing more memory than this (a hostile file could ask for any amount).
MAX_SCRYPT_MEMORY = 1 << 30


def is_keystore(document: Any) -> bool:
    """Whether a parsed JSON document looks like a V3 keystore."""
    return isinstance(document, dict) and isinstance(document.get("crypto") or document.get("Crypto"), dict)


def _derive(kdf: str, params: dict[str, Any], password: bytes) -> bytes:
    salt = bytes.fromhex(params["salt"])
    if kdf == "scrypt":
        n, r, p = int(params["n"]), int(params["r"]), int(params["p"])
        needed = 128 * r * (n + p + 2)
        if needed > MAX_SCRYPT_MEMORY:
            raise LocalError(
                f"keystore scrypt parameters need {needed >> 20} MiB; refusing more than {MAX_SCRYPT_MEMORY >> 20} MiB"
            )
        return hashlib.scrypt(password, salt=salt, n=n, r=r, p=p, dklen=int(params["dklen"]), maxmem=needed + (1 << 20))
    if kdf == "pbkdf2":
        if params.get("prf") != "hmac-sha256":
            raise LocalError(f"unsupported keystore PBKDF2 function {params.get('prf')!r}")
        return hashlib.pbkdf2_hmac("sha256", password, salt, int(params["c"]), int(params["dklen"]))
    raise LocalError(f"unsupported keystore key derivation {kdf!r} (scrypt or pbkdf2)")


def decrypt(document: dict[str, Any], password: str) -> bytes:
    """The 32-byte secp256k1 private key in a V3 keystore; ``LocalError`` for a
    wrong password, a damaged file or an unsupported cipher or KDF."""
    if document.get("version") != 3 or not is_keystore(document):
        raise LocalError("not an Ethereum V3 keystore")
    crypto = document.get("crypto") or document["Crypto"]
    try:
        if crypto["cipher"] != "aes-128-ctr":
            raise LocalError(f"unsupported keystore cipher {crypto['cipher']!r} (aes-128-ctr)")
        derived = _derive(crypto["kdf"], crypto["kdfparams"], password.encode())
        ciphertext = bytes.fromhex(crypto["ciphertext"])
        expected_mac = bytes.fromhex(crypto["mac"])
        iv = bytes.fromhex(crypto["cipherparams"]["iv"])
    except (KeyError, TypeError, ValueError):
        raise LocalError("damaged keystore: a required field is missing or malformed") from None
    if len(derived) < 32 or not hmac.compare_digest(keccak256(derived[16:32] + ciphertext), expected_mac):
        raise LocalError("wrong keystore password (or a damaged keystore: its MAC does not match)")
    decryptor = Cipher(algorithms.AES(derived[:16]), modes.CTR(iv)).decryptor()
    return decryptor.update(ciphertext) + decryptor.finalize()
