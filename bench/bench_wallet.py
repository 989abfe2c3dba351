"""Benchmark: a 1,000-address wallet scanned from its zpub, in a bounded number of lookup rounds.

Run with ``.venv/bin/python -m bench.bench_wallet [--receive 1000] [--change 200] [--rounds 1]``
(45 to 90 s on 2 cores at the defaults: one scan, 30 to 50 s, and its replay take most of it).

The wallet is BIP-84's test account (``m/84'/0'/0'``, the zpub of the BIP's vectors and of
``../shared/conformance/wallets/bip84.json``). A loopback Esplora (aiohttp, in a background
thread, as ``bench.loopback_chains``) serves its first ``--receive`` receive and ``--change``
change addresses as used: each funded once by one confirmed transaction (Esplora's JSON
shape), unspent, ``tx_count`` 1, with that transaction as its history and its output as its
coin. Every other address has zero stats and empty lists, as on a real server. A qday server
(a subprocess, one worker, ``QDAY_FAMILY_CHAINS=bitcoin``; the Bitcoin price read from the
Ethereum node of ``bench.loopback_chains``) answers ``POST /v1/scan/descriptor`` with
``gapLimit`` 20 for the zpub, once a round, fresh each time (descriptor scans are not cached).

Figures (medians of ``--rounds`` rounds):

- lookup rounds (``summary.lookupRounds``). Target: at most ceil(log2(receive / gap)) + 3.
  Each round looks up as many addresses as a branch has found used so far, so the windows
  double (20, 40, 80, ... 1,280: 7 rounds for 1,000 receive addresses); one window of
  ``gap`` addresses a round would take receive / gap = 50.
- derived addresses (``summary.derivedAddresses``) and the Esplora requests the scan made,
  in total and per derived address for the walk and the coins. Target: at most 3 per
  derived address (the stats of each, then the first history page and the coins of a used
  one).
- the key family's lookups per used address: a used P2WPKH address's P2PKH and P2SH-P2WPKH
  forms (one stats request each), looked up because without an exposure index a spend of
  the same key under another address type is seen nowhere else. Target: at most 2; with an
  index complete to the tip they are not made (every Bitcoin revelation is in it).
- scans not answered in full: answered 503 (SCAN_004, Bitcoin's source failing: its
  circuit breaker opened) or answered without the Bitcoin key family (``bitcoin`` in
  ``coverage.unavailable``: the siblings' lookup outlasted the family wait). Target: 0; a
  scan that skips work is not a fast scan. The other figures are of the answered scans
  (none when no scan was answered).
- wall time, as derived addresses per second, beside a ceiling measured in the same round:
  the scan's own Esplora requests, recorded by the loopback, replayed as plain GETs by one
  httpx client (the server's HTTP client) with as many in flight as the server's Esplora
  client allows (``EsploraClient``'s ``concurrency``), from a separate process as the
  server is. The ratio is replay time over scan time. No target: the scan also derives,
  scores and stores every used address, and how much of its time that may take is not
  settled; the figure is reported as measured.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import math
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
from aiohttp import web

from bench.bench_bip32 import ACCOUNT
from bench.httpload import Server, provision_secret_key, python_argv
from bench.loopback_chains import LoopbackChains
from bench.report import Figure, print_figures
from chains.bitcoin.wallet import parse_wallet
from chains.clients.esplora import EsploraClient
from chains.codecs.bitcoin import BitcoinAddress
from chains.registry import Network
from pqc.hashes import hash160, sha256
from tests.processes import free_port

GAP_LIMIT = 20
TIP = 900_000
VALUE_SAT = 50_000
FEE_SAT = 1_000
BLOCK_TIME = 1_700_000_000
REQUESTS_TARGET = 3.0
"""Esplora requests of the walk and the coins per derived address (module docstring)."""
FAMILY_TARGET = 2.0
"""Key-family lookups per used address (module docstring)."""
FAMILY = "stats of key-family siblings"
CONCURRENCY: int = inspect.signature(EsploraClient).parameters["concurrency"].default
"""Requests in flight the server's Esplora client allows, and so the replaying client."""
#: A DER-shaped ECDSA signature with SIGHASH_ALL and a valid key (the generator point): the
#: witness of the outside coin each funding transaction spends.
SIGNATURE = bytes.fromhex("3044" + "0220" + "11" * 32 + "0220" + "22" * 32 + "01")
FUNDER_KEY = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
FUNDER_SCRIPT = bytes([0x00, 0x14]) + hash160(FUNDER_KEY)
_ZERO_STATS = {"funded_txo_count": 0, "funded_txo_sum": 0, "spent_txo_count": 0, "spent_txo_sum": 0, "tx_count": 0}


