"""Benchmark: deriving a wallet's addresses from an extended public key, against raw point additions.

Run with ``.venv/bin/python -m bench.bench_bip32 [--addresses 10000] [--rounds 5]`` (a few
seconds on 2 cores).

Measured: ``--addresses`` children of a BIP-84 account's receive branch (``xpub/0/i``),
each derived with ``ExtendedPublicKey.children`` (BIP-32 CKDpub: HMAC-SHA512, a point addition,
the child's chain code; the parent parsed once) and encoded as its P2WPKH address (HASH160 and bech32), as a wallet
scan derives them. Ceiling: a loop doing only the point additions with coincurve
(``PublicKey.add`` of a precomputed 32-byte tweak, serialised compressed), the one step no
implementation can skip. The medians of ``--rounds`` rounds give addresses/s and the ratio
(target: derivation and encoding at least 0.5 of the bare point-add loop). Nothing here
asserts on time: the script prints, and exits 1 below the target.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coincurve import PublicKey

from bench.report import Figure, print_figures
from chains.bitcoin.bip32 import ExtendedPublicKey, parse_extended_key
from chains.codecs.bitcoin import P2WPKHAddress
from chains.registry import Chain, Network
from pqc.hashes import hash160

TARGET = 0.5
#: BIP-84's account 0 (m/84'/0'/0'), from the BIP's test vectors.
ACCOUNT = (
    "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs"
)


def _derive(account: ExtendedPublicKey, count: int) -> float:
    """Seconds to derive and encode ``count`` receive addresses."""
    started = time.perf_counter()
    for child in account.derive(0).children(range(count)):
        str(P2WPKHAddress(hash160(child.public_key), Chain.BITCOIN, Network.MAINNET))
    return time.perf_counter() - started


def _point_adds(point: PublicKey, count: int) -> float:
    """Seconds for ``count`` bare point additions of precomputed tweaks."""
    tweaks = [hashlib.sha256(index.to_bytes(4, "big")).digest() for index in range(count)]
    started = time.perf_counter()
    for tweak in tweaks:
        point.add(tweak).format(compressed=True)
    return time.perf_counter() - started


def measure(addresses: int = 10_000, rounds: int = 5) -> list[Figure]:
    """Derive ``addresses`` addresses and as many bare point additions, ``rounds`` times
    alternating; returns addresses/s against the point-add rate."""
    account, _ = parse_extended_key(ACCOUNT)
    point = PublicKey(account.public_key)
    derived, added = [], []
    for _ in range(rounds):
        derived.append(addresses / _derive(account, addresses))
        added.append(addresses / _point_adds(point, addresses))
    rate, ceiling = statistics.median(derived), statistics.median(added)
    print(f"[bip32] {addresses:,} addresses: {rate:,.0f}/s derived and encoded; {ceiling:,.0f}/s bare point adds")
    return [
        Figure(
            f"BIP-32 derivation + P2WPKH encoding, {addresses:,} addresses",
            rate,
            "addresses/s",
            ceiling,
            "coincurve point additions only",
            TARGET,
        )
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the figure; exit 1 below the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addresses", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    return print_figures(measure(args.addresses, args.rounds))


if __name__ == "__main__":
    raise SystemExit(main())
