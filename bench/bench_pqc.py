"""Micro-benchmark: ``pqc`` against the raw library calls it wraps, same process, same run.

Run from the repository root:  .venv/bin/python bench/bench_pqc.py   (~30-40 s on 2 cores)

Prints per-operation microseconds (median of several rounds) and the pqc/raw
ratio, then the hybrid-attestation crypto ceiling (secp256k1 recovery + ML-DSA-65
verification per second). ``raw_hybrid_ceiling`` and ``pqc_hybrid_throughput``
can be imported by the HTTP benchmark to compare an end-to-end rate with the
crypto-only bound.
"""

from __future__ import annotations

import hashlib
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coincurve import PrivateKey, PublicKey
from cryptography.hazmat.primitives.asymmetric import mldsa
from pqcrypto.sign import (  # type: ignore[import-untyped]  # ships no types
    ml_dsa_44,
    ml_dsa_65,
    ml_dsa_87,
    slh_dsa_sha2_128s,
    slh_dsa_shake_128s,
)

import pqc
from bench.report import Figure, print_figures
from pqc import Algorithm

MESSAGE = b"hybrid attestation benchmark message"
CONTEXT = b"qday"
SEED = bytes(range(32))
KEYGEN_TARGET = 1.3  # seeded keygen within 1.3x of the raw public-key-only call

_CRYPTOGRAPHY: dict[Algorithm, tuple[Any, Any, Any]] = {
    Algorithm.ML_DSA_44: (mldsa.MLDSA44PrivateKey, mldsa.MLDSA44PublicKey, ml_dsa_44),
    Algorithm.ML_DSA_65: (mldsa.MLDSA65PrivateKey, mldsa.MLDSA65PublicKey, ml_dsa_65),
    Algorithm.ML_DSA_87: (mldsa.MLDSA87PrivateKey, mldsa.MLDSA87PublicKey, ml_dsa_87),
}
_PQCRYPTO_SLH: dict[Algorithm, Any] = {
    Algorithm.SLH_DSA_SHA2_128S: slh_dsa_sha2_128s,
    Algorithm.SLH_DSA_SHAKE_128S: slh_dsa_shake_128s,
}


@dataclass(frozen=True)
class Row:
    """One measured operation: pqc time, raw library time (if any) and what 'raw' was."""

    algorithm: str
    operation: str
    pqc_us: float
    raw_us: float | None
    raw_call: str

    @property
    def ratio(self) -> float | None:
        """pqc time over raw time (None when there is no raw equivalent)."""
        return None if self.raw_us is None else self.pqc_us / self.raw_us


def per_op_us(fn: Callable[[], object], number: int, rounds: int = 5) -> float:
    """Median over ``rounds`` of the mean microseconds per call of ``fn`` (``number`` calls a round)."""
    fn()  # warm-up
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def paired_per_op_us(
    fn: Callable[[], object], raw: Callable[[], object], number: int, rounds: int = 25
) -> tuple[float, float]:
    """``per_op_us`` of ``fn`` and of ``raw``, their rounds alternating so that both
    medians see the same machine load (keygen rounds are short, load drifts)."""
    fn()  # warm-up
    raw()
    fn_samples: list[float] = []
    raw_samples: list[float] = []
    for _ in range(rounds):
        for call, samples in ((fn, fn_samples), (raw, raw_samples)):
            start = time.perf_counter()
            for _ in range(number):
                call()
            samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(fn_samples), statistics.median(raw_samples)


