"""Hybrid attestations per second over HTTP against the raw crypto ceiling.

The ceiling is ``bench.bench_pqc.raw_hybrid_ceiling``: coincurve recovery plus
cryptography ML-DSA-65 verification in a bare loop on one core, measured in the
same run. The service does that plus HTTP, auth, rate limiting, validation,
the registration lookup and a durable SQLite insert, with one worker.
Target: >= 50 % of the ceiling.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile

import httpx

import pqc
from bench.bench_pqc import raw_hybrid_ceiling
from bench.httpload import Server, load, provision_secret_key, python_argv
from bench.report import Figure, print_figures
from tests.processes import free_port
from tests.signing import eip191_signature, public_key

ROUNDS = 3
SECONDS = 4.0
TARGET = 0.50


def attestation_setup(base: str) -> tuple[str, bytes]:
    """A new account's secret key at ``base`` and the body of one hybrid attestation request
    (an ML-DSA-65 key generated there, its signature and an ECDSA one over the message)."""
    key = provision_secret_key(base)
    generated = httpx.post(
        f"{base}/v1/keys/generate",
        json={"algorithm": "ml-dsa-65", "chain": "ethereum"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    ).json()["data"]
    message = b"qday benchmark attestation"
    ecdsa_key = os.urandom(32)
    body = {
        "message": message.hex(),
        "ecdsaSignature": eip191_signature(ecdsa_key, message).hex(),
        "ecdsaPublicKey": public_key(ecdsa_key).hex(),
        "pqcSignature": pqc.sign("ml-dsa-65", bytes.fromhex(generated["seed"]), message).hex(),
        "pqcPublicKey": generated["publicKey"],
        "algorithm": "ml-dsa-65",
    }
    return key, json.dumps(body).encode()


def measure() -> list[Figure]:
    """Run the benchmark (printing each round) and return the attestation rate beside the raw ceiling."""
    port = free_port()
    data_dir = tempfile.mkdtemp(prefix="qday-bench-attest-")
    argv = python_argv("-m", "cli.main", "serve", "--data-dir", data_dir, "--port", str(port))
    with Server(argv, port, {"QDAY_RATE_LIMIT_MULTIPLIER": "100000"}, ready_path="/v1/health") as api:
        key, body = attestation_setup(f"http://127.0.0.1:{port}")
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        ceilings, rates = [], []
        for i in range(ROUNDS):
            ceilings.append(raw_hybrid_ceiling(1500))
            result = load(api.port, "POST", "/v1/sign/hybrid", headers, body, seconds=SECONDS, connections=8)
            if result.failures:
                raise RuntimeError(f"{result.failures} requests failed")
            rates.append(result.per_second)
            print(
                f"round {i + 1}/{ROUNDS}: raw recover+verify {ceilings[-1]:,.0f}/s, "
                f"HTTP attestations {rates[-1]:,.0f}/s",
                flush=True,
            )
    return [
        Figure(
            "hybrid attestations over HTTP",
            statistics.median(rates),
            "/s",
            statistics.median(ceilings),
            "raw recover+verify (one core)",
            TARGET,
        )
    ]


def main() -> int:
    """Run the benchmark and print the ratio; exit 1 if it misses the target."""
    return print_figures(measure())


if __name__ == "__main__":
    sys.exit(main())
