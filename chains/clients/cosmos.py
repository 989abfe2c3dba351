"""Cosmos Hub through the LCD (REST gateway of a Cosmos SDK node).

Per address: ``GET /cosmos/auth/v1beta1/accounts/{address}`` for the account (its public
key and sequence) and ``GET /cosmos/bank/v1beta1/balances/{address}`` for the balances,
page by page (``pagination.key``), of which the native denomination (``uatom``) is the
balance.

Exposure rule: the chain stores an account's public key with its first signed
transaction, so ``pub_key`` present means ``EXPOSED_AT_REST`` (the key is reported);
``pub_key`` null means ``EXPOSED_ON_SPEND``. An account the chain does not know (gRPC
``NotFound``, HTTP 404, code 5) has no activity unless the bank holds coins for it.
Vesting accounts (``base_vesting_account.base_account``) and other wrappers are unwrapped
to their ``base_account``. Module and interchain accounts (and any 32-byte address) have
no key of their own: ``CONTRACT``, ``NOT_EXPOSED``. A secp256k1 key must hash to the
address (ripemd160(sha256(key))), or the answer is rejected.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from chains.clients.base import AccountCounts, Snapshot, register, typed_addresses
from chains.clients.transport import Timing, Transport
from chains.codecs.address import Address
from chains.codecs.cosmos import CosmosAddress
from chains.endpoints import EndpointConfig, EnvironmentEndpoints
from chains.errors import ChainUnavailable, MalformedChainData
from chains.observation import AccountType, Exposure, Observation
from chains.registry import Chain, Family
from pqc.hashes import hash160

HEIGHT_HEADER = "grpc-metadata-x-cosmos-block-height"
_NOT_FOUND_CODE = 5  # gRPC NotFound
_KEYLESS_TYPES = ("ModuleAccount", "InterchainAccount")
_WRAPPERS = ("base_vesting_account", "base_account")


@dataclass(frozen=True, slots=True)
class CosmosAccount:
    """The parts of an auth account that matter for exposure."""

    type_url: str
    public_key: bytes | None
    key_type: str | None
    sequence: int

    @property
    def keyless(self) -> bool:
        """True for module and interchain accounts, which no key controls."""
        return self.type_url.endswith(_KEYLESS_TYPES)


def parse_account(body: Any, address: CosmosAddress, what: str) -> CosmosAccount:
    """Read an ``accounts/{address}`` answer, unwrapping vesting and module wrappers."""
    account = body.get("account") if isinstance(body, Mapping) else None
    if not isinstance(account, Mapping) or not isinstance(account.get("@type"), str):
        raise MalformedChainData(f"{what}: no typed account object")
    base: Mapping[str, Any] = account
    while "address" not in base:
        inner = next((base[k] for k in _WRAPPERS if isinstance(base.get(k), Mapping)), None)
        if inner is None:
            raise MalformedChainData(f"{what}: {account['@type']} has no base_account")
        base = inner
    if base["address"] != str(address):
        raise MalformedChainData(f"{what}: answer is about {base['address']!r}, not {address}")
    try:
        sequence = int(base.get("sequence", "0"))
    except (TypeError, ValueError):
        raise MalformedChainData(f"{what}: sequence is not an integer") from None
    key, key_type = _public_key(base.get("pub_key"), address, what)
    return CosmosAccount(account["@type"], key, key_type, sequence)


def _public_key(pub_key: Any, address: CosmosAddress, what: str) -> tuple[bytes | None, str | None]:
    """The key bytes (None for multisig keys, which list several) and the key's type URL."""
    if pub_key is None:
        return None, None
    if not isinstance(pub_key, Mapping) or not isinstance(pub_key.get("@type"), str):
        raise MalformedChainData(f"{what}: malformed pub_key")
    key_type = pub_key["@type"]
    if "key" not in pub_key:
        return None, key_type
    try:
        key = base64.b64decode(pub_key["key"], validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise MalformedChainData(f"{what}: pub_key.key is not base64") from None
    if key_type.endswith("secp256k1.PubKey") and hash160(key) != address.payload:
        raise MalformedChainData(f"{what}: pub_key does not hash to {address}")
    return key, key_type


def _amount(balance: Mapping[str, Any], what: str) -> int:
    try:
        amount = int(balance["amount"])
    except (KeyError, TypeError, ValueError):
        raise MalformedChainData(f"{what}: coin amount is not an integer string") from None
    if amount < 0:
        raise MalformedChainData(f"{what}: negative coin amount")
    return amount


class CosmosClient:
    """Observes Cosmos Hub addresses through one LCD endpoint."""

    source = "cosmos-lcd"

    def __init__(
        self,
        endpoint: EndpointConfig,
        http: httpx.AsyncClient | None = None,
        *,
        denom: str = "uatom",
        page_limit: int = 100,
        max_pages: int = 20,
        concurrency: int = 8,
        timing: Timing | None = None,
    ) -> None:
        """``denom`` is the native coin's denomination; balances are listed ``page_limit``
        at a time, at most ``max_pages`` pages; ``concurrency`` caps requests in flight."""
        self.chain = Chain.COSMOS
        self.transport = Transport(endpoint, http, "cosmos LCD", timing)
        self._denom = denom
        self._page_limit = page_limit
        self._max_pages = max_pages
        self._limit = asyncio.Semaphore(concurrency)

    async def account(self, address: CosmosAddress) -> tuple[CosmosAccount | None, int | None]:
        """The auth account (None when the chain does not know it) and the block height."""
        path = f"/cosmos/auth/v1beta1/accounts/{address}"
        async with self._limit:
            reply = await self.transport.get(path, accept=frozenset({200, 404}))
        what = f"{self.transport.label} {path}"
        height_text = reply.headers.get(HEIGHT_HEADER, "")
        height = int(height_text) if height_text.isdigit() else None
        if reply.status == 404:
            body = reply.data if isinstance(reply.data, Mapping) else {}
            if body.get("code") != _NOT_FOUND_CODE:
                raise ChainUnavailable(f"{what}: HTTP 404 without a NotFound answer ({body.get('message', '')!s:.120})")
            return None, height
        return parse_account(reply.data, address, what), height

    async def balance(self, address: CosmosAddress) -> int:
        """The address's amount of the native denomination (0 when it holds none)."""
        path = f"/cosmos/bank/v1beta1/balances/{address}"
        what = f"{self.transport.label} {path}"
        key = None
        for _ in range(self._max_pages):
            params = {"pagination.limit": str(self._page_limit)} | ({"pagination.key": key} if key else {})
            async with self._limit:
                data = (await self.transport.get(path, params=params)).data
            if not isinstance(data, Mapping) or not isinstance(data.get("balances"), list):
                raise MalformedChainData(f"{what}: no balances list")
            for coin in data["balances"]:
                if isinstance(coin, Mapping) and coin.get("denom") == self._denom:
                    return _amount(coin, what)
            pagination = data.get("pagination")
            key = pagination.get("next_key") if isinstance(pagination, Mapping) else None
            if not key:
                return 0
        raise ChainUnavailable(f"{what}: more than {self._max_pages} pages of balances without {self._denom}")

    async def _observe(self, address: CosmosAddress, now: datetime) -> Observation:
        (account, height), balance = await asyncio.gather(self.account(address), self.balance(address))
        snapshot = Snapshot(self.chain, self.source, height, now)
        sequence = account.sequence if account else 0
        common: AccountCounts = {
            "balance": balance,
            "tx_count": sequence,
            "outbound_tx_count": sequence,
            "address_reuse_count": max(sequence - 1, 0),
        }
        if len(address.payload) == 32 or (account is not None and account.keyless):
            return snapshot.observation(
                str(address),
                address_type="contract",
                account_type=AccountType.CONTRACT,
                exposure=Exposure.NOT_EXPOSED,
                **common,
            )
        revealed = account is not None and (account.key_type is not None or account.sequence > 0)
        return snapshot.observation(
            str(address),
            address_type="multisig" if account and account.key_type and account.public_key is None else "secp256k1",
            account_type=AccountType.EOA,
            exposure=Exposure.EXPOSED_AT_REST if revealed else Exposure.EXPOSED_ON_SPEND,
            public_key=account.public_key if account else None,
            **common,
        )

    async def observe(self, addresses: Sequence[Address]) -> list[Observation]:
        """One observation per address (rules in the module docstring); requests run concurrently."""
        typed = typed_addresses(addresses, CosmosAddress, self.chain)
        now = self.transport.timing.now()
        return list(await asyncio.gather(*(self._observe(a, now) for a in typed)))

    async def aclose(self) -> None:
        """Close the HTTP client if this client created it."""
        await self.transport.aclose()


@register(Family.COSMOS)
def build(
    chain: Chain, endpoints: EnvironmentEndpoints, http: httpx.AsyncClient | None, timing: Timing | None
) -> CosmosClient:
    """The Cosmos Hub client of the environment (the ICS provider testnet for test)."""
    return CosmosClient(endpoints.cosmos_lcd, http, timing=timing)
