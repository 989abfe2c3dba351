"""EVM chains (15): balances, nonces, code and revealed public keys over batched JSON-RPC.

One ``observe`` call sends ``eth_blockNumber`` and, per address, ``eth_getBalance``,
``eth_getTransactionCount`` and ``eth_getCode`` in one JSON-RPC batch (one HTTP POST up
to ``max_batch`` calls). Exposure rule:

- Code other than an EIP-7702 delegation (``0xef0100`` + 20-byte address) makes a
  contract (``AccountType.CONTRACT``): it has no key of its own, so ``NOT_EXPOSED``.
- A key-controlled account (no code, or a 7702 delegation, which the key still controls)
  with nonce > 0 has signed a transaction, and any signature reveals the key:
  ``EXPOSED_AT_REST``. With nonce 0 it is ``EXPOSED_ON_SPEND``.
- For signed accounts the key itself is recovered where the node has the Otterscan API
  (anvil, Erigon): ``ots_getTransactionBySenderAndNonce(address, 0)`` gives the first
  transaction, ``eth_getTransactionByHash`` its fields, ``chains.clients.evm_tx`` the signed
  digest, and recovery must give back the address. Without the API ``public_key`` is None
  (still exposed).

The batch is built by hand rather than with web3's ``batch_requests``: measured against
anvil, web3 8 formats each call through its middleware and formatter stack and reached
about 4 % of the raw round trip's rate for 1,000 addresses (bench/bench_chains.py prints
both). ``AsyncWeb3`` is used where its ABI handling helps (Chainlink prices) over the same
transport, through ``web3_provider``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from chains.clients.base import Snapshot, register, typed_addresses
from chains.clients.evm_tx import signed_digest
from chains.clients.jsonrpc import Call, JsonRpc, MethodNotFound, RpcError
from chains.clients.recovery import recover_account_key
from chains.clients.transport import Timing, Transport
from chains.codecs.address import Address
from chains.codecs.evm import EvmAddress
from chains.endpoints import EndpointConfig, EnvironmentEndpoints
from chains.errors import ChainUnavailable, MalformedChainData
from chains.observation import AccountType, Exposure, Observation
from chains.registry import Chain, Family

DELEGATION_PREFIX = bytes.fromhex("ef0100")
"""EIP-7702: an EOA's code is ``0xef0100 ‖ delegate address`` while it delegates."""

_PER_ADDRESS = ("eth_getBalance", "eth_getTransactionCount", "eth_getCode")


def is_delegation(code: bytes) -> bool:
    """True for an EIP-7702 delegation designator (the account is still key-controlled)."""
    return len(code) == 23 and code.startswith(DELEGATION_PREFIX)


def _quantity(value: Any, what: str) -> int:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise MalformedChainData(f"{what}: expected a 0x quantity, got {value!r:.80}")
    try:
        return int(value, 16)
    except ValueError:
        raise MalformedChainData(f"{what}: not a hex quantity: {value!r:.80}") from None


def _state(balance: Any, nonce: Any, code: Any) -> tuple[int, int, bytes]:
    """Balance, nonce and code from their hex answers (``ValueError``/``TypeError`` if malformed)."""
    if not balance.startswith("0x") or not nonce.startswith("0x") or not code.startswith("0x"):
        raise ValueError("missing 0x prefix")
    return int(balance, 16), int(nonce, 16), bytes.fromhex(code[2:])


def _raise_errors(results: Sequence[Any]) -> None:
    for result in results:
        if isinstance(result, RpcError):
            raise result


