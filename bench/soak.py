"""Load and soak: a mixed workload at a steady rate against a real ``qday serve``.

Run ``python -m bench.soak [--rate 10] [--seconds 300] [--workers 1]`` (``make soak``;
``SOAK_RATE``/``SOAK_SECONDS``). It starts anvil (a funded account set for the scans) and
``qday serve`` on 127.0.0.1 the way the README does (its own data directory, its own SoftHSM2
token created on first start), registers an account, creates a secret key, moves the account
to the Pro plan with ``qday admin set-plan``, and then sends requests at ``--rate`` per
second for ``--seconds``, open loop (each request starts on its schedule, at most
``--in-flight`` at once), in a fixed mix: wallet scans (some forcing a refresh against
anvil), hybrid attestations (freshly signed, ECDSA + ML-DSA-44), verifications of
acknowledged attestations, key generation, managed signing, and key management (managed
key reads, audit log, usage, API-key and PQ-key lists, delete + cancel-deletion).

Bounded in time and count: at most ``rate × seconds`` scheduled requests, a 30 s timeout
for each, and a drain of at most 60 s. Every request, set-up included, is recorded with its
rate-limit window (``X-RateLimit-Reset``), so the 429s the plan's limits call for are known
exactly: in each (group, window) the server counts every request and refuses those past the
limit, so ``max(0, sent - limit)`` 429s are expected there and any other 429 is unexpected,
as is every other non-2xx, every 5xx and every transport error. Afterwards each
acknowledged attestation is fetched back (``POST /v1/verify`` by id: 200, valid). Printed:
p50/p99 latency per endpoint, counts by status and error code, expected and unexpected
429s, and the server's resident memory over time (sampled from ``/proc`` for the whole
process tree) with its least-squares slope. Exit 1 on any unexpected error, a missing
attestation, or memory that is not flat (the last quarter's median above the second
quarter's by more than 10 % + 16 MiB). Nothing asserts on latency.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import pqc
from api.ratelimit import RateGroup, limit_for
from bench.httpload import RssSampler, Server, python_argv
from storage.models import Plan
from tests.anvil import MISSING_ANVIL, Anvil, anvil_binary
from tests.processes import free_port
from tests.signing import eip191_signature, public_key

MIB = 2**20
PASSWORD = "soak passphrase " * 2
SCAN_ACCOUNTS = 24
REQUEST_TIMEOUT = 30.0
DRAIN_SECONDS = 60.0
#: Operation -> weight in the mix (per 100 requests).
MIX: dict[str, int] = {"scan": 30, "attest": 15, "verify": 20, "keygen": 8, "managed_sign": 7, "manage": 20}


@dataclass(frozen=True)
class Sample:
    """One answered (or failed) request: what it was, how it ended, and its rate-limit window."""

    endpoint: str
    group: RateGroup
    status: int  # 0: no HTTP answer (timeout, reset)
    code: str | None
    seconds: float
    window: int | None  # X-RateLimit-Reset
    limit: int | None  # X-RateLimit-Limit
    phase: str  # set-up, load or check


@dataclass
class Recorder:
    """The one HTTP client of a soak: every request goes through ``call`` and is recorded,
    so the per-window counts equal what the server's rate limiter counted."""

    http: httpx.AsyncClient
    samples: list[Sample] = field(default_factory=list)
    phase: str = "set-up"

    async def call(
        self, method: str, path: str, group: RateGroup, endpoint: str | None = None, **kwargs: Any
    ) -> httpx.Response | None:
        """Send one request, record it, and return the response (None on a transport error)."""
        started = time.perf_counter()
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            self.samples.append(
                Sample(
                    endpoint or f"{method} {path}",
                    group,
                    0,
                    type(exc).__name__,
                    time.perf_counter() - started,
                    None,
                    None,
                    self.phase,
                )
            )
            return None
        code = None
        if response.status_code >= 400:
            try:
                code = response.json()["error"]["code"]
            except (ValueError, KeyError, TypeError):
                code = "unparseable error body"
        reset, limit = response.headers.get("x-ratelimit-reset"), response.headers.get("x-ratelimit-limit")
        self.samples.append(
            Sample(
                endpoint or f"{method} {path}",
                group,
                response.status_code,
                code,
                time.perf_counter() - started,
                int(reset) if reset else None,
                int(limit) if limit else None,
                self.phase,
            )
        )
        return response