def bench_mldsa(algorithm: Algorithm) -> list[Row]:
    """keygen / sign (seed and expanded key) / verify for one ML-DSA level."""
    private_cls, public_cls, pqcrypto_module = _CRYPTOGRAPHY[algorithm]
    pair = pqc.generate_keypair(algorithm, SEED)
    raw_key = private_cls.from_seed_bytes(SEED)
    signature = raw_key.sign(MESSAGE, CONTEXT)
    name = algorithm.value

    def raw_keygen() -> bytes:
        return private_cls.from_seed_bytes(SEED).public_key().public_bytes_raw()

    keygen_us, raw_keygen_us = paired_per_op_us(lambda: pqc.generate_keypair(algorithm, SEED), raw_keygen, 10)
    seed_form_us, raw_seed_form_us = paired_per_op_us(
        lambda: pqc.generate_keypair(algorithm, SEED, expanded=False), raw_keygen, 10
    )
    return [
        Row(
            name,
            "keygen (seed -> pk + expanded sk)",
            keygen_us,
            raw_keygen_us,
            "cryptography from_seed -> pk (no expanded sk)",
        ),
        Row(
            name,
            "keygen (seed form: pk + 32-byte seed)",
            seed_form_us,
            raw_seed_form_us,
            "cryptography from_seed -> pk",
        ),
        Row(
            name,
            "keygen reference",
            per_op_us(pqcrypto_module.keygen, 20),
            None,
            "pqcrypto keygen (random: pk + expanded sk, no seed)",
        ),
        Row(
            name,
            "sign (32-byte seed)",
            per_op_us(lambda: pqc.sign(algorithm, pair.seed, MESSAGE, CONTEXT), 20),
            per_op_us(lambda: private_cls.from_seed_bytes(SEED).sign(MESSAGE, CONTEXT), 20),
            "cryptography from_seed + sign",
        ),
        Row(
            name,
            "sign (expanded sk)",
            per_op_us(lambda: pqc.sign(algorithm, pair.private_key, MESSAGE, CONTEXT), 5),
            per_op_us(lambda: pqcrypto_module.sign(pair.private_key, MESSAGE, CONTEXT), 5),
            "pqcrypto sign",
        ),
        Row(
            name,
            "verify",
            per_op_us(lambda: pqc.verify(algorithm, pair.public_key, MESSAGE, signature, CONTEXT), 100),
            per_op_us(lambda: public_cls.from_public_bytes(pair.public_key).verify(signature, MESSAGE, CONTEXT), 100),
            "cryptography from_public_bytes + verify",
        ),
        Row(
            name,
            "verify reference",
            per_op_us(lambda: pqcrypto_module.verify(pair.public_key, MESSAGE, signature, CONTEXT), 100),
            None,
            "pqcrypto verify",
        ),
    ]


def bench_slhdsa(algorithm: Algorithm, sign_rounds: int) -> list[Row]:
    """keygen (random and seeded) / sign / verify for one SLH-DSA-128s variant."""
    module = _PQCRYPTO_SLH[algorithm]
    pair = pqc.generate_keypair(algorithm)
    signature = module.sign(pair.private_key, MESSAGE, CONTEXT)
    name = algorithm.value
    return [
        Row(
            name,
            "keygen (random)",
            per_op_us(lambda: pqc.generate_keypair(algorithm), 2, 3),
            per_op_us(module.keygen, 2, 3),
            "pqcrypto keygen",
        ),
        Row(
            name,
            "keygen (48-byte seed)",
            per_op_us(lambda: pqc.generate_keypair(algorithm, pair.seed), 1, 1),
            None,
            "none (pqcrypto cannot take a seed)",
        ),
        Row(
            name,
            "sign",
            per_op_us(lambda: pqc.sign(algorithm, pair.private_key, MESSAGE, CONTEXT), 1, sign_rounds),
            per_op_us(lambda: module.sign(pair.private_key, MESSAGE, CONTEXT), 1, sign_rounds),
            "pqcrypto sign",
        ),
        Row(
            name,
            "verify",
            per_op_us(lambda: pqc.verify(algorithm, pair.public_key, MESSAGE, signature, CONTEXT), 20),
            per_op_us(lambda: module.verify(pair.public_key, MESSAGE, signature, CONTEXT), 20),
            "pqcrypto verify",
        ),
    ]


@dataclass(frozen=True)
class HybridFixture:
    """One ECDSA (EIP-191, r||s||v) and one ML-DSA-65 signature over the same message."""

    message: bytes
    ecdsa_signature: bytes
    ecdsa_public_key: bytes
    pq_public_key: bytes
    pq_signature: bytes


def hybrid_fixture() -> HybridFixture:
    """Deterministic inputs for the hybrid-attestation loops."""
    secret = hashlib.sha256(b"bench ecdsa key").digest()
    digest = pqc.message_digest("eip191", MESSAGE)
    recoverable = PrivateKey(secret).sign_recoverable(digest, hasher=None)
    pair = pqc.generate_keypair(Algorithm.ML_DSA_65, SEED)
    return HybridFixture(
        MESSAGE,
        recoverable[:64] + bytes([recoverable[64] + 27]),
        PrivateKey(secret).public_key.format(),
        pair.public_key,
        pqc.sign(Algorithm.ML_DSA_65, pair.seed, MESSAGE),
    )


