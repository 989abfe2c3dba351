"""The Solana client against a LiteSVM-backed loopback node and the conformance RPC shapes."""

from __future__ import annotations

import pytest
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from api.errors import code_of
from chains.clients.jsonrpc import RpcError
from chains.clients.solana import SYSTEM_PROGRAM, SolanaClient
from chains.codecs.solana import SolanaAddress
from chains.endpoints import EndpointConfig, RetrySettings
from chains.errors import MalformedChainData
from chains.observation import AccountType, Exposure
from tests.chain_clients.loopback import Fault, Loopback, RpcFailure
from tests.chain_clients.solana_node import SolanaNode

TOKEN_PROGRAM = Pubkey.from_string("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
RENT_EXEMPT = 890_880  # minimum lamports of an empty system account


@pytest.fixture
def node(loopback: Loopback) -> SolanaNode:
    node = SolanaNode()
    loopback.rpc_methods(node.methods())
    return node


def client(loopback: Loopback, http, clock, **options) -> SolanaClient:
    endpoint = EndpointConfig(loopback.url, retry=RetrySettings(attempts=2, base_delay=0.1))
    return SolanaClient(endpoint, http, timing=clock.timing(), **options)


def address(key: Pubkey | Keypair) -> SolanaAddress:
    return SolanaAddress.decode(str(key.pubkey() if isinstance(key, Keypair) else key))


async def test_wallets_are_their_public_keys(node: SolanaNode, loopback: Loopback, http, clock) -> None:
    sender, receiver, fresh = node.wallet(), Keypair(), Keypair()
    node.transfer(sender, receiver.pubkey(), 2 * RENT_EXEMPT)
    seen = await client(loopback, http, clock).observe([address(sender), address(receiver), address(fresh)])
    for observation, key in zip(seen, (sender, receiver, fresh), strict=True):
        assert observation.account_type is AccountType.EOA and observation.address_type == "ed25519"
        assert observation.exposure is Exposure.EXPOSED_AT_REST and observation.public_key == bytes(key.pubkey())
    assert seen[0].balance == node.svm.get_balance(sender.pubkey()) and seen[0].tx_count == 1
    assert seen[1].balance == 2 * RENT_EXEMPT and seen[1].has_activity
    assert not seen[2].has_activity and seen[2].balance == 0
    assert seen[0].height == node.svm.get_clock().slot and (seen[0].symbol, seen[0].decimals) == ("SOL", 9)
    assert loopback.count() == 1  # accounts and signatures of all three in one POST


async def test_pda_program_and_program_owned_accounts_are_not_key_exposed(
    node: SolanaNode, loopback: Loopback, http, clock
) -> None:
    pda, _ = Pubkey.find_program_address([b"vault"], TOKEN_PROGRAM)
    token_account = Keypair().pubkey()
    node.place(pda, 5_000_000, TOKEN_PROGRAM)
    node.place(token_account, 2_039_280, TOKEN_PROGRAM)
    solana = client(loopback, http, clock)
    vault, program, owned = await solana.observe([address(pda), address(TOKEN_PROGRAM), address(token_account)])
    assert (vault.account_type, vault.address_type, vault.exposure) == (AccountType.PDA, "pda", Exposure.NOT_EXPOSED)
    assert vault.balance == 5_000_000 and vault.public_key is None
    assert (program.account_type, program.exposure) == (AccountType.CONTRACT, Exposure.NOT_EXPOSED)
    assert (owned.account_type, owned.exposure, owned.public_key) == (AccountType.CONTRACT, Exposure.NOT_EXPOSED, None)
    accounts = await solana.inspect([address(TOKEN_PROGRAM), address(token_account), address(Keypair())])
    assert accounts[0].executable and accounts[0].owner == "BPFLoaderUpgradeab1e11111111111111111111111"
    assert accounts[1].owner == str(TOKEN_PROGRAM) and accounts[2].owner is None


@pytest.mark.parametrize(("max_pages", "count", "complete"), [(3, 5, True), (2, 4, False)])
async def test_signature_pages_are_followed_up_to_the_cap(
    node: SolanaNode, loopback: Loopback, http, clock, max_pages: int, count: int, complete: bool
) -> None:
    wallet = node.wallet()
    for _ in range(5):
        node.transfer(wallet, Keypair().pubkey(), RENT_EXEMPT)
    (seen,) = await client(loopback, http, clock, page_limit=2, max_pages=max_pages).observe([address(wallet)])
    assert seen.tx_count == count and (seen.first_activity is not None) is complete
    assert seen.last_activity is not None


async def test_documented_answer_shapes_parse_exactly(loopback: Loopback, http, clock, rpc_vector) -> None:
    info = rpc_vector("rpc/solana_getAccountInfo.json")["response"]["result"]
    signatures = rpc_vector("rpc/solana_getSignaturesForAddress.json")["response"]["result"]
    loopback.rpc_methods(
        {
            "getMultipleAccounts": lambda params: {"context": info["context"], "value": [info["value"]]},
            "getSignaturesForAddress": lambda params: signatures,
        }
    )
    (seen,) = await client(loopback, http, clock).observe(
        [SolanaAddress.decode("vines1vzrYbzLMRdu58ou5XTby4qAqVRLmqo36NKPTg")]
    )
    assert seen.balance == 88_849_814_690_250 and seen.height == 341_197_053
    assert seen.tx_count == 1 and seen.exposure is Exposure.EXPOSED_AT_REST and seen.last_activity is None


async def test_node_errors_without_data_raise_cleanly(loopback: Loopback, http, clock) -> None:
    def unhealthy(params):  # solders' own parser panics on this answer (no "data" member)
        raise RpcFailure(-32005, "Node is unhealthy")

    loopback.rpc_methods({"getMultipleAccounts": unhealthy, "getSignaturesForAddress": lambda p: []})
    with pytest.raises(RpcError, match="-32005") as caught:
        await client(loopback, http, clock).observe([address(Keypair())])
    assert code_of(caught.value) == "SCAN_004"


async def test_malformed_account_is_refused(loopback: Loopback, http, clock) -> None:
    bad = {"lamports": "100", "owner": SYSTEM_PROGRAM, "executable": False}
    loopback.rpc_methods(
        {
            "getMultipleAccounts": lambda p: {"context": {"slot": 1}, "value": [bad]},
            "getSignaturesForAddress": lambda p: [],
        }
    )
    with pytest.raises(MalformedChainData, match="lamports"):
        await client(loopback, http, clock).observe([address(Keypair())])


async def test_overloaded_node_is_retried(node: SolanaNode, loopback: Loopback, http, clock) -> None:
    loopback.fail(Fault(status=429, headers={"Retry-After": "1"}))
    (seen,) = await client(loopback, http, clock).observe([address(node.wallet())])
    assert seen.balance == 10**9 and clock.sleeps == [1.0]
