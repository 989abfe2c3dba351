"""Solana through its JSON-RPC API: accounts, signatures and signers of many addresses per POST.

One JSON-RPC batch carries ``getMultipleAccounts`` (100 keys per call: lamports, owner,
executable, the first ``TOKEN_PROBE_BYTES`` of the data, and the slot) and one
``getSignaturesForAddress`` per address (newest first, ``page_limit`` per page). Full pages
are followed with ``before`` up to ``max_pages``. Then ``getTransaction`` batches check who
signed (see "Signing" below).

Exposure rule. A wallet address *is* its ed25519 public key, so:

- an executable account (a program): ``CONTRACT``, ``NOT_EXPOSED``;
- a token account (SPL Token or Token-2022, initialized) whose owner is an on-curve
  address: the owner's key moves its tokens and closes it, so it is key-controlled like the
  owner's wallet: ``EOA``, ``EXPOSED_AT_REST``, address type ``token_account``,
  ``public_key`` = the owner's 32 bytes. This holds whether the token account's own address
  is on-curve or not (an associated token account is a program-derived address);
- an off-curve address (a program-derived address) has no private key at all: ``PDA``,
  ``NOT_EXPOSED`` itself (whoever controls its program holds the keys that matter). A token
  account owned by a PDA (a program's vault) lands here or in the next case;
- an on-curve account owned by another program than System (stake, vote, mint, multisig,
  a PDA-owned token account ...): its lamports move only as that program allows, not with
  the address's key: ``CONTRACT``, ``NOT_EXPOSED``;
- any other on-curve address (System-owned, or no account yet) is a wallet: ``EOA``,
  ``EXPOSED_AT_REST``, ``public_key`` = the 32 address bytes, ``ed25519``.

Token accounts are recognised from the SPL layout (``_token_owner``): mint (32 bytes),
owner (32), amount (8), delegate (36), state (1, at offset 108) ... 165 bytes in all.
Token-2022 accounts with extensions are longer and carry the account-type byte 2 at offset
165; a 355-byte account of either program is a multisig and an 82-byte one a mint. The
balance stays the account's lamports: token amounts are not priced.

Signing. ``outbound_tx_count`` counts the transactions the controlling key (the wallet, or
a token account's owner) signed: a transaction's signers are the first
``header.numRequiredSignatures`` of its ``accountKeys`` (the fee payer first).
``getSignaturesForAddress`` does not say who signed, so the newest ``signer_checks``
signatures of each key-controlled address are fetched with ``getTransaction``, in rounds
(``signer_round`` per address first, doubling), stopping at the first round that finds a
signature by the key. The count is therefore a lower bound. It is 0 only when every
signature of a complete history was checked and none is the key's. When that cannot be
shown (more signatures than the cap, a capped history, a transaction the node no longer
serves, or a per-call error), the count is 1: signing is assumed, failing closed. An answer
without ``header`` (abbreviated documentation examples) still proves the fee payer,
``accountKeys[0]``, signed.

``inspect`` reports each account's owner program (``Observation`` has no owner field).
``tx_count`` counts signatures, a lower bound when the page cap was reached.

Why not solana-py's ``AsyncClient`` (0.41): it builds its own ``httpx2`` client, so it cannot
share the service's ``httpx.AsyncClient``, timeouts, retries and circuit breaker. It sends
one HTTP request per call. And its solders-based parsing mishandles error answers: a
``-32000`` error comes back as a bare ``int`` instead of raising, and a ``-32005`` error
without ``data`` makes the Rust parser panic (``pyo3_runtime.PanicException``, a
``BaseException``). Here the JSON-RPC envelope is checked by ``chains.clients.jsonrpc``
and the results are validated field by field. ``solders`` still decides on-curve.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from solders.pubkey import Pubkey

from chains.clients.base import CountsAndTimes, Snapshot, register, typed_addresses
from chains.clients.jsonrpc import Call, JsonRpc, RpcError
from chains.clients.transport import Timing, Transport
from chains.codecs.address import Address
from chains.codecs.base58 import Base58Error, b58decode, b58encode
from chains.codecs.solana import SolanaAddress
from chains.endpoints import EndpointConfig, EnvironmentEndpoints
from chains.errors import MalformedChainData
from chains.observation import AccountType, Exposure, Observation
from chains.registry import Chain, Family

SYSTEM_PROGRAM = "11111111111111111111111111111111"
TOKEN_PROGRAM = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
TOKEN_2022_PROGRAM = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb"
TOKEN_PROGRAMS = frozenset({TOKEN_PROGRAM, TOKEN_2022_PROGRAM})
ACCOUNTS_PER_CALL = 100
"""``getMultipleAccounts`` takes at most 100 keys."""

TOKEN_ACCOUNT_LEN = 165
"""Size of an SPL token account (and of a Token-2022 account's base state)."""
TOKEN_MULTISIG_LEN = 355
"""Size of an SPL multisig account; Token-2022 never sizes a token account to this length."""
TOKEN_PROBE_BYTES = TOKEN_MULTISIG_LEN + 1
"""Account data fetched per account (``dataSlice``): enough to tell a token account from a
mint or a multisig, and a short read for a wallet (no data) or a program's account."""
_OWNER = slice(32, 64)
_STATE = 108  # 0 uninitialized, 1 initialized, 2 frozen
_TOKEN_2022_ACCOUNT_TYPE = 2  # the byte after the base state: 1 mint, 2 account


@dataclass(frozen=True, slots=True)
class SolanaAccount:
    """An account as the chain holds it; ``owner`` None when the account does not exist.

    ``data`` is at most the first ``TOKEN_PROBE_BYTES`` of the account's data.
    """

    address: str
    lamports: int
    owner: str | None
    executable: bool
    data: bytes = b""

    @property
    def program_controlled(self) -> bool:
        """True for a program, or an account some program other than System owns."""
        return self.executable or (self.owner is not None and self.owner != SYSTEM_PROGRAM)

    @property
    def token_owner(self) -> bytes | None:
        """The owner field of an initialized SPL Token or Token-2022 token account, else None."""
        if self.executable or self.owner not in TOKEN_PROGRAMS:
            return None
        data, size = self.data, len(self.data)  # size is exact below TOKEN_PROBE_BYTES
        if size == TOKEN_ACCOUNT_LEN:
            is_account = True
        else:
            is_account = (
                self.owner == TOKEN_2022_PROGRAM
                and size > TOKEN_ACCOUNT_LEN
                and size != TOKEN_MULTISIG_LEN
                and data[TOKEN_ACCOUNT_LEN] == _TOKEN_2022_ACCOUNT_TYPE
            )
        if not is_account or data[_STATE] not in (1, 2):
            return None
        return data[_OWNER]


@dataclass(frozen=True, slots=True)
class SignatureHistory:
    """Signatures of one address, newest first, their block times, and whether all were seen."""

    signatures: tuple[str, ...]
    block_times: tuple[int, ...]
    complete: bool

    @property
    def count(self) -> int:
        """How many signatures were seen."""
        return len(self.signatures)


def _account_data(address: str, value: Mapping[str, Any], what: str) -> bytes:
    data = value.get("data", ["", "base64"])
    if (
        not isinstance(data, list)
        or len(data) != 2
        or not isinstance(data[0], str)
        or data[1] not in ("base64", "base58")
    ):
        raise MalformedChainData(f"{what}: data of {address} must be [text, 'base64' or 'base58']")
    try:
        raw = base64.b64decode(data[0], validate=True) if data[1] == "base64" else b58decode(data[0])
    except (binascii.Error, Base58Error):
        raise MalformedChainData(f"{what}: data of {address} is not valid {data[1]}") from None
    return raw[:TOKEN_PROBE_BYTES]


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
    return SolanaAccount(address, lamports, owner, executable, _account_data(address, value, what))


def _signers(signature: str, result: Any, what: str) -> tuple[frozenset[str], bool] | None:
    """Who signed a ``getTransaction`` answer: (signer keys, whether that list is complete).

    None when the node has no such transaction. Without ``header`` only the fee payer
    (``accountKeys[0]``) is known to have signed.
    """
    if result is None:
        return None
    transaction = result.get("transaction") if isinstance(result, Mapping) else None
    message = transaction.get("message") if isinstance(transaction, Mapping) else None
    if not isinstance(transaction, Mapping) or not isinstance(message, Mapping):
        raise MalformedChainData(f"{what}: transaction {signature} has no transaction.message")
    keys = message.get("accountKeys")
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise MalformedChainData(f"{what}: transaction {signature} has no accountKeys list")
    listed = transaction.get("signatures")
    if isinstance(listed, list) and listed and listed[0] != signature:
        raise MalformedChainData(f"{what}: asked for transaction {signature}, got {listed[0]!r}")
    header = message.get("header")
    if header is None:
        return frozenset(keys[:1]), False
    required = header.get("numRequiredSignatures") if isinstance(header, Mapping) else None
    if isinstance(required, bool) or not isinstance(required, int) or not 1 <= required <= len(keys):
        raise MalformedChainData(f"{what}: transaction {signature} has a bad header.numRequiredSignatures")
    return frozenset(keys[:required]), True


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
        signer_checks: int = 50,
        signer_round: int = 10,
        commitment: str = "finalized",
        timing: Timing | None = None,
    ) -> None:
        """``page_limit`` signatures per page (1 to 1000), ``max_pages`` pages per address;
        ``max_batch`` calls per POST (public endpoints limit batches); at most
        ``signer_checks`` transactions fetched per address to find its signer, the first
        round ``signer_round`` of them (0 disables the check: signing is then assumed for
        any address with transactions)."""
        if not 1 <= page_limit <= 1000 or max_pages < 1:
            raise ValueError("page_limit must be 1..1000 and max_pages at least 1")
        if signer_checks < 0 or signer_round < 1:
            raise ValueError("signer_checks must be at least 0 and signer_round at least 1")
        self.chain = Chain.SOLANA
        self.rpc = JsonRpc(Transport(endpoint, http, "solana JSON-RPC", timing), max_batch=max_batch)
        self._page_limit = page_limit
        self._max_pages = max_pages
        self._signer_checks = signer_checks
        self._signer_round = signer_round
        self._commitment = commitment

    def _accounts_call(self, keys: Sequence[str]) -> Call:
        return Call(
            "getMultipleAccounts",
            (
                list(keys),
                {
                    "encoding": "base64",
                    "dataSlice": {"offset": 0, "length": TOKEN_PROBE_BYTES},
                    "commitment": self._commitment,
                },
            ),
        )

    def _signatures_call(self, key: str, before: str | None) -> Call:
        config: dict[str, Any] = {"limit": self._page_limit, "commitment": self._commitment}
        if before is not None:
            config["before"] = before
        return Call("getSignaturesForAddress", (key, config))

    def _transaction_call(self, signature: str) -> Call:
        config = {"encoding": "json", "maxSupportedTransactionVersion": 0, "commitment": self._commitment}
        return Call("getTransaction", (signature, config))

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
                signatures=tuple(item["signature"] for item in page),
                block_times=tuple(t for item in page if isinstance(t := item.get("blockTime"), int)),
                complete=i not in capped,
            )
            for i, page in enumerate(pages)
        ]

    async def _signed_counts(self, signers: Sequence[str | None], histories: Sequence[SignatureHistory]) -> list[int]:
        """``outbound_tx_count`` per address: the checked transactions ``signers[i]`` signed,
        or 1 when signing cannot be ruled out (rules in the module docstring); 0 for an
        address without a controlling key (``None``) and for one without transactions."""
        what = f"{self.rpc.transport.label} getTransaction"
        signed = [0] * len(histories)
        checked = [0] * len(histories)
        unsure = [False] * len(histories)  # a checked transaction left its signers unknown
        limit = [min(h.count, self._signer_checks) for h in histories]
        open_ = [i for i, key in enumerate(signers) if key is not None and limit[i]]
        size = self._signer_round
        while open_:
            batch = [
                (i, signature)
                for i in open_
                for signature in histories[i].signatures[checked[i] : min(checked[i] + size, limit[i])]
            ]
            results = await self.rpc.batch([self._transaction_call(signature) for _, signature in batch])
            for (i, signature), result in zip(batch, results, strict=True):
                checked[i] += 1
                found = None if isinstance(result, RpcError) else _signers(signature, result, what)
                if found is not None and signers[i] in found[0]:
                    signed[i] += 1
                elif found is None or not found[1]:
                    unsure[i] = True
            open_ = [i for i in open_ if not signed[i] and checked[i] < limit[i]]
            size *= 2
        for i, (key, history) in enumerate(zip(signers, histories, strict=True)):
            if key is not None and not signed[i] and history.count:
                # Not one signature by the key found: 0 only if every transaction was checked.
                signed[i] = int(unsure[i] or checked[i] < history.count or not history.complete)
        return signed

    async def inspect(self, addresses: Sequence[Address]) -> list[SolanaAccount]:
        """The raw account state (lamports, owner program, executable, data prefix) of each address."""
        chunks = _chunks([str(a) for a in typed_addresses(addresses, SolanaAddress, self.chain)])
        results = await self.rpc.batch([self._accounts_call(chunk) for chunk in chunks])
        return self._read_accounts(chunks, results)[1]

    async def observe(self, addresses: Sequence[Address]) -> list[Observation]:
        """One observation per address (rules in the module docstring)."""
        typed = typed_addresses(addresses, SolanaAddress, self.chain)
        slot, accounts, histories = await self._fetch([str(a) for a in typed])
        keys = [_controlling_key(address, account) for address, account in zip(typed, accounts, strict=True)]
        signed = await self._signed_counts([None if k is None else b58encode(k) for k in keys], histories)
        snapshot = Snapshot(self.chain, self.source, slot, self.rpc.transport.timing.now())
        return [self._observation(snapshot, *row) for row in zip(typed, accounts, histories, keys, signed, strict=True)]

    @staticmethod
    def _observation(
        snapshot: Snapshot,
        address: SolanaAddress,
        account: SolanaAccount,
        history: SignatureHistory,
        key: bytes | None,
        signed: int,
    ) -> Observation:
        times = history.block_times
        common: CountsAndTimes = {
            "balance": account.lamports,
            "tx_count": history.count,
            "outbound_tx_count": signed,
            "address_reuse_count": max(history.count - 1, 0),
            "first_activity": datetime.fromtimestamp(min(times), UTC) if times and history.complete else None,
            "last_activity": datetime.fromtimestamp(max(times), UTC) if times else None,
        }
        if key is not None:
            return snapshot.observation(
                str(address),
                address_type="ed25519" if account.token_owner is None else "token_account",
                account_type=AccountType.EOA,
                exposure=Exposure.EXPOSED_AT_REST,
                public_key=key,
                **common,
            )
        if not address.is_on_curve and not account.executable:
            return snapshot.observation(
                str(address), address_type="pda", account_type=AccountType.PDA, exposure=Exposure.NOT_EXPOSED, **common
            )
        return snapshot.observation(
            str(address),
            address_type="contract",
            account_type=AccountType.CONTRACT,
            exposure=Exposure.NOT_EXPOSED,
            **common,
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this client created it."""
        await self.rpc.transport.aclose()


def _controlling_key(address: SolanaAddress, account: SolanaAccount) -> bytes | None:
    """The ed25519 key that controls the account: a token account's on-curve owner, a
    wallet's own address, or None for code-controlled accounts (programs, PDAs,
    program-owned accounts, token accounts of a program-derived owner)."""
    owner = account.token_owner
    if owner is not None:
        return owner if Pubkey.from_bytes(owner).is_on_curve() else None
    if not address.is_on_curve or account.program_controlled:
        return None
    return address.payload


@register(Family.SOLANA)
def build(
    chain: Chain, endpoints: EnvironmentEndpoints, http: httpx.AsyncClient | None, timing: Timing | None
) -> SolanaClient:
    """The Solana client of the environment (mainnet-beta for live, devnet for test)."""
    return SolanaClient(endpoints.solana, http, timing=timing)
