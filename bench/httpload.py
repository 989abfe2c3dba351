"""A small keep-alive HTTP/1.1 load generator and server launchers for the benchmarks.

Plain asyncio streams keep the client's own cost low, so the same client can
drive a bare handler (the ceiling) and the real service, and their ratio means
something on a small, noisy machine.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.processes import stop_group

REPO_ROOT = Path(__file__).resolve().parent.parent


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


def load(port: int, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"",
         seconds: float = 3.0, connections: int = 16) -> LoadResult:
    """Drive ``connections`` keep-alive connections for ``seconds`` and count."""
    request = _request_bytes(method, path, headers or {}, body)
    return asyncio.run(_run(port, request, seconds, connections))



class Server:
    """A server subprocess in its own process group, stopped on exit."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str] | None = None, ready_path: str = "/") -> None:
        self.port = port
        self.process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + 30
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
        total = 0
        pids = [self.process.pid]
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        if children.exists():
            pids += [int(p) for p in children.read_text().split()]
        for pid in pids:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except FileNotFoundError:
                continue
        return total

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
        r = c.post("/v1/auth/api-keys", json={"name": "bench", "type": "secret", "environment": "live"},
                   headers={"Authorization": f"Bearer {session}"})
        return r.json()["data"]["key"]


def python_argv(*args: str) -> list[str]:
    """Run a module or script with this interpreter."""
    return [sys.executable, *args]