def rounds_target(receive: int) -> int:
    """Most lookup rounds allowed for ``receive`` used receive addresses: ceil(log2(receive / gap)) + 3."""
    return math.ceil(math.log2(max(receive / GAP_LIMIT, 1))) + 3


def wallet_addresses(branch: int, count: int) -> list[BitcoinAddress]:
    """The first ``count`` addresses of the BIP-84 account's ``branch`` (0 receive, 1 change)."""
    descriptor = parse_wallet(ACCOUNT, Network.MAINNET).descriptors[0]
    return [BitcoinAddress.from_script_pubkey(descriptor.expand(i, branch).script_pubkey) for i in range(count)]


def _funded(address: BitcoinAddress, height: int) -> dict[str, bytes]:
    """The encoded Esplora answers of an address funded once at ``height``: stats, history, coins."""
    script = address.script_pubkey
    txid = sha256(script)[::-1].hex()
    status = {
        "confirmed": True,
        "block_height": height,
        "block_hash": sha256(txid.encode()).hex(),
        "block_time": BLOCK_TIME + height,
    }
    tx = {
        "txid": txid,
        "version": 2,
        "locktime": 0,
        "vin": [
            {
                "txid": sha256(bytes.fromhex(txid)).hex(),
                "vout": 0,
                "prevout": {
                    "scriptpubkey": FUNDER_SCRIPT.hex(),
                    "scriptpubkey_type": "v0_p2wpkh",
                    "value": VALUE_SAT + FEE_SAT,
                },
                "scriptsig": "",
                "witness": [SIGNATURE.hex(), FUNDER_KEY.hex()],
                "is_coinbase": False,
                "sequence": 0xFFFFFFFD,
            }
        ],
        "vout": [{"scriptpubkey": script.hex(), "scriptpubkey_address": str(address), "value": VALUE_SAT}],
        "fee": FEE_SAT,
        "status": status,
    }
    chain = {**_ZERO_STATS, "funded_txo_count": 1, "funded_txo_sum": VALUE_SAT, "tx_count": 1}
    stats = {"address": str(address), "chain_stats": chain, "mempool_stats": _ZERO_STATS}
    coins = [{"txid": txid, "vout": 0, "value": VALUE_SAT, "status": status}]
    return {"": json.dumps(stats).encode(), "txs": json.dumps([tx]).encode(), "utxo": json.dumps(coins).encode()}


class LoopbackEsplora:
    """An Esplora serving ``used`` addresses as funded once (``_funded``) and every other one
    as unseen, on 127.0.0.1 in a background thread. ``requests`` counts the requests of each
    kind and ``paths`` lists them in arrival order (``take`` hands both over and starts anew)."""

    def __init__(self, used: Sequence[BitcoinAddress]) -> None:
        self.answers = {str(a): _funded(a, TIP - 10_000 + i) for i, a in enumerate(used)}
        self.requests: Counter[str] = Counter()
        self.paths: list[str] = []
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(self._app(), access_log=None)
        self._thread = threading.Thread(target=self._loop.run_forever, name="loopback-esplora", daemon=True)

    def take(self) -> tuple[Counter[str], list[str]]:
        """The requests counted and listed since the last call (none may be in flight)."""
        taken = self.requests, self.paths
        self.requests, self.paths = Counter(), []
        return taken

    def _kind(self, parts: Sequence[str]) -> tuple[str, bytes | None]:
        """What a request asks for and its answer (None: no route)."""
        if parts == ["blocks", "tip", "height"]:
            return "tip", str(TIP).encode()
        if len(parts) < 2 or parts[0] != "address":
            return "unanswered", None
        answers = self.answers.get(parts[1])
        rest = "/".join(parts[2:])
        if rest == "":
            kind = "stats" if parts[1].startswith("bc1") else FAMILY
            unseen = {"address": parts[1], "chain_stats": _ZERO_STATS, "mempool_stats": _ZERO_STATS}
            return kind, answers[""] if answers else json.dumps(unseen).encode()
        if rest in ("txs", "utxo"):
            return rest, answers[rest] if answers else b"[]"
        if rest.startswith("txs/chain/"):
            return "txs/chain", b"[]"
        return "unanswered", None

    def _app(self) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            kind, body = self._kind(request.path.strip("/").split("/"))
            self.requests[kind] += 1
            self.paths.append(request.path)
            if body is None:
                return web.json_response({"error": f"no route {request.path}"}, status=404)
            return web.Response(body=body, content_type="application/json")

        app = web.Application()
        app.router.add_get("/{tail:.*}", handle)
        return app

    def __enter__(self) -> LoopbackEsplora:
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # started above
        self.url = f"http://127.0.0.1:{port}"
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()


