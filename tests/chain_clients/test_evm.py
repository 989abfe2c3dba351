"""The EVM client against a real anvil node: real signed transactions of every type."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from coincurve import PublicKey
from eth_account import Account
from eth_account.signers.local import LocalAccount

from chains.clients.evm import EvmClient
from chains.codecs.evm import EvmAddress
from chains.codecs.solana import SolanaAddress
from chains.endpoints import EndpointConfig
from chains.errors import ChainUnavailable, InvalidAddress
from chains.observation import AccountType, Exposure, Observation
from chains.registry import Chain
from tests.anvil import GWEI, Anvil, assemble, deployment_code
from tests.chain_clients.loopback import Loopback, RpcFailure

DEAD = "0x000000000000000000000000000000000000dEaD"


class RequestCounter:
    """An httpx event hook counting the requests a client sends."""

    def __init__(self) -> None:
        self.posts = 0

    async def __call__(self, request: httpx.Request) -> None:
        self.posts += request.method == "POST"


@pytest.fixture
async def counted(anvil: Anvil) -> AsyncIterator[tuple[EvmClient, RequestCounter]]:
    counter = RequestCounter()
    async with httpx.AsyncClient(event_hooks={"request": [counter]}) as http:
        yield EvmClient(Chain.ETHEREUM, EndpointConfig(anvil.url), http, chain_id=anvil.chain_id), counter


def address(account: LocalAccount | str) -> EvmAddress:
    return EvmAddress.decode(account if isinstance(account, str) else account.address)


def compressed_key(account: LocalAccount) -> bytes:
    return PublicKey.from_secret(bytes(account.key)).format(compressed=True)


async def observe_one(client: EvmClient, account: LocalAccount | str) -> Observation:
    (observation,) = await client.observe([address(account)])
    return observation


async def test_fresh_address_has_no_activity_and_is_exposed_on_spend(counted) -> None:
    client, _ = counted
    seen = await observe_one(client, Account.create())
    assert not seen.has_activity and seen.balance == 0 and seen.tx_count == 0
    assert seen.exposure is Exposure.EXPOSED_ON_SPEND and seen.account_type is AccountType.EOA
    assert seen.public_key is None and not seen.public_key_exposed
    assert (seen.chain, seen.symbol, seen.decimals, seen.source) == ("ethereum", "ETH", 18, "evm-jsonrpc")


async def test_balance_is_exact_to_the_wei(counted, anvil: Anvil) -> None:
    client, _ = counted
    account = Account.create()
    wei = 123_456_789_012_345_678_901_234_567
    anvil.fund(account.address, wei)
    seen = await observe_one(client, account)
    assert seen.balance == wei and seen.has_activity and seen.exposure is Exposure.EXPOSED_ON_SPEND


LEGACY = {"gasPrice": 2 * GWEI, "gas": 21_000, "to": DEAD, "value": 1}
EIP1559 = {"type": 2, "maxFeePerGas": 3 * GWEI, "maxPriorityFeePerGas": GWEI, "gas": 21_000, "to": DEAD, "value": 1}
EIP2930 = {
    "type": 1,
    "gasPrice": 3 * GWEI,
    "gas": 30_000,
    "to": DEAD,
    "value": 1,
    "accessList": [{"address": DEAD, "storageKeys": ["0x" + "00" * 31 + "01"]}],
}
PRE_EIP155 = {**LEGACY, "chainId": None}


@pytest.mark.parametrize(
    "first_tx", [LEGACY, EIP1559, EIP2930, PRE_EIP155], ids=["legacy-eip155", "eip1559", "eip2930", "legacy-pre155"]
)
async def test_first_send_flips_exposure_and_reveals_the_real_key(
    counted, anvil: Anvil, first_tx: dict[str, Any]
) -> None:
    client, _ = counted
    account = anvil.new_account()
    before = await observe_one(client, account)
    assert before.exposure is Exposure.EXPOSED_ON_SPEND and before.public_key is None
    anvil.send(account, dict(first_tx))
    after = await observe_one(client, account)
    assert after.exposure is Exposure.EXPOSED_AT_REST and after.public_key_exposed
    assert after.public_key == compressed_key(account)
    assert (after.tx_count, after.outbound_tx_count, after.address_reuse_count) == (1, 1, 0)
    balance = int(anvil.rpc("eth_getBalance", account.address, "latest"), 16)
    assert after.balance == balance and after.height == int(anvil.rpc("eth_blockNumber"), 16)


async def test_a_follower_sees_the_exposure_without_recovering_keys(counted, anvil: Anvil) -> None:
    client, counter = counted
    accounts = [anvil.new_account() for _ in range(3)]
    for account in accounts:
        anvil.send(account, dict(EIP1559))
    await observe_one(client, accounts[0])  # the chain id is checked on the first call
    posts = counter.posts
    seen = await client.observe([address(a) for a in accounts], with_keys=False)
    assert counter.posts == posts + 1  # one batch: no Otterscan lookups, however many signed
    assert all(o.exposure is Exposure.EXPOSED_AT_REST and o.public_key is None for o in seen)
    assert all(o.public_key_exposed for o in seen)


def set_code_tx(anvil: Anvil, sender: LocalAccount, authority: LocalAccount, delegate: str) -> dict[str, Any]:
    """A type-4 transaction from ``sender`` carrying ``authority``'s delegation to ``delegate``."""
    nonce = int(anvil.rpc("eth_getTransactionCount", authority.address, "latest"), 16)
    own = sender.address == authority.address
    auth = authority.sign_authorization({"chainId": anvil.chain_id, "address": delegate, "nonce": nonce + own})
    return {
        "type": 4,
        "maxFeePerGas": 3 * GWEI,
        "maxPriorityFeePerGas": GWEI,
        "gas": 100_000,
        "to": sender.address,
        "value": 0,
        "authorizationList": [auth],
    }


