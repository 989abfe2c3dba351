"""Key families: every address and output script a public key controls, on every chain.

Exposure is a property of the key, not of one of its addresses: a key revealed once
is revealed for every form below. This module derives those forms (pure, no I/O):

| form | chain | derivation |
|---|---|---|
| ``p2pk`` / ``p2pk-uncompressed`` | bitcoin | ``<33- or 65-byte SEC key> OP_CHECKSIG`` (no address: by script) |
| ``p2pkh`` / ``p2pkh-uncompressed`` | bitcoin | base58check(0x00 ‖ HASH160(SEC key)) |
| ``p2wpkh`` | bitcoin | bech32 v0 of HASH160(compressed key) (BIP-141/173) |
| ``p2sh-p2wpkh`` | bitcoin | P2SH of ``0 <HASH160(compressed key)>`` (BIP-49) |
| ``p2tr`` | bitcoin | bech32m v1 of the BIP-86 output key: x(P + H_TapTweak(x(P))·G), P with even y |
| ``evm`` | the 15 EVM chains | keccak256(uncompressed x ‖ y)[12:], EIP-55 text |
| ``tron`` | tron | base58check(0x41 ‖ the same 20 bytes) |
| ``cosmos`` | cosmos | bech32("cosmos", HASH160(compressed key)) |
| ``solana`` | solana | the 32-byte ed25519 key itself, base58 |

Segwit forms commit to the compressed key only (BIP-143 forbids uncompressed keys in
v0 witness programs as policy; BIP-341 uses x-only keys), so an uncompressed key has no segwit
form of its own, but its compressed encoding is the same key and is listed too.

The address families (``hash160_family``, ``keccak_family``) are the siblings an address
has without knowing the key: the same 20 bytes under another script type or chain.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from coincurve import PublicKey as Secp256k1Point
from solders.pubkey import Pubkey

from chains.bitcoin.script import taproot_output_key, witness_script_pubkey
from chains.codecs.address import Address
from chains.codecs.bitcoin import P2PKHAddress, P2SHAddress, P2TRAddress, P2WPKHAddress
from chains.codecs.cosmos import CosmosAddress
from chains.codecs.evm import EvmAddress
from chains.codecs.solana import SolanaAddress
from chains.codecs.tron import TronAddress
from chains.errors import InvalidAddress
from chains.registry import EVM_CHAINS, Chain, Network
from pqc.errors import InvalidKeyFormat
from pqc.hashes import hash160, keccak256

_OP_CHECKSIG = 0xAC


class KeyType(enum.StrEnum):
    """The curve of a public key."""

    SECP256K1 = "secp256k1"
    ED25519 = "ed25519"


class KeyForm(enum.StrEnum):
    """How an output or account commits to a key (the ``form`` of ``POST /v1/scan/key``)."""

    P2PK = "p2pk"
    P2PK_UNCOMPRESSED = "p2pk-uncompressed"
    P2PKH = "p2pkh"
    P2PKH_UNCOMPRESSED = "p2pkh-uncompressed"
    P2WPKH = "p2wpkh"
    P2SH_P2WPKH = "p2sh-p2wpkh"
    P2TR = "p2tr"
    EVM = "evm"
    TRON = "tron"
    COSMOS = "cosmos"
    SOLANA = "solana"


@dataclass(frozen=True, slots=True)
class PublicKey:
    """A validated public key. For secp256k1 both SEC encodings are kept (``compressed``
    33 bytes, ``uncompressed`` 65 bytes): they are one key, revealed together."""

    key_type: KeyType
    compressed: bytes  # 33-byte SEC for secp256k1; the 32-byte key for ed25519
    uncompressed: bytes | None = None  # 65-byte SEC for secp256k1


@dataclass(frozen=True, slots=True)
class KeyAddress:
    """One place a key controls: a chain, the form, its output script (Bitcoin forms) and
    its address (``None`` for P2PK, which has none and is scanned by script)."""

    chain: Chain
    form: KeyForm
    address: Address | None
    script_pubkey: bytes | None = None

    @property
    def text(self) -> str:
        """The address text, or for P2PK the output script in hex."""
        if self.address is not None:
            return str(self.address)
        assert self.script_pubkey is not None  # P2PK forms always carry their script
        return self.script_pubkey.hex()


def parse_public_key(raw: bytes) -> PublicKey:
    """A secp256k1 key (33- or 65-byte SEC, or 64-byte x ‖ y) or a 32-byte ed25519 key;
    ``InvalidKeyFormat`` for any other length or a point not on its curve."""
    if len(raw) == 32:
        if not Pubkey(raw).is_on_curve():
            raise InvalidKeyFormat("32-byte key is not a point on the ed25519 curve", reason="not_on_curve")
        return PublicKey(KeyType.ED25519, raw)
    if len(raw) == 64:
        raw = b"\x04" + raw
    if len(raw) not in (33, 65):
        raise InvalidKeyFormat(
            f"a public key is 33 or 65 bytes (secp256k1 SEC), 64 (x ‖ y) or 32 (ed25519), got {len(raw)}",
            length=len(raw),
        )
    try:
        point = Secp256k1Point(raw)
    except ValueError:
        raise InvalidKeyFormat("not a point on the secp256k1 curve", reason="not_on_curve") from None
    return PublicKey(KeyType.SECP256K1, point.format(compressed=True), point.format(compressed=False))


def _p2pk_script(sec: bytes) -> bytes:
    return bytes([len(sec)]) + sec + bytes([_OP_CHECKSIG])


def key_addresses(key: PublicKey, network: Network = Network.MAINNET) -> list[KeyAddress]:
    """Every form ``key`` takes on the supported chains of ``network``, in the table's order
    (Bitcoin forms first, then the EVM chains in registry order, Tron, Cosmos, Solana)."""
    if key.key_type is KeyType.ED25519:
        return [KeyAddress(Chain.SOLANA, KeyForm.SOLANA, SolanaAddress(key.compressed, Chain.SOLANA, network))]
    assert key.uncompressed is not None  # every secp256k1 key keeps both encodings
    compressed_hash = hash160(key.compressed)
    p2pkh = P2PKHAddress(compressed_hash, Chain.BITCOIN, network)
    p2pkh_full = P2PKHAddress(hash160(key.uncompressed), Chain.BITCOIN, network)
    p2wpkh = P2WPKHAddress(compressed_hash, Chain.BITCOIN, network)
    nested = P2SHAddress(hash160(witness_script_pubkey(0, compressed_hash)), Chain.BITCOIN, network)
    p2tr = P2TRAddress(taproot_output_key(key.compressed), Chain.BITCOIN, network)
    forms = [
        KeyAddress(Chain.BITCOIN, KeyForm.P2PK, None, _p2pk_script(key.compressed)),
        KeyAddress(Chain.BITCOIN, KeyForm.P2PK_UNCOMPRESSED, None, _p2pk_script(key.uncompressed)),
        KeyAddress(Chain.BITCOIN, KeyForm.P2PKH, p2pkh, p2pkh.script_pubkey),
        KeyAddress(Chain.BITCOIN, KeyForm.P2PKH_UNCOMPRESSED, p2pkh_full, p2pkh_full.script_pubkey),
        KeyAddress(Chain.BITCOIN, KeyForm.P2WPKH, p2wpkh, p2wpkh.script_pubkey),
        KeyAddress(Chain.BITCOIN, KeyForm.P2SH_P2WPKH, nested, nested.script_pubkey),
        KeyAddress(Chain.BITCOIN, KeyForm.P2TR, p2tr, p2tr.script_pubkey),
    ]
    account = keccak256(key.uncompressed[1:])[12:]
    forms += [KeyAddress(c, KeyForm.EVM, EvmAddress(account, c, network)) for c in EVM_CHAINS]
    forms.append(KeyAddress(Chain.TRON, KeyForm.TRON, TronAddress(account, Chain.TRON, network)))
    forms.append(KeyAddress(Chain.COSMOS, KeyForm.COSMOS, CosmosAddress(compressed_hash, Chain.COSMOS, network)))
    return forms


def hash160_family(address: Address) -> list[Address]:
    """The addresses that share ``address``'s key hash (itself included): P2PKH, P2WPKH,
    the P2SH-P2WPKH of that hash, and the Cosmos account. A P2SH address has none
    besides itself (its script is unknown). ``InvalidAddress`` for other kinds."""
    network = address.network
    if isinstance(address, P2PKHAddress | P2WPKHAddress | CosmosAddress):
        key_hash = address.payload
    elif isinstance(address, P2SHAddress):
        return [address]
    else:
        raise InvalidAddress(f"{address.address_type} addresses have no key-hash family", chain=str(address.chain))
    nested_hash = hash160(witness_script_pubkey(0, key_hash))
    return [
        P2PKHAddress(key_hash, Chain.BITCOIN, network),
        P2WPKHAddress(key_hash, Chain.BITCOIN, network),
        P2SHAddress(nested_hash, Chain.BITCOIN, network),
        CosmosAddress(key_hash, Chain.COSMOS, network),
    ]


def keccak_family(address: Address, chains: Sequence[Chain] = EVM_CHAINS) -> list[Address]:
    """The same 20-byte account on every chain of ``chains`` (the EVM chains by default)
    and on Tron; ``address`` is an EVM or Tron address. ``InvalidAddress`` otherwise."""
    if not isinstance(address, EvmAddress | TronAddress):
        raise InvalidAddress(f"{address.address_type} addresses have no keccak family", chain=str(address.chain))
    account, network = address.payload, address.network
    family: list[Address] = [EvmAddress(account, c, network) for c in chains]
    family.append(TronAddress(account, Chain.TRON, network))
    return family


KECCAK_CHAINS: tuple[Chain, ...] = (*EVM_CHAINS, Chain.TRON)
"""The chains of a keccak family, in the order ``keccak_family`` lists them."""
HASH160_CHAINS: tuple[Chain, ...] = (Chain.BITCOIN, Chain.COSMOS)
"""The chains of a hash160 family, in the order ``hash160_family`` lists them."""


def siblings(address: Address, on: Chain | None = None) -> list[Address]:
    """The other addresses of ``address``'s key family (on chain ``on`` only, if given): the
    keccak family of an EVM or Tron address, the hash160 family of a P2PKH, P2WPKH or Cosmos
    address; none for the others (a script hash, a taproot or Solana address has no sibling
    that can be derived without the key)."""
    if isinstance(address, EvmAddress | TronAddress):
        family = keccak_family(address, EVM_CHAINS if on is None else tuple(c for c in EVM_CHAINS if c is on))
    elif isinstance(address, P2PKHAddress | P2WPKHAddress | CosmosAddress):
        family = hash160_family(address)
    else:
        return []
    own = (address.chain, str(address))
    return [a for a in family if (a.chain, str(a)) != own and (on is None or a.chain is on)]


def key_hash(address: Address) -> bytes | None:
    """The HASH160 of the public key behind a P2PKH, P2WPKH or Cosmos address (what the
    Bitcoin exposure index is looked up by), None for an address that does not commit to
    one key's hash (P2SH, P2WSH, P2TR, the keccak and ed25519 chains)."""
    if isinstance(address, P2PKHAddress | P2WPKHAddress | CosmosAddress):
        return address.payload
    return None


def family_key(address: Address) -> str:
    """The name of the key family ``address`` belongs to, from the address alone:
    ``keccak:<hex20>`` for an EVM or Tron account, ``hash160:<hex20>`` for a P2PKH, P2WPKH
    or Cosmos address, ``<chain>:<address>`` for an address with no sibling (its own family)."""
    if isinstance(address, EvmAddress | TronAddress):
        return f"keccak:{address.payload.hex()}"
    hashed = key_hash(address)
    if hashed is not None:
        return f"hash160:{hashed.hex()}"
    return f"{address.chain.value}:{address}"


def family_group(chain: Chain) -> tuple[Chain, ...]:
    """The chains whose addresses can share a key with an address of ``chain`` (itself
    included): every keccak chain for an EVM chain or Tron, Bitcoin and Cosmos for either
    of them, the chain alone otherwise (Solana)."""
    if chain in KECCAK_CHAINS:
        return KECCAK_CHAINS
    if chain in HASH160_CHAINS:
        return HASH160_CHAINS
    return (chain,)