async def _replay_async(base_url: str, paths: Sequence[str], concurrency: int) -> float:
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:

        async def get(path: str) -> None:
            async with limit:
                (await client.get(path)).raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(get(path) for path in paths))
        return time.perf_counter() - started


def replay(base_url: str, paths: Sequence[str], concurrency: int = CONCURRENCY) -> float:
    """Seconds one httpx client takes to GET every path of ``paths``, ``concurrency`` at a time."""
    return asyncio.run(_replay_async(base_url, paths, concurrency))


@dataclass(frozen=True, slots=True)
class _Round:
    """One answered scan: what its summary says, the Esplora requests it made and the seconds
    it took beside the seconds its requests took replayed."""

    derived: int
    used: int
    lookup_rounds: int
    requests: int
    family_requests: int
    scan_seconds: float
    replay_seconds: float


def _scan(client: httpx.Client, url: str, headers: dict[str, str], used: int) -> tuple[dict[str, Any], float]:
    """One descriptor scan of the account: the answer's envelope (``data``, or ``error`` when
    the server could not read Bitcoin, SCAN_004) and its seconds; an answer must list every
    used address and coin."""
    started = time.perf_counter()
    r = client.post(url, json={"descriptor": ACCOUNT, "gapLimit": GAP_LIMIT}, headers=headers)
    seconds = time.perf_counter() - started
    envelope: dict[str, Any] = r.json()
    if r.status_code == 503 and envelope["error"]["code"] == "SCAN_004":
        return envelope, seconds
    if r.status_code != 200:
        raise RuntimeError(f"scan answered {r.status_code}: {r.text[:500]}")
    summary = envelope["data"]["summary"]
    if summary["usedAddresses"] != used or len(envelope["data"]["coins"]) != used:
        raise RuntimeError(f"expected {used} used addresses and coins: {json.dumps(summary)}")
    return envelope, seconds


