"""Solana addresses: base58 of a 32-byte ed25519 public key, or of an off-curve program-derived value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self

from solders.pubkey import Pubkey

from chains.codecs.address import Address, invalid
from chains.codecs.base58 import Base58Error, b58decode, b58encode
from chains.observation import AccountType
from chains.registry import Chain, Family, Network


@dataclass(frozen=True, slots=True)
class SolanaAddress(Address):
    """A Solana account: a wallet key when on the ed25519 curve, else a program-derived address.

    For a wallet the address is the public key itself; a program-derived address is off the
    curve, so no private key exists for it.
    """

    family = Family.SOLANA
    address_type = "solana"
    payload_sizes = (32,)

    @classmethod
    def decode(cls, text: str, chain: Chain = Chain.SOLANA, network: Network = Network.MAINNET) -> Self:
        """Accept base58 text (32 to 44 characters) that decodes to exactly 32 bytes."""
        if not 32 <= len(text) <= 44:
            raise invalid(chain, text, f"{len(text)} characters; Solana addresses have 32 to 44")
        try:
            key = b58decode(text)
        except Base58Error as exc:
            raise invalid(chain, text, str(exc)) from None
        return cls.from_text_payload(text, key, chain, network)

    def __str__(self) -> str:
        return b58encode(self.payload)

    @property
    def is_on_curve(self) -> bool:
        """True for an ed25519 point (a key that can sign); False for a program-derived address."""
        return Pubkey.from_bytes(self.payload).is_on_curve()

    @property
    def account_type(self) -> AccountType:
        """EOA for an on-curve key, PDA for an off-curve address (no private key exists)."""
        return AccountType.EOA if self.is_on_curve else AccountType.PDA
