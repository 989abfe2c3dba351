"""Parsing a caller's address, with or without a chain, and telling which chains it fits.

Rules (see docs/chains.md):

- With a chain, the address must be valid for that chain's family, or ``InvalidAddress``
  says why; an unknown chain is ``UnsupportedChain``.
- Without one, every family is tried. The families' formats do not overlap, except that an
  EVM address fits all 15 EVM chains: ``parse_address`` then picks ``ethereum`` and
  ``detect_chains`` lists all of them (ethereum first).
- Text is never trimmed: surrounding whitespace is an error, so what is scanned is exactly
  what the caller sent.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from chains.codecs.address import Address
from chains.codecs.bitcoin import BitcoinAddress
from chains.codecs.cosmos import CosmosAddress
from chains.codecs.evm import EvmAddress
from chains.codecs.solana import SolanaAddress
from chains.codecs.tron import TronAddress
from chains.errors import InvalidAddress
from chains.registry import CHAINS, Chain, Family, Network, chains_of, parse_chain

#: Longer text is refused before any decoding (the longest valid address, a 32-byte Cosmos
#: account, has 65 characters).
MAX_ADDRESS_LENGTH = 100

#: Each family's decoder: ``decode(text, chain, network) -> Address``.
DECODERS: MappingProxyType[Family, Callable[[str, Chain, Network], Address]] = MappingProxyType(
    {
        Family.EVM: EvmAddress.decode,
        Family.BITCOIN: BitcoinAddress.decode,
        Family.SOLANA: SolanaAddress.decode,
        Family.COSMOS: CosmosAddress.decode,
        Family.TRON: TronAddress.decode,
    }
)

#: How each family's addresses begin (the spec's validation table, plus Bitcoin's testnet and
#: regtest prefixes); bech32 prefixes also match upper case. Used only to pick which failures
#: to report.
_PREFIXES = MappingProxyType(
    {
        Family.EVM: ("0x",),
        Family.BITCOIN: ("1", "3", "bc1", "m", "n", "2", "tb1", "bcrt1"),
        Family.COSMOS: ("cosmos1",),
        Family.TRON: ("T",),
    }
)


def _check_text(address: object) -> str:
    if not isinstance(address, str):
        raise InvalidAddress(f"address must be a string, got {type(address).__name__}")
    if not address:
        raise InvalidAddress("address is empty")
    if len(address) > MAX_ADDRESS_LENGTH:
        raise InvalidAddress(
            f"address is {len(address)} characters; no supported chain has addresses over {MAX_ADDRESS_LENGTH}",
            address=address[:MAX_ADDRESS_LENGTH] + "…",
        )
    if address != address.strip():
        raise InvalidAddress("address has leading or trailing whitespace", address=address)
    return address


def _default_chain(family: Family) -> Chain:
    return chains_of(family)[0]


def _decode(address: str, network: Network, first_only: bool = False) -> tuple[list[Address], dict[Family, str]]:
    """Try the families in registry order; return the addresses that decoded (only the
    first with ``first_only``) and each failing family's reason."""
    found: list[Address] = []
    reasons: dict[Family, str] = {}
    for family, decode in DECODERS.items():
        try:
            found.append(decode(address, _default_chain(family), network))
        except InvalidAddress as exc:
            reasons[family] = str(exc.details.get("reason", exc))
            continue
        if first_only:
            break
    return found, reasons


def _plausible(address: str, family: Family) -> bool:
    if family is Family.SOLANA:
        return 32 <= len(address) <= 44
    prefixes = _PREFIXES[family]
    return address.startswith(prefixes) or address.lower().startswith(prefixes)


def detect_chains(address: str, network: Network = Network.MAINNET) -> list[Chain]:
    """Every supported chain ``address`` is valid on, in registry order; empty when none.

    An EVM address gives all 15 EVM chains, ``ethereum`` first: the way to get every EVM
    candidate when the caller did not name a chain.
    """
    try:
        found, _ = _decode(_check_text(address), network)
    except InvalidAddress:
        return []
    families = {a.family for a in found}
    return [chain for chain, info in CHAINS.items() if info.family in families]


def parse_address(address: str, chain: Chain | str | None = None, network: Network = Network.MAINNET) -> Address:
    """Validate ``address`` for ``chain`` (or detect the chain) and return its typed address.

    Raises ``UnsupportedChain`` (SCAN_002) for an unknown chain and ``InvalidAddress``
    (SCAN_001) with the reason otherwise. Without a chain an EVM address is taken as
    ``ethereum``; use ``detect_chains`` for all candidates.
    """
    text = _check_text(address)
    if chain is not None:
        target = chain if isinstance(chain, Chain) else parse_chain(chain)
        return DECODERS[target.info.family](text, target, network)
    found, reasons = _decode(text, network, first_only=True)
    if found:
        return found[0]
    plausible = [family for family in DECODERS if _plausible(text, family)]
    if not plausible:
        raise InvalidAddress(
            "address matches no supported format (EVM 0x…, Bitcoin 1…/3…/bc1…, Solana base58, "
            "Cosmos cosmos1…, Tron T…)",
            address=text,
        )
    raise InvalidAddress(
        "; ".join(f"not a valid {family} address: {reasons[family]}" for family in plausible),
        address=text,
        reasons={str(family): reasons[family] for family in plausible},
    )
