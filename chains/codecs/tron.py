"""Tron addresses: base58check of 0x41 and the 20-byte account id (``T…``, 34 characters)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self

from chains.codecs.address import Address, invalid
from chains.codecs.base58 import Base58Error, b58check_decode, b58check_encode
from chains.registry import Chain, Family, Network

TRON_PREFIX = 0x41


@dataclass(frozen=True, slots=True)
class TronAddress(Address):
    """A Tron account (mainnet and the Shasta/Nile testnets share the ``T`` prefix)."""

    family = Family.TRON
    address_type = "tron"
    payload_sizes = (20,)

    @classmethod
    def decode(cls, text: str, chain: Chain = Chain.TRON, network: Network = Network.MAINNET) -> Self:
        """Accept only the base58check ``T…`` form (not the 41… or 0x… hex forms some APIs take)."""
        try:
            raw = b58check_decode(text)
        except Base58Error as exc:
            raise invalid(chain, text, str(exc)) from None
        if raw[0] != TRON_PREFIX:
            raise invalid(chain, text, f"version byte is 0x{raw[0]:02x}, Tron requires 0x41")
        return cls.from_text_payload(text, raw[1:], chain, network)

    def __str__(self) -> str:
        return b58check_encode(bytes([TRON_PREFIX]) + self.payload)
