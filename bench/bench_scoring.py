"""Benchmark: the vectorised scorer against a plain Python loop over the same rows.

Run with ``.venv/bin/python bench/bench_scoring.py [--rows 1000000 10000000] [--loop-rows 200000]``
(or ``make bench``).

Synthetic observations are generated as a Polars frame (hash-based pseudo-random columns,
never 10 million Python objects), with a realistic mix per chain family. ``score_frame``
is timed end to end (validation, scoring, assembling the output frame) on each size; the
plain loop runs on a sample and must produce the same numbers, so it doubles as an
independent check of the vectorised code. Targets: 10M rows in under 1 s, and at least
100x the loop's rows/s. Like the other benchmarks it prints progress and verdicts and exits
1 when a target is missed or the two disagree; no test asserts on time.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import Figure, print_figures
from chains.registry import Family
from scoring import model
from scoring.frame import ACCOUNT_TYPE_DTYPE, CHAIN_DTYPE, EXPOSURE_DTYPE, OBSERVATION_SCHEMA
from scoring.readiness import ReadinessData, load_readiness
from scoring.risk import SCORE_COLUMN, score_frame

TARGET_ROWS_PER_SECOND = 10_000_000  # 10M rows fully scored in under 1 s
TARGET_RATIO = 100  # times the plain loop's rows/s

# Per family: (address_type, account_type) choices and native decimals/symbol/price.
_FAMILY_ADDRESSES: Mapping[Family, Sequence[tuple[str, str]]] = {
    Family.EVM: [("eoa", "eoa")] * 4 + [("contract", "contract")],
    Family.BITCOIN: [
        ("p2wpkh", "utxo_script"),
        ("p2pkh", "utxo_script"),
        ("p2sh", "utxo_script"),
        ("p2tr", "utxo_script"),
        ("p2wsh", "utxo_script"),
        ("p2pk", "utxo_script"),
    ],
    Family.SOLANA: [("ed25519", "eoa")] * 4 + [("pda", "pda")],
    Family.COSMOS: [("secp256k1", "eoa")],
    Family.TRON: [("eoa", "eoa")] * 4 + [("contract", "contract")],
}
_FAMILY_UNITS: Mapping[Family, tuple[int, str, float]] = {
    Family.EVM: (18, "ETH", 3_000.0),
    Family.BITCOIN: (8, "BTC", 90_000.0),
    Family.SOLANA: (9, "SOL", 150.0),
    Family.COSMOS: (6, "ATOM", 5.0),
    Family.TRON: (6, "TRX", 0.25),
}


def _say(message: str) -> None:
    print(message, flush=True)


def _pick(values: Sequence[Any], dtype: pl.DataType | type[pl.DataType], index: pl.Expr) -> pl.Expr:
    return pl.lit(pl.Series(values, dtype=dtype)).gather(index % len(values))


def synthetic_observations(rows: int, seed: int = 7) -> pl.DataFrame:
    """``rows`` synthetic observations in ``OBSERVATION_SCHEMA``, built column-wise."""
    chains = list(model.SUPPORTED_CHAINS)
    families = [model.CHAIN_FAMILY[chain] for chain in chains]
    per_chain_addresses = [_FAMILY_ADDRESSES[family] for family in families]
    width = max(len(choices) for choices in per_chain_addresses)
    # One flat table of (chain, slot) -> address kind; rows pick a chain, then a slot.
    flat = [choices[slot % len(choices)] for choices in per_chain_addresses for slot in range(width)]
    units = [_FAMILY_UNITS[family] for family in families]

    def rnd(salt: int) -> pl.Expr:
        return pl.int_range(0, rows, dtype=pl.UInt64).hash(seed * 1_000 + salt)

    chain_index = rnd(1) % len(chains)
    kind_index = chain_index * width + rnd(2) % width
    magnitude = rnd(3) % 13  # balances spread over 13 decades of base units
    tx_count = (pl.lit(10.0).pow((rnd(4) % 4_000).cast(pl.Float64) / 1_000) - 1).cast(pl.Int64)
    observed = datetime(2026, 11, 22, tzinfo=UTC)
    frame = pl.select(
        chain=_pick(chains, CHAIN_DTYPE, chain_index),
        address=pl.format("addr{}", pl.int_range(0, rows)),
        address_type=_pick([kind for kind, _ in flat], pl.String, kind_index),
        account_type=_pick([account for _, account in flat], ACCOUNT_TYPE_DTYPE, kind_index),
        balance=(
            pl.when(rnd(5) % 10 == 0)
            .then(0)
            .otherwise((rnd(6) % 1_000).cast(pl.Int128) * pl.lit(10, pl.Int128).pow(magnitude))
        ),
        decimals=_pick([u[0] for u in units], pl.UInt8, chain_index),
        symbol=_pick([u[1] for u in units], pl.String, chain_index),
        tx_count=tx_count,
        outbound_tx_count=(tx_count * (rnd(7) % 3)) // 4,
        exposure=_pick(["EXPOSED_ON_SPEND"] * 6 + ["EXPOSED_AT_REST"] * 3 + ["UNDETERMINED"], EXPOSURE_DTYPE, rnd(8)),
        public_key=pl.when(rnd(9) % 5 == 0).then(pl.lit(b"\x02" + bytes(32))).otherwise(None),
        address_reuse_count=(rnd(10) % 200).cast(pl.Int64),
        first_activity=pl.lit(None, OBSERVATION_SCHEMA["first_activity"]),
        last_activity=pl.lit(None, OBSERVATION_SCHEMA["last_activity"]),
        source=pl.lit("synthetic"),
        height=pl.lit(None, pl.Int64),
        observed_at=pl.lit(observed, OBSERVATION_SCHEMA["observed_at"]),
        price_usd=pl.when(rnd(11) % 20 == 0)
        .then(None)
        .otherwise(_pick([u[2] for u in units], pl.Float64, chain_index)),
        price_as_of=pl.lit(observed, OBSERVATION_SCHEMA["price_as_of"]),
    )
    return frame.cast(OBSERVATION_SCHEMA)


# --- The plain-Python baseline: the same policy, one row at a time -------------------


def _curve(value: float, curve: model.LogCurve) -> int:
    return min(100, math.floor(math.log10(1 + max(value, 0.0)) * curve.points_per_decade + 0.5))


def _basis(row: Mapping[str, Any]) -> model.ExposureBasis:
    family = model.CHAIN_FAMILY[row["chain"]]
    address_is_key = family in model.ADDRESS_IS_KEY_FAMILIES
    account_model = family in model.ACCOUNT_MODEL_FAMILIES
    key_account = row["account_type"] == "eoa"
    signed = row["outbound_tx_count"] > 0
    exposure = row["exposure"]
    if row["account_type"] in ("contract", "pda"):
        return model.ExposureBasis.CODE_CONTROLLED
    if address_is_key and key_account:
        return model.ExposureBasis.ADDRESS_IS_KEY_SIGNED if signed else model.ExposureBasis.ADDRESS_IS_KEY
    if exposure == "EXPOSED_AT_REST":
        return model.ExposureBasis.AT_REST
    if row["public_key"] is not None or (account_model and key_account and signed):
        return model.ExposureBasis.REVEALED_BY_RECORD
    if exposure == "UNDETERMINED":
        return model.ExposureBasis.UNDETERMINED
    if exposure == "NOT_EXPOSED":
        return model.ExposureBasis.NOT_EXPOSED
    return model.ExposureBasis.ON_SPEND


def python_score(row: Mapping[str, Any], grades: Mapping[str, str]) -> dict[str, Any]:
    """Score one row in plain Python (the loop baseline)."""
    basis = _basis(row)
    if row["price_usd"] is None:
        balance = model.UNKNOWN_PRICE_BALANCE_SCORE if row["balance"] > 0 else 0
    else:
        balance = _curve(row["balance"] / 10.0 ** row["decimals"] * row["price_usd"], model.BALANCE_USD_CURVE)
    rule = model.ADDRESS_TYPES.get(row["address_type"])
    scores = {
        model.RiskFactor.PUBLIC_KEY_EXPOSURE: model.EXPOSURE_SCORE[basis],
        model.RiskFactor.BALANCE_AT_RISK: balance,
        model.RiskFactor.TRANSACTION_FREQUENCY: _curve(row["tx_count"], model.TX_COUNT_CURVE),
        model.RiskFactor.ADDRESS_TYPE: rule.score if rule else model.UNKNOWN_ADDRESS_TYPE_SCORE,
        model.RiskFactor.ADDRESS_REUSE: _curve(row["address_reuse_count"], model.REUSE_CURVE),
    }
    scores = {f: model.capped_when_empty(f, s, row["balance"]) for f, s in scores.items()}
    value = (sum(model.WEIGHT_PERCENT[f] * s for f, s in scores.items()) + 50) // 100
    band = next(b.score for b in model.RISK_BANDS if b.low <= value <= b.high)
    out: dict[str, Any] = {SCORE_COLUMN[f]: s for f, s in scores.items()}
    out.update(risk_value=value, risk_score=band, chain_grade=grades[row["chain"]])
    return out


# --- Timing ------------------------------------------------------------------------------


def _time(run: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def bench_polars(rows: int, readiness: ReadinessData, repeats: int) -> float:
    """Time ``score_frame`` on ``rows`` synthetic rows; returns the best rows/s."""
    _say(f"[polars] generating {rows:,} synthetic observations ...")
    start = time.perf_counter()
    frame = synthetic_observations(rows)
    _say(f"[polars] generated in {time.perf_counter() - start:.2f} s; warm-up run ...")
    score_frame(frame, readiness)
    times = _time(lambda: score_frame(frame, readiness), repeats)
    best, median = min(times), statistics.median(times)
    _say(
        f"[polars] {rows:>12,} rows: best {best:.3f} s ({rows / best:,.0f} rows/s), "
        f"median {median:.3f} s over {repeats} runs"
    )
    return rows / best


def bench_loop(rows: int, readiness: ReadinessData) -> tuple[float, int]:
    """Time the plain loop on ``rows`` rows and check it against Polars.

    Returns the loop's rows/s and how many rows the two disagree on (must be 0).
    """
    _say(f"[loop]   scoring {rows:,} rows one at a time in plain Python ...")
    frame = synthetic_observations(rows, seed=11)
    records = frame.to_dicts()
    grades = {chain: info.grade.letter for chain, info in readiness.chains.items()}
    start = time.perf_counter()
    results = [python_score(record, grades) for record in records]
    elapsed = time.perf_counter() - start
    _say(f"[loop]   {rows:>12,} rows: {elapsed:.3f} s ({rows / elapsed:,.0f} rows/s)")
    expected = pl.DataFrame(results).cast({column: pl.String for column in ("risk_score", "chain_grade")})
    scored = (
        score_frame(frame, readiness)
        .select(expected.columns)
        .cast({column: pl.String for column in ("risk_score", "chain_grade")})
    )
    mismatches = (
        scored.cast(expected.schema)
        .with_row_index()
        .join(expected.with_row_index(), on=["index", *expected.columns], how="anti")
    )
    _say(f"[check]  loop vs polars: {mismatches.height} of {rows:,} rows differ")
    return rows / elapsed, mismatches.height


def measure(rows: Sequence[int] = (1_000_000, 10_000_000), loop_rows: int = 200_000, repeats: int = 5) -> list[Figure]:
    """Run the benchmark (printing progress) and return its figures.

    The targets apply to the largest size: ``TARGET_ROWS_PER_SECOND`` (10M rows in under
    1 s) and ``TARGET_RATIO`` over the plain loop; the loop and Polars must agree on every
    row. The load average is printed because other jobs on the machine slow every number down.
    """
    _say(
        f"polars {pl.__version__}, {pl.thread_pool_size()} threads, scoring {model.SCORING_VERSION}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    readiness = load_readiness()
    loop_rate, mismatches = bench_loop(loop_rows, readiness)
    figures, rate = [], 0.0
    for size in sorted(rows):
        rate = bench_polars(size, readiness, repeats)
        target = TARGET_RATIO if size == max(rows) else None
        figures.append(Figure(f"score_frame, {size:,} rows", rate, "rows/s", loop_rate, "plain Python loop", target))
    _say(f"load average at the end {os.getloadavg()[0]:.2f}")
    return [
        *figures,
        Figure(
            f"score_frame, {max(rows):,} rows (absolute)", rate, "rows/s", target=TARGET_ROWS_PER_SECOND, on="value"
        ),
        Figure("rows where the loop and Polars disagree", mismatches, "rows", target=0, compare="<=", on="value"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print rows/s and the speed-up; exit 1 if a target or the check fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--loop-rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    return print_figures(measure(args.rows, args.loop_rows, args.repeats))


if __name__ == "__main__":
    raise SystemExit(main())
