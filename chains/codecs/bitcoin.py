"""Bitcoin addresses: base58check P2PKH/P2SH and bech32/bech32m witness programs.

The cascade follows python-bitcoinlib's ``wallet.py``: ``BitcoinAddress.decode`` returns the
right subclass (``P2PKHAddress``, ``P2WPKHAddress`` ...), each of which knows its
``script_pubkey``; ``BitcoinAddress.from_script_pubkey`` goes the other way.

Networks: mainnet uses version bytes 0x00/0x05 and HRP ``bc``; ``testnet`` (testnet3,
testnet4 and signet, which share formats) uses 0x6f/0xc4 and ``tb``. An address of the other
network is refused with a message saying so. Regtest (``bcrt``) has no public chain to
scan and is refused on both.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, Self

from chains.bitcoin.script import OutputType, classify_script, p2pkh_script, p2sh_script, witness_script_pubkey
from chains.codecs.address import Address, invalid
from chains.codecs.base58 import Base58Error, b58check_decode, b58check_encode
from chains.codecs.bech32 import Bech32Error, WitnessProgram, decode_segwit, encode_segwit
from chains.errors import InvalidAddress
from chains.observation import AccountType
from chains.registry import Chain, Family, Network

SEGWIT_HRPS = MappingProxyType({Network.MAINNET: "bc", Network.TESTNET: "tb"})
_NETWORK_BY_HRP = MappingProxyType({hrp: network for network, hrp in SEGWIT_HRPS.items()})
_REGTEST_HRP = "bcrt"
_SEGWIT_PREFIXES = tuple(hrp + "1" for hrp in (*SEGWIT_HRPS.values(), _REGTEST_HRP))


def _wrong_network(found: Network, wanted: Network) -> str:
    return f"this is a {found} address but a {wanted} scan was asked for (pass network={found.value!r})"


@dataclass(frozen=True, slots=True)
class BitcoinAddress(Address):
    """A Bitcoin address: a text form of one scriptPubKey."""

    family = Family.BITCOIN
    address_type: ClassVar[OutputType]

    @property
    @abstractmethod
    def script_pubkey(self) -> bytes:
        """The output script this address pays to."""

    @property
    def account_type(self) -> AccountType:
        """Always a UTXO script: Bitcoin has no accounts."""
        return AccountType.UTXO_SCRIPT

    @classmethod
    def decode(cls, text: str, chain: Chain = Chain.BITCOIN, network: Network = Network.MAINNET) -> Self:
        """Decode any Bitcoin address of ``network`` into its typed class.

        Called on a subclass (e.g. ``P2TRAddress.decode``), also require that type.
        """
        if text.lower().startswith(_SEGWIT_PREFIXES):
            address: BitcoinAddress = _decode_segwit(text, chain, network)
        else:
            address = _decode_base58(text, chain, network)
        if not isinstance(address, cls):
            raise invalid(chain, text, f"this is a {address.address_type} address, not a {cls.__name__}")
        return address

    @staticmethod
    def from_script_pubkey(script_pubkey: bytes, network: Network = Network.MAINNET) -> BitcoinAddress:
        """The address of an output script; ``InvalidAddress`` for types without one (P2PK, bare multisig ...)."""
        info = classify_script(script_pubkey)
        base58_class = _BASE58_CLASSES.get(info.output_type)
        if base58_class is not None:
            return base58_class(info.program, Chain.BITCOIN, network)
        if info.witness_version is not None and info.output_type is not OutputType.NONSTANDARD:
            return SegwitAddress.build(info.witness_version, info.program, Chain.BITCOIN, network)
        raise InvalidAddress(
            f"{info.output_type} output scripts have no address form",
            chain=str(Chain.BITCOIN),
            output_type=str(info.output_type),
        )


@dataclass(frozen=True, slots=True)
class Base58Address(BitcoinAddress):
    """A legacy base58check address: one version byte (type and network) and a 20-byte hash."""

    payload_sizes = (20,)
    versions: ClassVar[MappingProxyType[Network, int]]

    def __str__(self) -> str:
        return b58check_encode(bytes([self.versions[self.network]]) + self.payload)


@dataclass(frozen=True, slots=True)
class P2PKHAddress(Base58Address):
    """Pay to public-key hash (``1…``; testnet ``m…``/``n…``)."""

    address_type = OutputType.P2PKH
    versions = MappingProxyType({Network.MAINNET: 0x00, Network.TESTNET: 0x6F})

    @property
    def script_pubkey(self) -> bytes:
        """``OP_DUP OP_HASH160 <hash> OP_EQUALVERIFY OP_CHECKSIG``."""
        return p2pkh_script(self.payload)


@dataclass(frozen=True, slots=True)
class P2SHAddress(Base58Address):
    """Pay to script hash (``3…``; testnet ``2…``)."""

    address_type = OutputType.P2SH
    versions = MappingProxyType({Network.MAINNET: 0x05, Network.TESTNET: 0xC4})

    @property
    def script_pubkey(self) -> bytes:
        """``OP_HASH160 <hash> OP_EQUAL``."""
        return p2sh_script(self.payload)


_BASE58_CLASSES: MappingProxyType[OutputType, type[Base58Address]] = MappingProxyType(
    {cls.address_type: cls for cls in (P2PKHAddress, P2SHAddress)}
)
_BASE58_VERSIONS = MappingProxyType(
    {version: (network, cls) for cls in _BASE58_CLASSES.values() for network, version in cls.versions.items()}
)


@dataclass(frozen=True, slots=True)
class SegwitAddress(BitcoinAddress):
    """A witness-program address (BIP-173 bech32 for v0, BIP-350 bech32m for v1 and above)."""

    VERSION: ClassVar[int]

    @property
    def witness_version(self) -> int:
        """The witness version (0-16) of the program."""
        return self.VERSION

    @property
    def script_pubkey(self) -> bytes:
        """``OP_n <program>``."""
        return witness_script_pubkey(self.witness_version, self.payload)

    def __str__(self) -> str:
        return encode_segwit(SEGWIT_HRPS[self.network], WitnessProgram(self.witness_version, self.payload))

    @staticmethod
    def build(version: int, program: bytes, chain: Chain, network: Network) -> SegwitAddress:
        """The typed address of a witness program (``WitnessUnknownAddress`` for unassigned ones)."""
        known = _SEGWIT_CLASSES.get((version, len(program)))
        if known is not None:
            return known(program, chain, network)
        return WitnessUnknownAddress(program, chain, network, version)


@dataclass(frozen=True, slots=True)
class P2WPKHAddress(SegwitAddress):
    """Witness v0 public-key hash (20-byte program)."""

    address_type = OutputType.P2WPKH
    VERSION = 0
    payload_sizes = (20,)


@dataclass(frozen=True, slots=True)
class P2WSHAddress(SegwitAddress):
    """Witness v0 script hash (32-byte program)."""

    address_type = OutputType.P2WSH
    VERSION = 0
    payload_sizes = (32,)


@dataclass(frozen=True, slots=True)
class P2TRAddress(SegwitAddress):
    """Taproot (witness v1, 32-byte program): the program is the x-only output public key."""

    address_type = OutputType.P2TR
    VERSION = 1
    payload_sizes = (32,)


@dataclass(frozen=True, slots=True)
class P2MRAddress(SegwitAddress):
    """BIP 360 pay-to-Merkle-root (witness v2, 32-byte program): a script-tree root, no key."""

    address_type = OutputType.P2MR
    VERSION = 2
    payload_sizes = (32,)


_SEGWIT_CLASSES: MappingProxyType[tuple[int, int], type[SegwitAddress]] = MappingProxyType(
    {
        (cls.VERSION, size): cls
        for cls in (P2WPKHAddress, P2WSHAddress, P2TRAddress, P2MRAddress)
        for size in cls.payload_sizes
    }
)


@dataclass(frozen=True, slots=True)
class WitnessUnknownAddress(SegwitAddress):
    """A valid witness program whose version and length have no assigned meaning yet."""

    version: int
    address_type = OutputType.WITNESS_UNKNOWN
    payload_sizes = tuple(range(2, 41))

    def __post_init__(self) -> None:
        SegwitAddress.__post_init__(self)
        if (self.version, len(self.payload)) in _SEGWIT_CLASSES or not 1 <= self.version <= 16:
            raise InvalidAddress(
                f"witness v{self.version} with a {len(self.payload)}-byte program is not an unassigned witness program",
                chain=str(self.chain),
            )

    @property
    def witness_version(self) -> int:
        """The witness version (1-16) of the program."""
        return self.version


def _decode_base58(text: str, chain: Chain, network: Network) -> Base58Address:
    """Decode base58check text into a P2PKH or P2SH address of ``network``."""
    try:
        raw = b58check_decode(text)
    except Base58Error as exc:
        raise invalid(chain, text, str(exc)) from None
    found = _BASE58_VERSIONS.get(raw[0])
    if found is None:
        raise invalid(chain, text, f"unknown base58 version byte 0x{raw[0]:02x} (not P2PKH or P2SH)")
    found_network, address_class = found
    if found_network is not network:
        raise invalid(chain, text, _wrong_network(found_network, network))
    return address_class.from_text_payload(text, raw[1:], chain, network)


def _decode_segwit(text: str, chain: Chain, network: Network) -> SegwitAddress:
    """Decode ``bc1…``/``tb1…`` text, refusing the wrong network and regtest."""
    try:
        hrp, witness = decode_segwit(text)
    except Bech32Error as exc:
        raise invalid(chain, text, str(exc)) from None
    if hrp == _REGTEST_HRP:
        raise invalid(chain, text, "regtest addresses (bcrt1…) have no public chain to scan")
    found = _NETWORK_BY_HRP.get(hrp)
    if found is None:
        raise invalid(chain, text, f"human-readable part {hrp!r} is not Bitcoin's ('bc' or 'tb')")
    if found is not network:
        raise invalid(chain, text, _wrong_network(found, network))
    return SegwitAddress.build(witness.version, witness.program, chain, network)