def measure(receive: int = 1_000, change: int = 200, rounds: int = 1) -> list[Figure]:
    """Scan the wallet ``rounds`` times, each answered scan beside the replay of its own
    Esplora requests (printing each round); returns the figures of the module docstring."""
    wallet = wallet_addresses(0, receive) + wallet_addresses(1, change)
    port = free_port()
    done: list[_Round] = []
    incomplete = 0
    with (
        tempfile.TemporaryDirectory(prefix="qday-bench-wallet-") as data_dir,
        LoopbackEsplora(wallet) as esplora,
        LoopbackChains(0.0) as chains,
        ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as replayer,
    ):
        env = {
            "QDAY_BITCOIN_ESPLORA_URL": esplora.url,
            "QDAY_ETHEREUM_RPC_URL": chains.urls["ethereum"],
            "QDAY_FAMILY_CHAINS": "bitcoin",
            "QDAY_RATE_LIMIT_MULTIPLIER": "100000",
            "QDAY_CUSTODY_BACKEND": "disabled",
        }
        argv = python_argv("-m", "cli.main", "serve", "--data-dir", data_dir, "--port", str(port))
        with Server(argv, port, env, ready_path="/v1/health"), httpx.Client(timeout=300) as client:
            headers = {"Authorization": f"Bearer {provision_secret_key(f'http://127.0.0.1:{port}')}"}
            replayer.submit(replay, esplora.url, ["/blocks/tip/height"]).result()  # the child started
            esplora.take()
            for i in range(rounds):
                envelope, seconds = _scan(client, f"http://127.0.0.1:{port}/v1/scan/descriptor", headers, len(wallet))
                counted, paths = esplora.take()
                kinds = ", ".join(f"{kind} {n:,}" for kind, n in counted.most_common())
                requests = f"{counted.total():,} Esplora requests ({kinds})"
                if "error" in envelope:
                    incomplete += 1
                    print(f"round {i + 1}/{rounds}: scan FAILED after {seconds:.2f} s, {requests}: {envelope['error']}")
                    if i + 1 < rounds:  # the breaker is open: wait for it before the next scan
                        time.sleep(envelope["error"]["details"].get("retry_after", 0))
                    continue
                replayed = replayer.submit(replay, esplora.url, paths).result()
                if esplora.take()[0].total() != len(paths) or counted["unanswered"]:
                    raise RuntimeError(f"requests the loopback Esplora did not answer as expected: {dict(counted)}")
                data = envelope["data"]
                unread = "bitcoin" in data["coverage"]["unavailable"]
                incomplete += unread
                summary = data["summary"]
                done.append(
                    _Round(
                        summary["derivedAddresses"],
                        summary["usedAddresses"],
                        summary["lookupRounds"],
                        counted.total(),
                        counted[FAMILY],
                        seconds,
                        replayed,
                    )
                )
                print(
                    f"round {i + 1}/{rounds}: scan {seconds:.2f} s, {summary['lookupRounds']} rounds, "
                    f"{summary['derivedAddresses']:,} derived, {requests}, "
                    f"{'WITHOUT' if unread else 'with'} the Bitcoin key family; "
                    f"the same requests replayed by one client, {CONCURRENCY} in flight: {replayed:.2f} s",
                    flush=True,
                )
    label = f"{receive:,} receive + {change:,} change used, gap {GAP_LIMIT}"
    return [
        *_figures(label, rounds_target(receive), done),
        Figure(
            f"descriptor scans not answered in full (503, or without the Bitcoin key family), {label}",
            incomplete,
            "scans",
            target=0,
            compare="<=",
            on="value",
        ),
    ]


def _figures(label: str, max_rounds: int, done: Sequence[_Round]) -> list[Figure]:
    """The figures of the answered scans (medians; none when no scan was answered)."""
    if not done:
        return []
    return [
        Figure(
            f"descriptor scan, {label}",
            statistics.median(r.derived / r.scan_seconds for r in done),
            "addresses/s",
            statistics.median(r.derived / r.replay_seconds for r in done),
            f"its Esplora GETs replayed by one httpx client, {CONCURRENCY} in flight",
        ),
        Figure(f"descriptor scan wall time, {label}", statistics.median(r.scan_seconds for r in done), "s"),
        Figure(
            f"descriptor scan lookup rounds, {label}",
            statistics.median(r.lookup_rounds for r in done),
            "rounds",
            target=max_rounds,
            compare="<=",
            on="value",
        ),
        Figure(f"descriptor scan derived addresses, {label}", statistics.median(r.derived for r in done), "addresses"),
        Figure(f"descriptor scan Esplora requests, {label}", statistics.median(r.requests for r in done), "requests"),
        Figure(
            f"descriptor scan Esplora requests per derived address (walk and coins), {label}",
            statistics.median((r.requests - r.family_requests) / r.derived for r in done),
            "requests",
            target=REQUESTS_TARGET,
            compare="<=",
            on="value",
        ),
        Figure(
            f"descriptor scan key-family lookups per used address (no exposure index), {label}",
            statistics.median(r.family_requests / r.used for r in done),
            "requests",
            target=FAMILY_TARGET,
            compare="<=",
            on="value",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the figures; exit 1 if one misses its target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--receive", type=int, default=1_000, help="used receive addresses")
    parser.add_argument("--change", type=int, default=200, help="used change addresses")
    parser.add_argument("--rounds", type=int, default=1, help="scans, each beside its replay")
    args = parser.parse_args(argv)
    return print_figures(measure(args.receive, args.change, args.rounds))


if __name__ == "__main__":
    sys.exit(main())
