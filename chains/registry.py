"""The 19 chains the scan endpoint supports, with the static facts the service needs about each.

Everything here is constant data: category (as the spec groups chains), address family
(which codec validates the address), native coin and its decimals, and the EVM chain id.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType

from chains.errors import UnsupportedChain


class Category(enum.StrEnum):
    """The spec's grouping of chains on the scan endpoint."""

    MAJOR = "major"
    EVM_L2 = "evm_l2"
    ZK_L2 = "zk_l2"
    EVM_L1 = "evm_l1"
    NON_EVM = "non_evm"

    @property
    def label(self) -> str:
        """The category as the spec prints it (``EVM L2``, ``Non-EVM`` ...)."""
        return _CATEGORY_LABELS[self]


_CATEGORY_LABELS = MappingProxyType(
    {
        Category.MAJOR: "Major",
        Category.EVM_L2: "EVM L2",
        Category.ZK_L2: "ZK L2",
        Category.EVM_L1: "EVM L1",
        Category.NON_EVM: "Non-EVM",
    }
)


class Family(enum.StrEnum):
    """Address family: chains of one family share one address format and codec."""

    EVM = "evm"
    BITCOIN = "bitcoin"
    SOLANA = "solana"
    COSMOS = "cosmos"
    TRON = "tron"


class Network(enum.StrEnum):
    """Which network of a chain an address is for.

    ``testnet`` means any public test network (Bitcoin testnet3/testnet4/signet share
    their address formats). Only Bitcoin addresses differ between the two; every other
    family uses the same format on its test networks.
    """

    MAINNET = "mainnet"
    TESTNET = "testnet"


class Chain(enum.StrEnum):
    """A supported chain, by the identifier the scan endpoint accepts."""

    ETHEREUM = "ethereum"
    BITCOIN = "bitcoin"
    SOLANA = "solana"
    BASE = "base"
    ARBITRUM = "arbitrum"
    OPTIMISM = "optimism"
    POLYGON = "polygon"
    ZKSYNC = "zksync"
    LINEA = "linea"
    SCROLL = "scroll"
    MANTLE = "mantle"
    BLAST = "blast"
    SONIC = "sonic"
    GNOSIS = "gnosis"
    CELO = "celo"
    BSC = "bsc"
    AVALANCHE = "avalanche"
    COSMOS = "cosmos"
    TRON = "tron"

    @property
    def info(self) -> ChainInfo:
        """The static facts about this chain."""
        return CHAINS[self]


@dataclass(frozen=True, slots=True)
class ChainInfo:
    """Static facts about one chain: how to group it, validate its addresses and scale its coin."""

    chain: Chain
    category: Category
    family: Family
    symbol: str
    decimals: int
    evm_chain_id: int | None = None


_EVM = Family.EVM

#: Every supported chain, in the spec's order (ethereum first: it is the EVM default).
CHAINS: MappingProxyType[Chain, ChainInfo] = MappingProxyType(
    {
        info.chain: info
        for info in (
            ChainInfo(Chain.ETHEREUM, Category.MAJOR, _EVM, "ETH", 18, 1),
            ChainInfo(Chain.BITCOIN, Category.MAJOR, Family.BITCOIN, "BTC", 8),
            ChainInfo(Chain.SOLANA, Category.MAJOR, Family.SOLANA, "SOL", 9),
            ChainInfo(Chain.BASE, Category.EVM_L2, _EVM, "ETH", 18, 8453),
            ChainInfo(Chain.ARBITRUM, Category.EVM_L2, _EVM, "ETH", 18, 42161),
            ChainInfo(Chain.OPTIMISM, Category.EVM_L2, _EVM, "ETH", 18, 10),
            ChainInfo(Chain.POLYGON, Category.ZK_L2, _EVM, "POL", 18, 137),
            ChainInfo(Chain.ZKSYNC, Category.ZK_L2, _EVM, "ETH", 18, 324),
            ChainInfo(Chain.LINEA, Category.EVM_L2, _EVM, "ETH", 18, 59144),
            ChainInfo(Chain.SCROLL, Category.EVM_L2, _EVM, "ETH", 18, 534352),
            ChainInfo(Chain.MANTLE, Category.EVM_L2, _EVM, "MNT", 18, 5000),
            ChainInfo(Chain.BLAST, Category.EVM_L2, _EVM, "ETH", 18, 81457),
            ChainInfo(Chain.SONIC, Category.EVM_L2, _EVM, "S", 18, 146),
            ChainInfo(Chain.GNOSIS, Category.EVM_L1, _EVM, "xDAI", 18, 100),
            ChainInfo(Chain.CELO, Category.EVM_L1, _EVM, "CELO", 18, 42220),
            ChainInfo(Chain.BSC, Category.EVM_L1, _EVM, "BNB", 18, 56),
            ChainInfo(Chain.AVALANCHE, Category.EVM_L1, _EVM, "AVAX", 18, 43114),
            ChainInfo(Chain.COSMOS, Category.NON_EVM, Family.COSMOS, "ATOM", 6),
            ChainInfo(Chain.TRON, Category.NON_EVM, Family.TRON, "TRX", 6),
        )
    }
)


def parse_chain(name: str) -> Chain:
    """Map a caller's chain identifier to a ``Chain``, or raise ``UnsupportedChain`` (SCAN_002).

    Identifiers are the spec's lowercase values; case is ignored, surrounding whitespace is not.
    """
    try:
        return Chain(name.lower())
    except ValueError:
        raise UnsupportedChain(
            f"unsupported chain {name!r}; supported chains: {', '.join(CHAINS)}",
            chain=name,
            supported=list(CHAINS),
        ) from None


_FAMILY_CHAINS: MappingProxyType[Family, tuple[Chain, ...]] = MappingProxyType(
    {family: tuple(c for c, info in CHAINS.items() if info.family is family) for family in Family}
)


def chains_of(family: Family) -> tuple[Chain, ...]:
    """The supported chains whose addresses belong to ``family``, in registry order."""
    return _FAMILY_CHAINS[family]


#: The chains that share the EVM address format, ethereum first.
EVM_CHAINS: tuple[Chain, ...] = chains_of(Family.EVM)
