"""Solana through its JSON-RPC API: accounts and signatures of many addresses per POST.

One JSON-RPC batch carries ``getMultipleAccounts`` (100 keys per call: lamports, owner,
executable, and the slot) and one ``getSignaturesForAddress`` per address (newest first,
``page_limit`` per page). Full pages are followed with ``before`` up to ``max_pages``.

Exposure rule. A wallet address *is* its ed25519 public key, so:

- an executable account (a program): ``CONTRACT``, ``NOT_EXPOSED``;
- an off-curve address (a program-derived address) has no private key at all: ``PDA``,
  ``NOT_EXPOSED`` itself (whoever controls its program holds the keys that matter);
- an on-curve account owned by another program than System (token, stake, vote ...
  accounts): its lamports move only as that program allows, not with the address's key:
  ``CONTRACT``, ``NOT_EXPOSED``;
- any other on-curve address (System-owned, or no account yet) is a wallet: ``EOA``,
  ``EXPOSED_AT_REST``, ``public_key`` = the 32 address bytes, ``ed25519``.

``inspect`` reports each account's owner program (``Observation`` has no owner field).

``outbound_tx_count`` is 0: telling which signatures the address paid for would take one
``getTransaction`` per signature, and the exposure does not depend on it. ``tx_count``
counts signatures, a lower bound when the page cap was reached.

Why not solana-py's ``AsyncClient`` (0.41): it builds its own ``httpx2`` client, so it cannot
share the service's ``httpx.AsyncClient``, timeouts, retries and circuit breaker. It sends
one HTTP request per call. And its solders-based parsing mishandles error answers: a
``-32000`` error comes back as a bare ``int`` instead of raising, and a ``-32005`` error
without ``data`` makes the Rust parser panic (``pyo3_runtime.PanicException``, a
``BaseException``). Here the JSON-RPC envelope is checked by ``chains.clients.jsonrpc``
and the results are validated field by field. ``solders`` still decides on-curve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from chains.clients.base import CountsAndTimes, Snapshot, register, typed_addresses
from chains.clients.jsonrpc import Call, JsonRpc, RpcError
from chains.clients.transport import Timing, Transport
from chains.codecs.address import Address
from chains.codecs.solana import SolanaAddress
from chains.endpoints import EndpointConfig, EnvironmentEndpoints
from chains.errors import MalformedChainData
from chains.observation import AccountType, Exposure, Observation
from chains.registry import Chain, Family

SYSTEM_PROGRAM = "11111111111111111111111111111111"
ACCOUNTS_PER_CALL = 100
"""``getMultipleAccounts`` takes at most 100 keys."""


@dataclass(frozen=True, slots=True)
class SolanaAccount:
    """An account as the chain holds it; ``owner`` None when the account does not exist."""

    address: str
    lamports: int
    owner: str | None
    executable: bool

    @property
    def program_controlled(self) -> bool:
        """True for a program, or an account some program other than System owns."""
        return self.executable or (self.owner is not None and self.owner != SYSTEM_PROGRAM)


@dataclass(frozen=True, slots=True)
class SignatureHistory:
    """Signatures of one address: how many, their block times, and whether all were seen."""

    count: int
    block_times: tuple[int, ...]
    complete: bool


def _account(address: str, value: Any, what: str) -> SolanaAccount:
    if value is None:
        return SolanaAccount(address, 0, None, False)
    if not isinstance(value, Mapping):
        raise MalformedChainData(f"{what}: account of {address} is not an object")
    lamports, owner, executable = value.get("lamports"), value.get("owner"), value.get("executable")
    if isinstance(lamports, bool) or not isinstance(lamports, int) or lamports < 0:
        raise MalformedChainData(f"{what}: lamports of {address} must be a non-negative integer")
    if not isinstance(owner, str) or not isinstance(executable, bool):
        raise MalformedChainData(f"{what}: owner/executable of {address} missing")
    return SolanaAccount(address, lamports, owner, executable)


def _chunks(keys: Sequence[str]) -> list[Sequence[str]]:
    return [keys[i : i + ACCOUNTS_PER_CALL] for i in range(0, len(keys), ACCOUNTS_PER_CALL)]


class SolanaClient:
    """Observes Solana addresses through one JSON-RPC endpoint."""

    source = "solana-rpc"

    def __init__(
        self,
        endpoint: EndpointConfig,
        http: httpx.AsyncClient | None = None,
        *,
        page_limit: int = 1000,
        max_pages: int = 1,
        max_batch: int = 100,
        commitment: str = "finalized",
        timing: Timing | None = None,
    ) -> None:
        """``page_limit`` signatures per page (1 to 1000), ``max_pages`` pages per address;
        ``max_batch`` calls per POST (public endpoints limit batches)."""
        if not 1 <= page_limit <= 1000 or max_pages < 1:
            raise ValueError("page_limit must be 1..1000 and max_pages at least 1")
        self.chain = Chain.SOLANA
        self.rpc = JsonRpc(Transport(endpoint, http, "solana JSON-RPC", timing), max_batch=max_batch)
        self._page_limit = page_limit
        self._max_pages = max_pages
        self._commitment = commitment

    def _accounts_call(self, keys: Sequence[str]) -> Call:
        return Call(
            "getMultipleAccounts",
            (
                list(keys),
                {"encoding": "base64", "dataSlice": {"offset": 0, "length": 0}, "commitment": self._commitment},
            ),
        )

    def _signatures_call(self, key: str, before: str | None) -> Call:
        config: dict[str, Any] = {"limit": self._page_limit, "commitment": self._commitment}
        if before is not None:
            config["before"] = before
        return Call("getSignaturesForAddress", (key, config))

    async def _fetch(self, keys: Sequence[str]) -> tuple[int, list[SolanaAccount], list[SignatureHistory]]:
        """Accounts and signature histories of ``keys``: one batch, plus one per extra page."""
        chunks = _chunks(keys)
        calls = [self._accounts_call(chunk) for chunk in chunks] + [self._signatures_call(k, None) for k in keys]
        results = await self.rpc.batch(calls)
        slot, accounts = self._read_accounts(chunks, results[: len(chunks)])
        what = f"{self.rpc.transport.label} getSignaturesForAddress"
        pages = [self._signatures(result, what) for result in results[len(chunks) :]]
        return slot, accounts, await self._follow_pages(keys, pages)

    def _read_accounts(
        self, chunks: Sequence[Sequence[str]], results: Sequence[Any]
    ) -> tuple[int, list[SolanaAccount]]:
        """The accounts of ``getMultipleAccounts`` answers, and the lowest slot they reflect."""
        what = f"{self.rpc.transport.label} getMultipleAccounts"
        slots, accounts = [], []
        for chunk, result in zip(chunks, results, strict=True):
            slot, values = self._context_value(result, what)
            if not isinstance(values, list) or len(values) != len(chunk):
                raise MalformedChainData(f"{what}: expected {len(chunk)} accounts")
            slots.append(slot)
            accounts += [_account(k, v, what) for k, v in zip(chunk, values, strict=True)]
        return min(slots, default=0), accounts

    @staticmethod
    def _context_value(result: Any, what: str) -> tuple[int, Any]:
        if isinstance(result, RpcError):
            raise result
        if not isinstance(result, Mapping) or not isinstance(result.get("context"), Mapping):
            raise MalformedChainData(f"{what}: no context/value")
        slot = result["context"].get("slot")
        if isinstance(slot, bool) or not isinstance(slot, int):
            raise MalformedChainData(f"{what}: context.slot is not an integer")
        return slot, result.get("value")

    @staticmethod
    def _signatures(result: Any, what: str) -> list[Mapping[str, Any]]:
        if isinstance(result, RpcError):
            raise result
        if not isinstance(result, list) or not all(
            isinstance(item, Mapping) and isinstance(item.get("signature"), str) for item in result
        ):
            raise MalformedChainData(f"{what}: expected a list of signature objects")
        return result

    async def _follow_pages(self, keys: Sequence[str], first: list[list[Mapping[str, Any]]]) -> list[SignatureHistory]:
        """Fetch further pages of full first pages, all addresses in one batch per round."""
        pages = [list(page) for page in first]
        open_ = [i for i, page in enumerate(pages) if len(page) == self._page_limit]
        for _ in range(self._max_pages - 1):
            if not open_:
                break
            results = await self.rpc.batch([self._signatures_call(keys[i], pages[i][-1]["signature"]) for i in open_])
            still = []
            for i, result in zip(open_, results, strict=True):
                page = self._signatures(result, f"{self.rpc.transport.label} getSignaturesForAddress")
                pages[i] += page
                if len(page) == self._page_limit:
                    still.append(i)
            open_ = still
        capped = set(open_)
        return [
            SignatureHistory(
                count=len(page),
                block_times=tuple(t for item in page if isinstance(t := item.get("blockTime"), int)),
                complete=i not in capped,
            )
            for i, page in enumerate(pages)
        ]

    async def inspect(self, addresses: Sequence[Address]) -> list[SolanaAccount]:
        """The raw account state (lamports, owner program, executable) of each address."""
        chunks = _chunks([str(a) for a in typed_addresses(addresses, SolanaAddress, self.chain)])
        results = await self.rpc.batch([self._accounts_call(chunk) for chunk in chunks])
        return self._read_accounts(chunks, results)[1]

    async def observe(self, addresses: Sequence[Address]) -> list[Observation]:
        """One observation per address (rules in the module docstring)."""
        typed = typed_addresses(addresses, SolanaAddress, self.chain)
        slot, accounts, histories = await self._fetch([str(a) for a in typed])
        snapshot = Snapshot(self.chain, self.source, slot, self.rpc.transport.timing.now())
        return [self._observation(snapshot, *row) for row in zip(typed, accounts, histories, strict=True)]

    @staticmethod
    def _observation(
        snapshot: Snapshot, address: SolanaAddress, account: SolanaAccount, history: SignatureHistory
    ) -> Observation:
        times = history.block_times
        common: CountsAndTimes = {
            "balance": account.lamports,
            "tx_count": history.count,
            "outbound_tx_count": 0,
            "address_reuse_count": max(history.count - 1, 0),
            "first_activity": datetime.fromtimestamp(min(times), UTC) if times and history.complete else None,
            "last_activity": datetime.fromtimestamp(max(times), UTC) if times else None,
        }
        if not address.is_on_curve and not account.executable:
            return snapshot.observation(
                str(address), address_type="pda", account_type=AccountType.PDA, exposure=Exposure.NOT_EXPOSED, **common
            )
        if account.program_controlled:
            return snapshot.observation(
                str(address),
                address_type="contract",
                account_type=AccountType.CONTRACT,
                exposure=Exposure.NOT_EXPOSED,
                **common,
            )
        return snapshot.observation(
            str(address),
            address_type="ed25519",
            account_type=AccountType.EOA,
            exposure=Exposure.EXPOSED_AT_REST,
            public_key=address.payload,
            **common,
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this client created it."""
        await self.rpc.transport.aclose()


@register(Family.SOLANA)
def build(
    chain: Chain, endpoints: EnvironmentEndpoints, http: httpx.AsyncClient | None, timing: Timing | None
) -> SolanaClient:
    """The Solana client of the environment (mainnet-beta for live, devnet for test)."""
    return SolanaClient(endpoints.solana, http, timing=timing)