@dataclass
class Tenant:
    """What the workload needs from the set-up: credentials, keys and scan targets."""

    email: str
    auth: dict[str, str]
    seed: bytes  # of the registered ML-DSA-44 key the attestations are signed with
    pq_public_key: str
    managed_signer: str
    managed_lifecycle: str
    addresses: list[str]
    attestations: list[str] = field(default_factory=list)
    lifecycle_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _data(response: httpx.Response | None, status: int) -> dict[str, Any]:
    if response is None or response.status_code != status:
        raise RuntimeError(f"set-up request failed: {None if response is None else response.text}")
    return response.json()["data"]


async def set_up(rec: Recorder, data_dir: Path, addresses: list[str]) -> Tenant:
    """Account, secret key, Pro plan (``qday admin set-plan``), a registered ML-DSA-44 key,
    two managed keys and one first attestation, all through the recorder."""
    email = f"soak-{os.getpid()}@example.com"
    _data(await rec.call("POST", "/v1/auth/register", RateGroup.AUTH, json={"email": email, "password": PASSWORD}), 201)
    session = _data(
        await rec.call("POST", "/v1/auth/login", RateGroup.AUTH, json={"email": email, "password": PASSWORD}), 200
    )["token"]
    key = _data(
        await rec.call(
            "POST",
            "/v1/auth/api-keys",
            RateGroup.AUTH,
            json={"name": "soak", "type": "secret", "environment": "live"},
            headers={"Authorization": f"Bearer {session}"},
        ),
        201,
    )["key"]
    subprocess.run(
        [sys.executable, "-m", "cli.main", "admin", "set-plan", email, "pro", "--data-dir", str(data_dir)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    auth = {"Authorization": f"Bearer {key}"}
    generated = _data(
        await rec.call(
            "POST",
            "/v1/keys/generate",
            RateGroup.KEYGEN,
            headers=auth,
            json={"algorithm": "ml-dsa-44", "chain": "ethereum"},
        ),
        201,
    )
    managed = [
        _data(
            await rec.call(
                "POST",
                "/v1/keys/generate",
                RateGroup.KEYGEN,
                headers=auth,
                json={"algorithm": "ml-dsa-65", "chain": "ethereum", "custody": "managed"},
            ),
            201,
        )["id"]
        for _ in range(2)
    ]
    tenant = Tenant(
        email, auth, bytes.fromhex(generated["seed"]), generated["publicKey"], managed[0], managed[1], addresses
    )
    await attest(rec, tenant, random.Random(0))
    if not tenant.attestations:
        raise RuntimeError("the first attestation was refused")
    return tenant


# --- The operations of the mix -------------------------------------------------------------


async def scan(rec: Recorder, t: Tenant, rnd: random.Random) -> None:
    """A wallet scan of a funded anvil account; one in three forces a refresh (a real round trip)."""
    await rec.call(
        "POST",
        "/v1/scan/wallet",
        RateGroup.SCAN,
        headers=t.auth,
        json={"address": rnd.choice(t.addresses), "refresh": rnd.random() < 1 / 3},
    )


async def attest(rec: Recorder, t: Tenant, rnd: random.Random) -> None:
    """A hybrid attestation over a fresh message, signed here as a wallet and a PQ signer would."""
    message = f"soak attestation {rnd.getrandbits(64):016x}".encode()
    ecdsa_key = rnd.randbytes(31) + b"\x01"
    body = {
        "message": message.hex(),
        "ecdsaSignature": eip191_signature(ecdsa_key, message).hex(),
        "ecdsaPublicKey": public_key(ecdsa_key).hex(),
        "algorithm": "ml-dsa-44",
        "pqcSignature": pqc.sign("ml-dsa-44", t.seed, message).hex(),
        "pqcPublicKey": t.pq_public_key,
    }
    response = await rec.call("POST", "/v1/sign/hybrid", RateGroup.SIGN, headers=t.auth, json=body)
    if response is not None and response.status_code == 201:
        t.attestations.append(response.json()["data"]["id"])


async def verify(rec: Recorder, t: Tenant, rnd: random.Random) -> None:
    """Verify an acknowledged attestation by id."""
    await rec.call(
        "POST", "/v1/verify", RateGroup.VERIFY, headers=t.auth, json={"attestationId": rnd.choice(t.attestations)}
    )


async def keygen(rec: Recorder, t: Tenant, rnd: random.Random) -> None:
    """Generate an ML-DSA key pair on the server."""
    await rec.call(
        "POST",
        "/v1/keys/generate",
        RateGroup.KEYGEN,
        headers=t.auth,
        json={"algorithm": rnd.choice(["ml-dsa-44", "ml-dsa-65"]), "chain": "ethereum"},
    )


async def managed_sign(rec: Recorder, t: Tenant, rnd: random.Random) -> None:
    """Sign with the managed key that is never deleted."""
    await rec.call(
        "POST",
        "/v1/sign/managed",
        RateGroup.SIGN,
        headers=t.auth,
        json={"key_id": t.managed_signer, "message": rnd.randbytes(32).hex(), "algorithm": "ml-dsa-65"},
    )


async def manage(rec: Recorder, t: Tenant, rnd: random.Random) -> None:
    """One key-management request; the delete + cancel-deletion pair on the second managed key
    runs one at a time (a read is sent instead while it is under way)."""
    choice = rnd.randrange(6)
    if choice == 0 and not t.lifecycle_lock.locked():
        async with t.lifecycle_lock:
            await rec.call(
                "DELETE", f"/v1/keys/{t.managed_lifecycle}", RateGroup.ACCOUNT, "DELETE /v1/keys/{id}", headers=t.auth
            )
            await rec.call(
                "POST",
                f"/v1/keys/{t.managed_lifecycle}/cancel-deletion",
                RateGroup.ACCOUNT,
                "POST /v1/keys/{id}/cancel-deletion",
                headers=t.auth,
            )
        return
    path, endpoint = [
        (f"/v1/keys/{t.managed_signer}", "GET /v1/keys/{id}"),
        (f"/v1/keys/{t.managed_signer}", "GET /v1/keys/{id}"),
        (f"/v1/keys/{t.managed_lifecycle}/events", "GET /v1/keys/{id}/events"),
        ("/v1/usage", "GET /v1/usage"),
        ("/v1/auth/api-keys", "GET /v1/auth/api-keys"),
        ("/v1/keys", "GET /v1/keys"),
    ][choice]
    await rec.call("GET", path, RateGroup.ACCOUNT, endpoint, headers=t.auth)


OPERATIONS: dict[str, Callable[[Recorder, Tenant, random.Random], Any]] = {
    "scan": scan,
    "attest": attest,
    "verify": verify,
    "keygen": keygen,
    "managed_sign": managed_sign,
    "manage": manage,
}


async def drive(
    rec: Recorder, tenant: Tenant, rate: float, seconds: float, in_flight: int, seed: int, mix: dict[str, int]
) -> int:
    """Start ``rate × seconds`` operations drawn from ``mix`` on schedule (never more than
    ``in_flight`` at once), wait for them (at most ``DRAIN_SECONDS`` more); returns how many
    started late."""
    rnd = random.Random(seed)
    names, weights = list(mix), list(mix.values())
    gate = asyncio.Semaphore(in_flight)
    total, late, started = math.ceil(rate * seconds), 0, time.monotonic()
    tasks = []

    async def one(name: str, op_seed: int) -> None:
        try:
            await OPERATIONS[name](rec, tenant, random.Random(op_seed))
        finally:
            gate.release()

    for i in range(total):
        delay = started + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if gate.locked():
            late += 1
        await gate.acquire()
        tasks.append(asyncio.create_task(one(rnd.choices(names, weights)[0], rnd.getrandbits(64))))
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=DRAIN_SECONDS + REQUEST_TIMEOUT)
    return late


async def check_attestations(rec: Recorder, tenant: Tenant) -> list[str]:
    """Fetch every acknowledged attestation back by id; the ones that are not there and valid.
    A 429 (the verify limit) waits for ``Retry-After`` and asks again."""
    missing = []
    for attestation_id in tenant.attestations:
        for _ in range(3):
            response = await rec.call(
                "POST", "/v1/verify", RateGroup.VERIFY, headers=tenant.auth, json={"attestationId": attestation_id}
            )
            if response is None or response.status_code != 429:
                break
            await asyncio.sleep(int(response.headers.get("retry-after", "1")))
        if response is None or response.status_code != 200 or response.json()["data"]["valid"] is not True:
            missing.append(attestation_id)
    return missing


# --- Judging and reporting ----------------------------------------------------------------


def expected_limits(multiplier: float) -> dict[RateGroup, int]:
    """Requests per minute the server allows the Pro plan in each group (the server's own
    table; the enterprise factor does not apply to Pro)."""
    return {group: limit_for(group, Plan.PRO, 1, multiplier) for group in RateGroup}


def judge(samples: list[Sample], limits: dict[RateGroup, int]) -> dict[str, Any]:
    """Counts by status and code, and the unexpected responses.

    In each (group, window) the server refuses every request past the limit, so exactly
    ``max(0, sent - limit)`` 429s are expected there. A 429 beyond that, a limit header that
    differs from the plan's, any other 4xx or 5xx, and any transport error are unexpected."""
    by_window: dict[tuple[RateGroup, int], list[Sample]] = defaultdict(list)
    unexpected: Counter[str] = Counter()
    for s in samples:
        if s.window is not None:
            by_window[(s.group, s.window)].append(s)
        if s.status == 0 or (s.status >= 400 and s.status != 429):
            unexpected[f"{s.endpoint} {s.status} {s.code}"] += 1
        if s.limit is not None and s.limit != limits[s.group]:
            unexpected[f"{s.endpoint} limit header {s.limit} != {limits[s.group]}"] += 1
    expected_429 = 0
    for (group, _), window in by_window.items():
        want = max(0, len(window) - limits[group])
        got = sum(s.status == 429 for s in window)
        expected_429 += want
        if got != want:
            unexpected[f"{group} window: {got} 429s where the limit {limits[group]} calls for {want}"] += 1
    return {
        "by_status": Counter(s.status for s in samples),
        "by_code": Counter(s.code for s in samples if s.code),
        "expected_429": expected_429,
        "unexpected": unexpected,
    }


def latency_table(samples: list[Sample]) -> list[tuple[str, int, float, float]]:
    """(endpoint, requests, p50 ms, p99 ms) of the answered requests of the load phase."""
    by_endpoint: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        if s.phase == "load" and s.status:
            by_endpoint[s.endpoint].append(s.seconds * 1000)
    rows = []
    for endpoint, times in sorted(by_endpoint.items()):
        times.sort()
        rows.append(
            (endpoint, len(times), statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))])
        )
    return rows


