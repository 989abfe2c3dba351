"""Hash functions that keys, addresses and Bitcoin consensus are defined with (shared by pqc and chains)."""

from __future__ import annotations

import hashlib

import sha3  # safe-pysha3: Keccak-256 in C, ~7x faster than pycryptodome's wrapper here
from Crypto.Hash import RIPEMD160


def sha256(data: bytes) -> bytes:
    """SHA-256, the base of base58check checksums, script hashes and Solana PDAs."""
    return hashlib.sha256(data).digest()


def sha256d(data: bytes) -> bytes:
    """Double SHA-256: Bitcoin txids, block hashes and base58check checksums."""
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


def _openssl_ripemd160() -> bool:
    try:
        hashlib.new("ripemd160")
    except ValueError:  # OpenSSL 3 builds that keep RIPEMD-160 in the legacy provider only
        return False
    return True


if _openssl_ripemd160():

    def hash160(data: bytes) -> bytes:
        """RIPEMD-160 of SHA-256: the key and script commitment of P2PKH/P2SH/P2WPKH and Cosmos.
        (OpenSSL's RIPEMD-160, ~10x faster per call than pycryptodome's: the exposure index
        hashes every revealed key twice.)"""
        return hashlib.new("ripemd160", hashlib.sha256(data).digest()).digest()

else:

    def hash160(data: bytes) -> bytes:
        """RIPEMD-160 of SHA-256: the key and script commitment of P2PKH/P2SH/P2WPKH and Cosmos."""
        return RIPEMD160.new(hashlib.sha256(data).digest()).digest()


def keccak256(data: bytes) -> bytes:
    """Keccak-256 (pre-standard SHA-3): EVM/Tron addresses and the EIP-55 checksum."""
    digest: bytes = sha3.keccak_256(data).digest()  # sha3 ships no type information
    return digest
