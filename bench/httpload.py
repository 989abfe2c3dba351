"""A small keep-alive HTTP/1.1 load generator and server launchers for the benchmarks.

Plain asyncio streams keep the client's own cost low, so the same client can
drive a bare handler (the ceiling) and the real service, and their ratio means
something on a small, noisy machine.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.processes import stop_group

REPO_ROOT = Path(__file__).resolve().parent.parent
STARTUP_SECONDS = 120  # a loaded 2-core machine can take over 30 s to import and start the API


@dataclass(frozen=True)
class LoadResult:
    """Completed requests, failures (non-2xx or socket errors) and the rate."""

    requests: int
    failures: int
    seconds: float

    @property
    def per_second(self) -> float:
        """Successful requests per second."""
        return (self.requests - self.failures) / self.seconds


def _request_bytes(method: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _worker(port: int, request: bytes, deadline: float, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < deadline:
            writer.write(request)
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            counts[0] += 1
            if not status_line[9:10] == b"2":
                counts[1] += 1
    finally:
        writer.close()


async def _run(port: int, request: bytes, seconds: float, connections: int) -> LoadResult:
    counts = [0, 0]
    start = time.perf_counter()
    deadline = start + seconds
    await asyncio.gather(*(_worker(port, request, deadline, counts) for _ in range(connections)))
    return LoadResult(counts[0], counts[1], time.perf_counter() - start)


def load(
    port: int,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    seconds: float = 3.0,
    connections: int = 16,
) -> LoadResult:
    """Drive ``connections`` keep-alive connections for ``seconds`` and count."""
    request = _request_bytes(method, path, headers or {}, body)
    return asyncio.run(_run(port, request, seconds, connections))


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live descendant (from ``/proc/<pid>/task/*/children``)."""
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                pending += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return tree


def tree_memory(pid: int) -> tuple[int, int]:
    """Summed ``VmRSS`` (resident now) and ``VmHWM`` (peak resident) of the process tree, in bytes."""
    rss = hwm = 0
    for member in process_tree(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text().splitlines()
        except OSError:
            continue
        for line in status:
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                hwm += int(line.split()[1]) * 1024
    return rss, hwm


@dataclass
class RssSampler:
    """Samples a process tree's resident memory every ``interval`` seconds in a thread,
    for peak and growth over time while a load runs (``with RssSampler(pid) as s: …``)."""

    pid: int
    interval: float = 0.5
    samples: list[tuple[float, int]] = field(default_factory=list)
    peak_hwm: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._started = time.monotonic()

    def _sample(self) -> None:
        while True:
            rss, hwm = tree_memory(self.pid)
            self.samples.append((time.monotonic() - self._started, rss))
            self.peak_hwm = max(self.peak_hwm, hwm)
            if self._stop.wait(self.interval):
                return

    @property
    def peak(self) -> int:
        """The largest sampled resident size, bytes."""
        return max((rss for _, rss in self.samples), default=0)

    def slope_per_minute(self, skip_seconds: float = 0.0) -> float:
        """Least-squares growth of the resident size in bytes per minute, ignoring the first
        ``skip_seconds`` (warm-up); 0 with fewer than three samples."""
        kept = [(t, rss) for t, rss in self.samples if t >= skip_seconds]
        if len(kept) < 3:
            return 0.0
        return statistics.linear_regression([t for t, _ in kept], [rss for _, rss in kept]).slope * 60

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


class Server:
    """A server subprocess in its own process group, stopped on exit."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str] | None = None, ready_path: str = "/") -> None:
        self.port = port
        self.process = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}{ready_path}", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{argv} did not start")

    def rss_bytes(self) -> int:
        """Resident memory of the server process tree (all workers)."""
        return tree_memory(self.process.pid)[0]

    def stop(self) -> None:
        """Terminate the whole process group."""
        stop_group(self.process)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def provision_secret_key(base_url: str, email: str = "bench@example.com") -> str:
    """Register an account on a running server and return a new live secret key."""
    password = "p" * 16
    with httpx.Client(base_url=base_url, timeout=60) as c:
        c.post("/v1/auth/register", json={"email": email, "password": password})
        session = c.post("/v1/auth/login", json={"email": email, "password": password}).json()["data"]["token"]
        r = c.post(
            "/v1/auth/api-keys",
            json={"name": "bench", "type": "secret", "environment": "live"},
            headers={"Authorization": f"Bearer {session}"},
        )
        return r.json()["data"]["key"]


def python_argv(*args: str) -> list[str]:
    """Run a module or script with this interpreter."""
    return [sys.executable, *args]