def memory_verdict(sampler: RssSampler) -> dict[str, float | bool]:
    """Resident memory over the load: first, peak, last, slope (MiB/min after the first
    quarter) and whether it is flat (last quarter's median within 10 % + 16 MiB of the
    second quarter's)."""
    values = [rss for _, rss in sampler.samples]
    quarter = max(1, len(values) // 4)
    second, last = statistics.median(values[quarter : 2 * quarter] or values), statistics.median(values[-quarter:])
    duration = sampler.samples[-1][0] if sampler.samples else 0.0
    return {
        "first_mib": values[0] / MIB,
        "peak_mib": max(values) / MIB,
        "last_mib": values[-1] / MIB,
        "slope_mib_per_min": sampler.slope_per_minute(duration / 4) / MIB,
        "flat": last <= second * 1.10 + 16 * MIB,
    }


@dataclass
class SoakResult:
    """Everything a soak measured."""

    samples: list[Sample]
    verdict: dict[str, Any]
    latencies: list[tuple[str, int, float, float]]
    memory: dict[str, float | bool]
    attestations: int
    missing_attestations: list[str]
    late_starts: int
    seconds: float

    @property
    def ok(self) -> bool:
        """No unexpected error and every acknowledged attestation retrievable (memory aside)."""
        return not self.verdict["unexpected"] and not self.missing_attestations


def run_soak(
    rate: float,
    seconds: float,
    workers: int = 1,
    in_flight: int = 32,
    multiplier: float = 1.0,
    seed: int = 1,
    mix: dict[str, int] | None = None,
    progress: Callable[[str], None] = print,
) -> SoakResult:
    """Start anvil and ``qday serve``, run the set-up, the load and the check, stop both and
    remove the server's data directory."""
    binary = anvil_binary()
    if binary is None:
        raise RuntimeError(MISSING_ANVIL)
    node = Anvil(binary, chain_id=1)
    data_dir = Path(tempfile.mkdtemp(prefix="qday-soak-"))
    env = {
        "SOFTHSM2_CONF": "",
        "QDAY_SECRET_KEY": "",
        "QDAY_ETHEREUM_RPC_URL": node.url,
        "QDAY_FAMILY_CHAINS": "ethereum",  # the other chains' public endpoints are not reachable here
        "QDAY_RATE_LIMIT_MULTIPLIER": str(multiplier),
    }
    try:
        addresses = [node.new_account(10**18 + i).address for i in range(SCAN_ACCOUNTS)]
        progress(f"[soak] anvil on {node.url}; starting qday serve ({workers} worker(s)) in {data_dir}")
        port = free_port()
        argv = python_argv(
            "-m", "cli.main", "serve", "--data-dir", str(data_dir), "--port", str(port), "--workers", str(workers)
        )
        with Server(argv, port, env, ready_path="/v1/health") as server:
            return asyncio.run(
                _soak(server, data_dir, addresses, rate, seconds, in_flight, multiplier, seed, mix or MIX, progress)
            )
    finally:
        node.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


async def _soak(
    server: Server,
    data_dir: Path,
    addresses: list[str],
    rate: float,
    seconds: float,
    in_flight: int,
    multiplier: float,
    seed: int,
    mix: dict[str, int],
    progress: Callable[[str], None],
) -> SoakResult:
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    base_url = f"http://127.0.0.1:{server.port}"
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT, limits=limits) as http:
        rec = Recorder(http)
        tenant = await set_up(rec, data_dir, addresses)
        progress(
            f"[soak] {rate:g} req/s for {seconds:g} s (at most {math.ceil(rate * seconds)} requests, "
            f"{in_flight} in flight), mix {mix}"
        )
        rec.phase = "load"
        started = time.monotonic()
        with RssSampler(server.process.pid, interval=1.0) as sampler:
            reporter = asyncio.create_task(_report_progress(rec, sampler, started, seconds, progress))
            try:
                late = await drive(rec, tenant, rate, seconds, in_flight, seed, mix)
            finally:
                reporter.cancel()
        elapsed = time.monotonic() - started
        rec.phase = "check"
        progress(f"[soak] load done in {elapsed:.0f} s; fetching {len(tenant.attestations)} attestations back")
        missing = await check_attestations(rec, tenant)
    verdict = judge(rec.samples, expected_limits(multiplier))
    return SoakResult(
        rec.samples,
        verdict,
        latency_table(rec.samples),
        memory_verdict(sampler),
        len(tenant.attestations),
        missing,
        late,
        elapsed,
    )