def raw_hybrid_ceiling(iterations: int = 2000) -> float:
    """Hybrid attestations checked per second by the bare libraries (coincurve
    recovery over a precomputed digest + cryptography ML-DSA-65 verify): the
    crypto-only upper bound for POST /v1/sign/hybrid on one core."""
    f = hybrid_fixture()
    digest = pqc.message_digest("eip191", f.message)
    compact = f.ecdsa_signature[:64] + bytes([f.ecdsa_signature[64] - 27])
    start = time.perf_counter()
    for _ in range(iterations):
        PublicKey.from_signature_and_message(compact, digest, hasher=None)
        mldsa.MLDSA65PublicKey.from_public_bytes(f.pq_public_key).verify(f.pq_signature, f.message)
    return iterations / (time.perf_counter() - start)


def pqc_hybrid_throughput(iterations: int = 2000) -> float:
    """The same loop through pqc, per second: EIP-191 hashing, recovery with low-S
    and range checks, signer match, ML-DSA-65 verify with length checks."""
    f = hybrid_fixture()
    start = time.perf_counter()
    for _ in range(iterations):
        recovered = pqc.recover_public_key(pqc.message_digest("eip191", f.message), f.ecdsa_signature)
        pqc.require_signer(recovered, f.ecdsa_public_key)
        pqc.verify(Algorithm.ML_DSA_65, f.pq_public_key, f.message, f.pq_signature)
    return iterations / (time.perf_counter() - start)


def _print_rows(rows: list[Row]) -> None:
    print(f"{'algorithm':<19} {'operation':<34} {'pqc µs':>11} {'raw µs':>11} {'ratio':>6}  raw call")
    for row in rows:
        raw = f"{row.raw_us:11.1f}" if row.raw_us is not None else f"{'-':>11}"
        ratio = f"{row.ratio:6.2f}" if row.ratio is not None else f"{'-':>6}"
        print(f"{row.algorithm:<19} {row.operation:<34} {row.pqc_us:11.1f} {raw} {ratio}  {row.raw_call}")


def figures_of(rows: list[Row]) -> list[Figure]:
    """Each row as a figure beside its raw library call; seeded ML-DSA keygen, in both
    private-key forms, has a target (within ``KEYGEN_TARGET`` times the raw public-key-only
    call: the expanded form also derives the FIPS 204 secret key, which no library here exports)."""
    figures = []
    for row in rows:
        target = KEYGEN_TARGET if row.operation.startswith("keygen (seed") else None  # both forms
        figures.append(
            Figure(f"{row.algorithm} {row.operation}", row.pqc_us, "µs", row.raw_us, row.raw_call, target, "<=")
        )
    return figures


def measure() -> list[Figure]:
    """Run every measurement, print the table, and return the figures (µs per operation
    against the raw libraries, and the hybrid-check rate through pqc against the raw one)."""
    rows: list[Row] = []
    for algorithm in (Algorithm.ML_DSA_44, Algorithm.ML_DSA_65, Algorithm.ML_DSA_87):
        rows += bench_mldsa(algorithm)
        print(f"{algorithm.value} measured", flush=True)
    rows += bench_slhdsa(Algorithm.SLH_DSA_SHA2_128S, sign_rounds=3)
    rows += bench_slhdsa(Algorithm.SLH_DSA_SHAKE_128S, sign_rounds=1)
    _print_rows(rows)
    raw_rate = raw_hybrid_ceiling()
    pqc_rate = pqc_hybrid_throughput()
    print("(the ML-DSA expanded secret key is derived with numpy: pqc.mldsa_expand)", flush=True)
    return [
        *figures_of(rows),
        Figure(
            "hybrid check through pqc (low-S, signer match, length checks)",
            pqc_rate,
            "/s",
            raw_rate,
            "raw coincurve recover + ML-DSA-65 verify",
        ),
    ]


def main() -> int:
    """Run every measurement and print the table and the figures; 1 if keygen misses its target."""
    started = time.perf_counter()
    status = print_figures(measure())
    print(f"total bench time: {time.perf_counter() - started:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
