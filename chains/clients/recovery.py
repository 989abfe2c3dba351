"""Public-key recovery from secp256k1 transaction signatures (EVM and Tron).

An ECDSA signature with its recovery id determines the signer's public key. That is why
one signed transaction puts an account's key on chain. The recovered key is only trusted
when it hashes to the account that was asked about: keccak-256 of the 64-byte point, last
20 bytes, which is the EVM account and the Tron account after its 0x41 prefix.
"""

from __future__ import annotations

from coincurve import PublicKey

from pqc.errors import PqcError
from pqc.secp256k1 import evm_address, recover_public_key


def recover_account_key(digest: bytes, r: int, s: int, recovery_id: int, account: bytes) -> bytes | None:
    """The compressed (33-byte) key that signed ``digest``, if it belongs to ``account``.

    None when the signature is out of range (including high S, which neither chain
    accepts), recovery fails, or the key is another account's (e.g. a Tron account
    controlled by a permission key of another address).
    """
    if not (0 <= r < 2**256 and 0 <= s < 2**256 and recovery_id in (0, 1)):
        return None
    signature = r.to_bytes(32, "big") + s.to_bytes(32, "big") + bytes([recovery_id])
    try:
        key = recover_public_key(digest, signature)
    except PqcError:
        return None
    return PublicKey(key).format(compressed=True) if evm_address(key) == account else None
