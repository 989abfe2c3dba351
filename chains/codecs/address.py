"""The base of every typed address class (after python-bitcoinlib's ``wallet.py`` cascade).

An ``Address`` is a validated value: it can only be built from a payload of the right size
for its family, and ``str(address)`` is the canonical text (EIP-55 case, lowercase bech32 ...),
so ``decode(str(a)) == a`` for every address.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Self

from chains.errors import InvalidAddress
from chains.observation import AccountType
from chains.registry import Chain, Family, Network


@dataclass(frozen=True, slots=True)
class Address(ABC):
    """A validated address of one chain: its payload bytes, chain and network.

    ``payload`` is the account id the text encodes: the 20-byte EVM/Tron/Cosmos account,
    the 32-byte Solana key, the Bitcoin key/script hash or witness program.
    """

    payload: bytes
    chain: Chain
    network: Network

    family: ClassVar[Family]
    address_type: ClassVar[str]
    payload_sizes: ClassVar[tuple[int, ...]]

    def __post_init__(self) -> None:
        if self.chain.info.family is not self.family:
            raise InvalidAddress(
                f"a {self.family} address cannot belong to chain {self.chain}",
                chain=str(self.chain),
            )
        if len(self.payload) not in self.payload_sizes:
            sizes = " or ".join(map(str, self.payload_sizes))
            raise InvalidAddress(
                f"{self.address_type} payload is {len(self.payload)} bytes; expected {sizes}",
                chain=str(self.chain),
            )

    @classmethod
    def from_text_payload(cls, text: str, payload: bytes, chain: Chain, network: Network) -> Self:
        """Build the address from a payload decoded out of ``text``; a bad payload is an error about ``text``."""
        try:
            return cls(payload, chain, network)
        except InvalidAddress as exc:
            raise invalid(chain, text, exc.message) from None

    @classmethod
    @abstractmethod
    def decode(cls, text: str, chain: Chain, network: Network = Network.MAINNET) -> Self:
        """Validate ``text`` as an address of ``chain`` on ``network``; raise ``InvalidAddress`` saying why."""

    @abstractmethod
    def __str__(self) -> str:
        """The canonical text of the address."""

    @property
    def account_type(self) -> AccountType | None:
        """The account kind when the address alone tells it; None when it takes chain state."""
        return None


def invalid(chain: Chain, text: str, reason: str) -> InvalidAddress:
    """An ``InvalidAddress`` for ``text`` on ``chain``, with the reason in message and details."""
    return InvalidAddress(f"invalid {chain} address: {reason}", chain=str(chain), address=text, reason=reason)
