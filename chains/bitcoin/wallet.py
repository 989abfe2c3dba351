"""A wallet as the service scans it: the descriptors a user's text stands for, their
receive and change branches, and the addresses derived on each. Pure, no I/O.

The text is an output descriptor (BIP-380..386, BIP-389) or a bare extended public key
(SLIP-132: ``zpub`` is one ``wpkh`` wallet, an ``xpub`` may be any of four), see
``chains.bitcoin.descriptors``. A wallet has at most two branches: a multipath step
``<0;1>`` gives receive (0) and change (1); a ranged descriptor without one is a single
branch, named by its last fixed step (``.../1/*`` is change, anything else receive); a
descriptor that is not ranged is one address.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from chains.bitcoin.bip32 import key_version, looks_private
from chains.bitcoin.descriptors import (
    DerivedKey,
    Descriptor,
    InvalidDescriptor,
    extended_key_descriptors,
    parse_descriptor,
)
from chains.bitcoin.script import classify_script
from chains.codecs.bitcoin import BitcoinAddress
from chains.errors import InvalidAddress
from chains.registry import Network

#: The BIP-32 network each address network's extended keys are written for.
_KEY_NETWORKS = {Network.MAINNET: "mainnet", Network.TESTNET: "testnet"}


class Branch(enum.StrEnum):
    """The two chains of addresses a wallet derives (BIP-44's ``change`` level)."""

    RECEIVE = "receive"
    CHANGE = "change"


@dataclass(frozen=True, slots=True)
class WalletBranch:
    """One branch of one descriptor: ``path`` is the BIP-389 alternative it takes."""

    descriptor: Descriptor
    branch: Branch
    path: int


@dataclass(frozen=True, slots=True)
class DerivedAddress:
    """An address of a wallet branch at child ``index``: its output script, the address
    text, the keys the script uses (with their BIP-32 origins, for PSBTs) and the output
    type (``p2wpkh``, ``p2tr`` ...)."""

    branch: WalletBranch
    index: int
    script_pubkey: bytes
    address: BitcoinAddress
    keys: tuple[DerivedKey, ...]
    output_type: str


@dataclass(frozen=True, slots=True)
class Wallet:
    """The descriptors a scan covers (one, or four for a bare ``xpub``) and whether the text
    was a bare extended key."""

    descriptors: tuple[Descriptor, ...]
    bare_key: bool

    def branches(self) -> list[WalletBranch]:
        """Every branch of every descriptor, in order (receive before change)."""
        return [branch for descriptor in self.descriptors for branch in descriptor_branches(descriptor)]


def descriptor_branches(descriptor: Descriptor) -> list[WalletBranch]:
    """The branches of ``descriptor`` (rules in the module docstring); ``InvalidDescriptor``
    for a multipath step of more than two alternatives, which is not a receive/change pair."""
    if descriptor.multipath > 2:
        raise InvalidDescriptor(
            f"a multipath step of {descriptor.multipath} alternatives: a wallet scan takes one branch or "
            "a receive/change pair (<0;1>)"
        )
    if descriptor.multipath == 2:
        return [WalletBranch(descriptor, Branch.RECEIVE, 0), WalletBranch(descriptor, Branch.CHANGE, 1)]
    ranged = [key for key in descriptor.all_keys() if key.wildcard and key.steps]
    change = bool(ranged) and ranged[0].steps[-1] == (1,)
    return [WalletBranch(descriptor, Branch.CHANGE if change else Branch.RECEIVE, 0)]


def parse_wallet(text: str, network: Network) -> Wallet:
    """The wallet ``text`` names for addresses of ``network``.

    ``PrivateKeyRefused`` for private key material anywhere (a WIF, an ``xprv``, a
    ``tprv`` ...; the message never quotes it); ``InvalidDescriptor`` for a descriptor or
    key that breaks its BIP, an extended key of the other network (a ``tpub`` with a live
    key), or a descriptor with no address form (``pk()``, bare ``multi()``, ``raw()``)."""
    text = text.strip()
    bare = "(" not in text
    if bare and looks_private(text) is None:
        descriptors = extended_key_descriptors(text)
    else:
        descriptors = [parse_descriptor(text)]  # refuses a bare private key too
    wanted = _KEY_NETWORKS[network]
    for descriptor in descriptors:
        for key in descriptor.all_keys():
            version = None if key.xpub is None else key_version(key.xpub.version)
            if version is not None and version.network != wanted:
                raise InvalidDescriptor(
                    f"{version.name} is a {version.network} key; this environment scans {wanted} "
                    f"({'a live' if network is Network.MAINNET else 'a test'} API key)"
                )
        if descriptor.function in ("pk", "multi", "sortedmulti", "raw"):
            raise InvalidDescriptor(
                f"{descriptor.function}() outputs have no address for an index to look up: "
                "use a descriptor with an address form (pkh, wpkh, sh, wsh, tr, addr)"
            )
    return Wallet(tuple(descriptors), bare)


def derive(branch: WalletBranch, indexes: Sequence[int], network: Network) -> list[DerivedAddress]:
    """The addresses of ``branch`` at child ``indexes`` (a descriptor that is not ranged has
    one address, at index 0)."""
    descriptor = branch.descriptor
    found = []
    for index in indexes:
        expansion = descriptor.expand(index, branch.path)
        try:
            address = BitcoinAddress.from_script_pubkey(expansion.script_pubkey, network)
        except InvalidAddress as exc:  # parse_wallet refuses the forms without one
            raise InvalidDescriptor(str(exc)) from None
        output_type = classify_script(expansion.script_pubkey).output_type.value
        found.append(DerivedAddress(branch, index, expansion.script_pubkey, address, expansion.keys, output_type))
    return found
