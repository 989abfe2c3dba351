"""Benchmark: reading a Bitcoin Core UTXO snapshot (``dumptxoutset``) and typing every output.

Run with ``.venv/bin/python -m bench.bench_bitcoin_snapshot [--coins 1000000] [--rounds 3]``
(~20 s on 2 cores at the defaults, a third of it writing the file).

A synthetic snapshot of ``--coins`` coins is written to a temporary file with the test writer
(``tests/bitcoin_snapshot.py``, Core's format), in a mix of output types close to mainnet's
UTXO set (mostly P2WPKH, P2TR, P2PKH and P2SH; some P2WSH, bare multisig and P2PK, a few
uncompressed keys that need a point decompression each), 1 to 5 outputs per transaction.
Each round opens the file and runs ``iter_coin_batches`` then ``script_type`` on every coin;
the ceiling is the same decoding without ``script_type``. The medians give coins/s and the
time a mainnet snapshot (165,000,000 coins) would take at that rate, against the 30-minute
target. Nothing here asserts on time: the script prints, and exits 1 above the target.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coincurve import PrivateKey

from bench.report import Figure, print_figures
from chains.bitcoin.utxo_snapshot import iter_coin_batches, read_metadata, script_type
from tests.bitcoin_snapshot import Coin, write_snapshot

MAINNET_COINS = 165_000_000
TARGET_SECONDS = 30 * 60
BASE_BLOCK = "00000000000000000001b658dd1120e82e66d2790811f89ede9742ada3ed6d77"


def _say(message: str) -> None:
    print(message, flush=True)


def _script_kinds(rng: random.Random) -> tuple[list[Callable[[], bytes]], list[float]]:
    """Script makers and their weights (percent), roughly the UTXO set's mix."""
    keys = [PrivateKey(rng.randbytes(31) + b"\x01").public_key for _ in range(64)]
    uncompressed = [k.format(compressed=False) for k in keys]
    compressed = [k.format(compressed=True) for k in keys]
    kinds: list[tuple[float, Callable[[], bytes]]] = [
        (34.0, lambda: b"\x00\x14" + rng.randbytes(20)),
        (27.0, lambda: b"\x51\x20" + rng.randbytes(32)),
        (22.0, lambda: b"\x76\xa9\x14" + rng.randbytes(20) + b"\x88\xac"),
        (10.0, lambda: b"\xa9\x14" + rng.randbytes(20) + b"\x87"),
        (4.0, lambda: b"\x00\x20" + rng.randbytes(32)),
        (1.5, lambda: b"\x51\x21" + rng.choice(compressed) + b"\x21" + rng.choice(compressed) + b"\x52\xae"),
        (0.3, lambda: b"\x41" + rng.choice(uncompressed) + b"\xac"),
        (0.2, lambda: b"\x21" + rng.choice(compressed) + b"\xac"),
        (1.0, lambda: rng.randbytes(rng.randrange(1, 80))),
    ]
    return [make for _, make in kinds], [weight for weight, _ in kinds]


def synthetic_coins(count: int, seed: int = 11) -> list[Coin]:
    """``count`` coins with a mainnet-like mix of scripts, heights, values and outputs per txid."""
    rng = random.Random(seed)
    makers, weights = _script_kinds(rng)
    picks = rng.choices(range(len(makers)), weights, k=count + 4)  # a group may end 4 past count
    values = (546, 330, 294, 1000, 10_000, 100_000)
    coins: list[Coin] = []
    while len(coins) < count:
        txid, height, coinbase = rng.randbytes(32), rng.randrange(900_000), rng.random() < 0.01
        for vout in range(rng.choice((1, 1, 1, 2, 2, 3, 5))):
            value = rng.choice(values) if rng.random() < 0.3 else rng.randrange(1, 10**10)
            coins.append((txid, vout, height, coinbase, value, makers[picks[len(coins)]]()))
    return coins[:count]


def _read(path: Path, typed: bool) -> tuple[float, Counter[str]]:
    """Seconds to read every coin of the file (and type its script when ``typed``), and the count per type."""
    counts: Counter[str] = Counter()
    start = time.perf_counter()
    with path.open("rb") as stream:
        metadata = read_metadata(stream)
        for batch in iter_coin_batches(stream, metadata):
            if typed:
                counts.update(kind for kind, _ in map(script_type, batch.script))
    return time.perf_counter() - start, counts


def measure(coins: int = 1_000_000, rounds: int = 3) -> list[Figure]:
    """Write a snapshot of ``coins`` coins, then time ``rounds`` full reads with and without
    ``script_type``; returns coins/s beside the decode-only ceiling and the 165M-coin projection."""
    _say(f"[snapshot] {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; generating {coins:,} coins ...")
    with tempfile.TemporaryDirectory(prefix="qday-bench-snapshot-") as folder:
        path = Path(folder) / "utxo.dat"
        start = time.perf_counter()
        with path.open("wb") as out:
            write_snapshot(out, network="mainnet", base_block_hash=BASE_BLOCK, coins=synthetic_coins(coins))
        size = path.stat().st_size
        _say(
            f"[snapshot] wrote {size / 1e6:,.1f} MB ({size / coins:.1f} B/coin) in {time.perf_counter() - start:.1f} s"
        )
        typed_times, decode_times = [], []
        for i in range(rounds):
            decode_times.append(_read(path, typed=False)[0])
            elapsed, counts = _read(path, typed=True)
            typed_times.append(elapsed)
            assert sum(counts.values()) == coins
            _say(
                f"[snapshot] round {i + 1}/{rounds}: decode {coins / decode_times[-1]:,.0f} coins/s, "
                f"decode + script_type {coins / elapsed:,.0f} coins/s"
            )
        _say("[snapshot] types: " + ", ".join(f"{k} {v / coins:.1%}" for k, v in sorted(counts.items())))
    rate, ceiling = coins / statistics.median(typed_times), coins / statistics.median(decode_times)
    projected = MAINNET_COINS / rate
    _say(f"[snapshot] {MAINNET_COINS:,} coins at {rate:,.0f} coins/s: {projected:,.0f} s ({projected / 60:.1f} min)")
    return [
        Figure(f"snapshot read + script_type, {coins:,} coins", rate, "coins/s", ceiling, "decode only"),
        Figure(
            f"projected read of {MAINNET_COINS:,} coins",
            projected,
            "s",
            target=TARGET_SECONDS,
            compare="<=",
            on="value",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print coins/s and the projection; exit 1 if the projection is over 30 min."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coins", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    return print_figures(measure(args.coins, args.rounds))


if __name__ == "__main__":
    raise SystemExit(main())
