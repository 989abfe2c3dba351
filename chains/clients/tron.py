"""Tron through a full node's HTTP API and TronGrid.

Per address: ``POST /wallet/getaccount`` (``{"address": "T…", "visible": true}``) for the
balance in sun, the account type and its first and latest activity. An empty object
``{}`` means the account was never activated: no activity. Then, for an activated
non-contract account, TronGrid's
``GET /v1/accounts/{address}/transactions?only_from=true&limit=1`` looks for a transaction
the account sent.

Exposure rule: a contract account (``"type": "Contract"``) has no key of its own:
``CONTRACT``, ``NOT_EXPOSED``. An account that sent a transaction has signed it:
``EXPOSED_AT_REST``. Its key is recovered from the 65-byte ``r ‖ s ‖ v`` signature over
the txID (``sha256(raw_data)``, checked) and reported if it maps to the address. A
signer of another address (an account run by a permission key) still means the account's
controlling key is public, so the level stays at rest. No outgoing transaction means
``EXPOSED_ON_SPEND``. TronGrid does not give totals: ``outbound_tx_count`` is 0 or 1
(a lower bound) and ``tx_count`` at least 1 for an activated account.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from chains.clients.base import ActivityTimes, Snapshot, register, typed_addresses
from chains.clients.recovery import recover_account_key
from chains.clients.transport import Timing, Transport
from chains.codecs.address import Address
from chains.codecs.tron import TronAddress
from chains.endpoints import EndpointConfig, EnvironmentEndpoints
from chains.errors import ChainUnavailable, MalformedChainData
from chains.observation import AccountType, Exposure, Observation
from chains.registry import Chain, Family
from pqc.hashes import sha256


def _millis(value: Any) -> datetime | None:
    return datetime.fromtimestamp(value / 1000, UTC) if isinstance(value, int) and value > 0 else None


def transaction_key(tx: Any, address: TronAddress, what: str) -> bytes | None:
    """The compressed key that signed ``tx`` (a TronGrid transaction), if it is ``address``'s.

    The txID must be ``sha256(raw_data_hex)``: a mismatch is malformed data, not a key.
    """
    try:
        raw = bytes.fromhex(tx["raw_data_hex"])
        txid = bytes.fromhex(tx["txID"])
        signature = bytes.fromhex(tx["signature"][0])
    except (KeyError, IndexError, TypeError, ValueError):
        raise MalformedChainData(f"{what}: transaction without raw_data_hex, txID or signature") from None
    if sha256(raw) != txid:
        raise MalformedChainData(f"{what}: txID {txid.hex()} is not sha256(raw_data)")
    if len(signature) != 65:
        return None
    v = signature[64]
    return recover_account_key(
        txid,
        int.from_bytes(signature[:32], "big"),
        int.from_bytes(signature[32:64], "big"),
        v - 27 if v >= 27 else v,
        address.payload,
    )


class TronClient:
    """Observes Tron addresses through a full node (accounts) and TronGrid (transactions)."""

    source = "tron-api"

    def __init__(
        self,
        api: EndpointConfig,
        trongrid: EndpointConfig,
        http: httpx.AsyncClient | None = None,
        *,
        concurrency: int = 8,
        timing: Timing | None = None,
    ) -> None:
        """Two endpoints, each with its own retry policy and circuit breaker."""
        self.chain = Chain.TRON
        self.api = Transport(api, http, "tron full node", timing)
        self.trongrid = Transport(trongrid, http, "TronGrid", timing)
        self._limit = asyncio.Semaphore(concurrency)

    async def account(self, address: TronAddress) -> Mapping[str, Any]:
        """The ``/wallet/getaccount`` object (``{}`` for an account never activated)."""
        async with self._limit:
            reply = await self.api.post("/wallet/getaccount", {"address": str(address), "visible": True})
        what = f"{self.api.label} /wallet/getaccount"
        if not isinstance(reply.data, Mapping):
            raise MalformedChainData(f"{what}: answer is not an object")
        if "Error" in reply.data:
            raise ChainUnavailable(f"{what} refused {address}: {str(reply.data['Error'])[:120]}")
        return reply.data

    async def last_sent(self, address: TronAddress) -> Mapping[str, Any] | None:
        """The latest confirmed transaction ``address`` sent, or None."""
        path = f"/v1/accounts/{address}/transactions"
        params = {"only_from": "true", "only_confirmed": "true", "limit": "1"}
        async with self._limit:
            reply = await self.trongrid.get(path, params=params)
        what = f"{self.trongrid.label} {path}"
        data = reply.data
        if not isinstance(data, Mapping) or data.get("success") is not True or not isinstance(data.get("data"), list):
            raise MalformedChainData(f"{what}: not a successful TronGrid answer")
        return data["data"][0] if data["data"] else None

    async def _observe(self, address: TronAddress, snapshot: Snapshot) -> Observation:
        account = await self.account(address)
        balance = account.get("balance", 0)
        if isinstance(balance, bool) or not isinstance(balance, int) or balance < 0:
            raise MalformedChainData(f"{self.api.label}: balance of {address} is not a non-negative integer")
        activated = bool(account)
        times: ActivityTimes = {
            "first_activity": _millis(account.get("create_time")),
            "last_activity": _millis(account.get("latest_opration_time")),
        }
        if account.get("type") == "Contract":
            return snapshot.observation(
                str(address),
                address_type="contract",
                account_type=AccountType.CONTRACT,
                balance=balance,
                tx_count=1,
                outbound_tx_count=0,
                exposure=Exposure.NOT_EXPOSED,
                **times,
            )
        sent = await self.last_sent(address) if activated else None
        key = transaction_key(sent, address, self.trongrid.label) if sent is not None else None
        return snapshot.observation(
            str(address),
            address_type="eoa",
            account_type=AccountType.EOA,
            balance=balance,
            tx_count=int(activated) + int(sent is not None),
            outbound_tx_count=int(sent is not None),
            exposure=Exposure.EXPOSED_AT_REST if sent is not None else Exposure.EXPOSED_ON_SPEND,
            public_key=key,
            **times,
        )

    async def observe(self, addresses: Sequence[Address]) -> list[Observation]:
        """One observation per address (rules in the module docstring); requests run concurrently."""
        typed = typed_addresses(addresses, TronAddress, self.chain)
        snapshot = Snapshot(self.chain, self.source, None, self.api.timing.now())
        return list(await asyncio.gather(*(self._observe(a, snapshot) for a in typed)))

    async def aclose(self) -> None:
        """Close the HTTP clients these transports created."""
        await self.api.aclose()
        await self.trongrid.aclose()


@register(Family.TRON)
def build(
    chain: Chain, endpoints: EnvironmentEndpoints, http: httpx.AsyncClient | None, timing: Timing | None
) -> TronClient:
    """The Tron client of the environment (mainnet, or Nile for test)."""
    return TronClient(endpoints.tron_api, endpoints.trongrid, http, timing=timing)