async def _report_progress(
    rec: Recorder, sampler: RssSampler, started: float, seconds: float, progress: Callable[[str], None]
) -> None:
    while True:
        await asyncio.sleep(10)
        load = [s for s in rec.samples if s.phase == "load"]
        statuses = Counter(s.status for s in load)
        rss = sampler.samples[-1][1] / MIB if sampler.samples else 0.0
        progress(
            f"[soak] {time.monotonic() - started:4.0f}/{seconds:.0f} s: {len(load)} answered "
            f"{dict(sorted(statuses.items()))}, server RSS {rss:.0f} MiB"
        )


def print_result(result: SoakResult) -> None:
    """The soak's report: latencies, statuses, 429 accounting, memory, attestations."""
    print(f"\n{'endpoint':<40} {'requests':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for endpoint, count, p50, p99 in result.latencies:
        print(f"{endpoint:<40} {count:>8} {p50:>8.1f} {p99:>8.1f}")
    v = result.verdict
    print(f"\nresponses by status: {dict(sorted(v['by_status'].items()))}; error codes: {dict(v['by_code'])}")
    print(
        f"{len(result.samples)} requests, load phase {result.seconds:.0f} s; 429s expected by the plan's limits: "
        f"{v['expected_429']}; late starts (in-flight cap): {result.late_starts}"
    )
    print(f"unexpected: {dict(v['unexpected']) or 'none'}")
    m = result.memory
    print(
        f"server RSS: first {m['first_mib']:.0f} MiB, peak {m['peak_mib']:.0f} MiB, last {m['last_mib']:.0f} MiB, "
        f"slope {m['slope_mib_per_min']:+.2f} MiB/min -> {'flat' if m['flat'] else 'NOT flat'}"
    )
    print(
        f"attestations acknowledged: {result.attestations}, not retrievable afterwards: "
        f"{len(result.missing_attestations)}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the soak and print its report; exit 1 on an unexpected error, a lost attestation or growing memory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=10.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=300.0, help="duration of the load")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--rate-limit-multiplier", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    result = run_soak(
        args.rate,
        args.seconds,
        args.workers,
        args.in_flight,
        args.rate_limit_multiplier,
        args.seed,
        progress=lambda line: print(line, flush=True),
    )
    print_result(result)
    return 0 if result.ok and result.memory["flat"] else 1


if __name__ == "__main__":
    sys.exit(main())
