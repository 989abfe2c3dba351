"""Cosmos Hub accounts: bech32 (not bech32m) under the ``cosmos`` HRP, 20 or 32 bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self

from chains.codecs.address import Address, invalid
from chains.codecs.bech32 import Bech32Error, Encoding, decode_bytes, encode_bytes
from chains.registry import Chain, Family, Network

COSMOS_HRP = "cosmos"


@dataclass(frozen=True, slots=True)
class CosmosAddress(Address):
    """A Cosmos Hub account.

    20 bytes for a key account (ripemd160(sha256(pubkey))); 32 bytes for module and
    interchain accounts, which have no key of their own.
    """

    family = Family.COSMOS
    address_type = "cosmos"
    payload_sizes = (20, 32)

    @classmethod
    def decode(cls, text: str, chain: Chain = Chain.COSMOS, network: Network = Network.MAINNET) -> Self:
        """Accept ``cosmos1…`` bech32 text of a 20- or 32-byte account (testnets use the same HRP)."""
        try:
            hrp, payload = decode_bytes(text, Encoding.BECH32)
        except Bech32Error as exc:
            raise invalid(chain, text, str(exc)) from None
        if hrp != COSMOS_HRP:
            raise invalid(chain, text, f"human-readable part is {hrp!r}, the Cosmos Hub uses {COSMOS_HRP!r}")
        return cls.from_text_payload(text, payload, chain, network)

    def __str__(self) -> str:
        return encode_bytes(COSMOS_HRP, self.payload, Encoding.BECH32)