class EvmClient:
    """Observes addresses of one EVM chain through its JSON-RPC endpoint."""

    source = "evm-jsonrpc"

    def __init__(
        self,
        chain: Chain,
        endpoint: EndpointConfig,
        http: httpx.AsyncClient | None = None,
        *,
        chain_id: int | None = None,
        max_batch: int = 1000,
        recover_keys: bool = True,
        timing: Timing | None = None,
    ) -> None:
        """``chain_id``, when given, is checked against ``eth_chainId`` on the first call (a
        URL of the wrong chain then fails instead of returning another chain's data).
        ``max_batch`` caps the calls per POST (providers limit batch sizes).
        ``recover_keys`` turns the Otterscan key lookup on or off."""
        self.chain = chain
        self.rpc = JsonRpc(Transport(endpoint, http, f"{chain} JSON-RPC", timing), max_batch=max_batch)
        self._expected_chain_id = chain_id
        self._recover_keys = recover_keys
        self._has_otterscan: bool | None = None

    async def observe(self, addresses: Sequence[Address], *, with_keys: bool = True) -> list[Observation]:
        """Balance, nonce, code and exposure of each address (see the module docstring).
        ``with_keys=False`` skips recovering the public keys of signed accounts (two more
        round trips, an Otterscan lookup per account): for a follower that needs only
        whether a key is on chain, again and again."""
        accounts = typed_addresses(addresses, EvmAddress, self.chain)
        texts = ["0x" + a.payload.hex() for a in accounts]
        expected = self._expected_chain_id  # read before the await: concurrent calls may clear it
        check_chain = expected is not None
        head = [Call("eth_blockNumber", ())] + ([Call("eth_chainId", ())] if check_chain else [])
        calls = head + [Call(method, (text, "latest")) for text in texts for method in _PER_ADDRESS]
        results = await self.rpc.batch(calls)
        _raise_errors(results)
        label = self.rpc.transport.label
        height = _quantity(results[0], f"{label} eth_blockNumber")
        if check_chain:
            self._check_chain_id(_quantity(results[1], f"{label} eth_chainId"), expected)
        states = []
        for i, text in enumerate(texts):
            answers = results[len(head) + 3 * i : len(head) + 3 * i + 3]
            try:
                states.append(_state(*answers))
            except (AttributeError, TypeError, ValueError):
                raise MalformedChainData(f"{label}: malformed balance/nonce/code of {text}: {answers!r:.200}") from None
        signed = [
            i
            for i, (_, nonce, code) in enumerate(states)
            if with_keys and nonce > 0 and (not code or is_delegation(code))
        ]
        keys = dict(zip(signed, await self.public_keys([accounts[i] for i in signed]), strict=True))
        snapshot = Snapshot(self.chain, self.source, height, self.rpc.transport.timing.now())
        return [
            self._observation(snapshot, account, balance, nonce, code, keys.get(i))
            for i, (account, (balance, nonce, code)) in enumerate(zip(accounts, states, strict=True))
        ]

    async def head(self) -> int:
        """The chain's latest block number (``eth_blockNumber``): one cheap call a follower
        makes before deciding whether anything new needs looking at."""
        label = self.rpc.transport.label
        return _quantity(await self.rpc.call("eth_blockNumber"), f"{label} eth_blockNumber")

    def _check_chain_id(self, found: int, expected: int | None) -> None:
        if found != expected:
            raise ChainUnavailable(
                f"{self.rpc.transport.label} serves chain id {found}, expected {expected} "
                f"for {self.chain}: check the endpoint URL",
                chain=str(self.chain),
            )
        self._expected_chain_id = None  # checked once per client

    @staticmethod
    def _observation(
        snapshot: Snapshot, account: EvmAddress, balance: int, nonce: int, code: bytes, key: bytes | None
    ) -> Observation:
        if code and not is_delegation(code):
            return snapshot.observation(
                str(account),
                address_type="contract",
                account_type=AccountType.CONTRACT,
                balance=balance,
                tx_count=nonce,
                outbound_tx_count=0,
                exposure=Exposure.NOT_EXPOSED,
            )
        return snapshot.observation(
            str(account),
            address_type="eoa",
            account_type=AccountType.EOA,
            balance=balance,
            tx_count=nonce,
            outbound_tx_count=nonce,
            exposure=Exposure.EXPOSED_AT_REST if nonce > 0 else Exposure.EXPOSED_ON_SPEND,
            public_key=key,
            address_reuse_count=max(nonce - 1, 0),
        )

    async def public_keys(self, accounts: Sequence[EvmAddress]) -> list[bytes | None]:
        """The public key each account revealed with its first transaction (nonce 0).

        Needs the Otterscan ``ots_`` API; None per account when the node lacks it, the
        account has no such transaction (e.g. its nonce moved through an EIP-7702
        authorisation that a sponsor submitted), or the transaction type is not rebuilt.
        Two batched round trips for all accounts together.
        """
        if not accounts or not self._recover_keys or self._has_otterscan is False:
            return [None] * len(accounts)
        texts = ["0x" + a.payload.hex() for a in accounts]
        found = await self.rpc.batch([Call("ots_getTransactionBySenderAndNonce", (t, 0)) for t in texts])
        if any(isinstance(r, MethodNotFound) for r in found):
            self._has_otterscan = False
            return [None] * len(accounts)
        self._has_otterscan = True
        hashes = {i: h for i, h in enumerate(found) if isinstance(h, str)}
        txs = await self.rpc.batch([Call("eth_getTransactionByHash", (h,)) for h in hashes.values()])
        by_account = dict(zip(hashes, txs, strict=True))
        return [self._key_from(by_account.get(i), account) for i, account in enumerate(accounts)]

    @staticmethod
    def _key_from(tx: Any, account: EvmAddress) -> bytes | None:
        if not isinstance(tx, dict):
            return None  # no transaction, or an RPC error for this one
        try:
            signed = signed_digest(tx)
        except (ValueError, KeyError, TypeError):
            return None
        if signed is None:
            return None
        return recover_account_key(signed.digest, signed.r, signed.s, signed.recovery_id, account.payload)

    async def aclose(self) -> None:
        """Close the HTTP client if this client created it."""
        await self.rpc.transport.aclose()


@register(Family.EVM)
def build(
    chain: Chain, endpoints: EnvironmentEndpoints, http: httpx.AsyncClient | None, timing: Timing | None
) -> EvmClient:
    """The EVM client of ``chain`` on the environment's endpoint, checking its chain id."""
    return EvmClient(chain, endpoints.evm[chain], http, chain_id=endpoints.evm_chain_ids[chain], timing=timing)
