"""Fuzz address parsing for the 19 chains (``chains.codecs.detect``: EVM, Bitcoin, Solana,
Cosmos and Tron codecs with their base58/bech32 layers).

Passes: a typed ``Address`` whose canonical text parses back to the same address (and is
the input itself, up to case for EVM hex and bech32: base58 must match exactly), with
``detect_chains`` listing its chain; or ``InvalidAddress`` (SCAN_001) / ``UnsupportedChain``
(SCAN_002). Input: byte 0 picks the chain (or none: detection), byte 1's low bit the network,
the rest is the address as UTF-8 text.
"""

from __future__ import annotations

import atheris

from api.errors import code_of

with atheris.instrument_imports(include=["chains.codecs", "chains.registry"]):
    from chains.codecs.bitcoin import SegwitAddress
    from chains.codecs.detect import detect_chains, parse_address
    from chains.errors import InvalidAddress, UnsupportedChain
    from chains.registry import Chain, Family, Network

from fuzz.runner import run
from fuzz.seeds import json_strings

#: Byte 0 selects one of these; past the end means "no chain" (auto-detect), and the
#: last entry is a name no chain has, to reach UnsupportedChain.
_CHAIN_NAMES = frozenset(c.value for c in Chain)
_CHAIN_CHOICES: tuple[str, ...] = (*sorted(_CHAIN_NAMES), "dogecoin")
_NETWORKS = (Network.MAINNET, Network.TESTNET)
_CASE_INSENSITIVE_HEX_OR_BECH32 = (Family.EVM, Family.COSMOS)


def check(chain: str | None, network: Network, text: str) -> None:
    """Parse ``text``; raise AssertionError unless the outcome is a documented one."""
    try:
        address = parse_address(text, chain, network)
    except (InvalidAddress, UnsupportedChain) as exc:
        # The text is checked before the chain name, so an unknown chain may still be SCAN_001.
        known_chain = chain is None or chain in _CHAIN_NAMES
        assert code_of(exc) == "SCAN_001" or (code_of(exc) == "SCAN_002" and not known_chain), (chain, exc)
        return
    canonical = str(address)
    assert parse_address(canonical, address.chain, network) == address, (text, canonical)
    case_insensitive = address.family in _CASE_INSENSITIVE_HEX_OR_BECH32 or isinstance(address, SegwitAddress)
    assert canonical == text or (case_insensitive and canonical.lower() == text.lower()), (text, canonical)
    assert address.chain in detect_chains(text, network), (text, address.chain)


def test_one_input(data: bytes) -> None:
    """libFuzzer's entry point: one input, one parse."""
    if len(data) < 2:
        return
    choice = data[0] % (len(_CHAIN_CHOICES) + 8)
    chain = _CHAIN_CHOICES[choice] if choice < len(_CHAIN_CHOICES) else None
    check(chain, _NETWORKS[data[1] & 1], data[2:].decode("utf-8", "replace"))


def seeds() -> list[bytes]:
    """Every string of the address vectors, undirected (auto-detect) on both networks."""
    texts = json_strings(
        "addresses/eip55.json",
        "addresses/bech32.json",
        "addresses/tron.json",
        "addresses/cosmos.json",
        "addresses/solana.json",
        "bitcoin/key_io_valid.json",
        "bitcoin/key_io_invalid.json",
        min_length=20,
        max_length=110,
    )
    texts += [
        "0x52908400098527886E0F7030069857D2E4169EE7",
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
        "1BoatSLRHtKNngkdXEjobR76b53LETtpyT",
        "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7",
    ]
    none = bytes([len(_CHAIN_CHOICES)])
    return [none + bytes([net]) + t.encode() for t in texts if " " not in t for net in (0, 1)]


if __name__ == "__main__":
    run("addresses", test_one_input, seeds())
