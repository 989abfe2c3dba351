"""EVM addresses (the 15 EVM chains): ``0x`` and 40 hex digits, with the EIP-55 case checksum."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Self

from chains.codecs.address import Address, invalid
from chains.registry import Chain, Family, Network
from pqc.hashes import keccak256

_EVM_RE = re.compile(r"0x[0-9a-fA-F]{40}")


#: (hex digit, digest nibble) -> the digit in its EIP-55 case.
_CHECKSUM_CASE = MappingProxyType(
    {(c, d): c.upper() if int(d, 16) >= 8 else c for c in "0123456789abcdef" for d in "0123456789abcdef"}
)


@lru_cache(maxsize=65_536)
def eip55(account: bytes) -> str:
    """The EIP-55 mixed-case text of a 20-byte account, the form wallets display and check.

    A hex letter is upper case where the keccak-256 of the lowercase hex has a nibble of 8 or more.
    Remembered for the most recent 65,536 accounts: a request often needs the same text
    several times, and scans repeat the same addresses.
    """
    hex_ = account.hex()
    digest = keccak256(hex_.encode("ascii")).hex()
    # zip stops at the 40 address nibbles; the digest has 64
    return "0x" + "".join(map(_CHECKSUM_CASE.__getitem__, zip(hex_, digest, strict=False)))


@dataclass(frozen=True, slots=True)
class EvmAddress(Address):
    """A 20-byte EVM account on one of the EVM chains; canonical text is EIP-55."""

    family = Family.EVM
    address_type = "evm"
    payload_sizes = (20,)

    @classmethod
    def decode(cls, text: str, chain: Chain = Chain.ETHEREUM, network: Network = Network.MAINNET) -> Self:
        """Accept ``0x`` + 40 hex digits: all lower case, all upper case, or a correct EIP-55 mix."""
        if not _EVM_RE.fullmatch(text):
            raise invalid(chain, text, "expected '0x' followed by 40 hexadecimal digits")
        account = bytes.fromhex(text[2:])
        digits = text[2:]
        if digits != digits.lower() and digits != digits.upper() and text != eip55(account):
            raise invalid(chain, text, "bad EIP-55 checksum (mixed-case address whose case does not match)")
        return cls(account, chain, network)

    def __str__(self) -> str:
        return eip55(self.payload)