async def test_eip7702_delegated_account_stays_a_key_controlled_eoa(counted, anvil: Anvil) -> None:
    client, _ = counted
    account = anvil.new_account()
    anvil.send(account, set_code_tx(anvil, account, account, DEAD))
    code = anvil.rpc("eth_getCode", account.address, "latest")
    assert code.startswith("0xef0100")
    seen = await observe_one(client, account)
    assert seen.account_type is AccountType.EOA and seen.address_type == "eoa"
    assert seen.exposure is Exposure.EXPOSED_AT_REST and seen.public_key == compressed_key(account)


async def test_sponsored_delegation_exposes_without_a_transaction_to_recover_from(counted, anvil: Anvil) -> None:
    client, _ = counted
    sponsor, authority = anvil.new_account(), Account.create()
    anvil.send(sponsor, set_code_tx(anvil, sponsor, authority, DEAD))
    seen = await observe_one(client, authority)
    assert seen.account_type is AccountType.EOA and seen.tx_count == 1
    assert seen.exposure is Exposure.EXPOSED_AT_REST and seen.public_key is None


async def test_contract_is_code_controlled_not_key_exposed(counted, anvil: Anvil) -> None:
    client, _ = counted
    deployer = anvil.new_account()
    runtime = assemble([("PUSH", 42), ("PUSH", 0), "MSTORE", ("PUSH", 32), ("PUSH", 0), "RETURN"])
    receipt = anvil.send(
        deployer, {"gasPrice": 2 * GWEI, "gas": 200_000, "to": None, "value": 0, "data": deployment_code(runtime)}
    )
    contract, sender = await client.observe([address(receipt["contractAddress"]), address(deployer)])
    assert contract.account_type is AccountType.CONTRACT and contract.address_type == "contract"
    assert contract.exposure is Exposure.NOT_EXPOSED and contract.public_key is None and contract.has_activity
    assert sender.exposure is Exposure.EXPOSED_AT_REST and sender.public_key == compressed_key(deployer)


async def test_many_addresses_cost_one_post(counted, anvil: Anvil) -> None:
    client, counter = counted
    accounts = [Account.create() for _ in range(60)]
    for i, account in enumerate(accounts[:5]):
        anvil.fund(account.address, 10**18 + i)
    seen = await client.observe([address(a) for a in accounts])
    assert counter.posts == 1
    assert [s.address for s in seen] == [a.address for a in accounts]  # same order, EIP-55 text
    assert [s.balance for s in seen[:6]] == [10**18, 10**18 + 1, 10**18 + 2, 10**18 + 3, 10**18 + 4, 0]


async def test_key_recovery_adds_two_batched_posts_for_all_signers(counted, anvil: Anvil) -> None:
    client, counter = counted
    signers = [anvil.new_account() for _ in range(3)]
    for account in signers:
        anvil.send(account, dict(EIP1559))
    seen = await client.observe([address(a) for a in signers] + [address(Account.create())])
    assert counter.posts == 3
    assert [s.public_key for s in seen] == [compressed_key(a) for a in signers] + [None]


async def test_node_without_otterscan_still_reports_exposure(anvil: Anvil, loopback: Loopback, http) -> None:
    def forward(method: str):
        return lambda params: anvil.rpc(method, *params)

    def no_otterscan(params: list) -> None:
        raise RpcFailure(-32601, "the method ots_getTransactionBySenderAndNonce does not exist")

    methods = {m: forward(m) for m in ("eth_blockNumber", "eth_getBalance", "eth_getTransactionCount", "eth_getCode")}
    loopback.rpc_methods({**methods, "ots_getTransactionBySenderAndNonce": no_otterscan})
    account = anvil.new_account()
    anvil.send(account, dict(LEGACY))
    client = EvmClient(Chain.BASE, EndpointConfig(loopback.url), http)
    for _ in range(2):
        (seen,) = await client.observe([address(account)])
        assert seen.chain == "base" and seen.exposure is Exposure.EXPOSED_AT_REST and seen.public_key is None
    assert loopback.count() == 3  # the missing method is not asked for again


async def test_wrong_chain_id_is_refused(anvil: Anvil, http) -> None:
    client = EvmClient(Chain.POLYGON, EndpointConfig(anvil.url), http, chain_id=137)
    with pytest.raises(ChainUnavailable, match="serves chain id 31337, expected 137 for polygon"):
        await client.observe([address(DEAD)])


async def test_non_evm_address_is_refused(counted) -> None:
    client, _ = counted
    with pytest.raises(InvalidAddress, match="takes evm addresses"):
        await client.observe([SolanaAddress.decode("vines1vzrYbzLMRdu58ou5XTby4qAqVRLmqo36NKPTg")])
