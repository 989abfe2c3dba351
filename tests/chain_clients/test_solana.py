"""The Solana client against a LiteSVM-backed loopback node and the conformance RPC shapes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from spl.token.constants import TOKEN_2022_PROGRAM_ID

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
    assert [o.outbound_tx_count for o in seen] == [1, 0, 0]  # the sender signed; the receiver did not
    assert loopback.count() == 2  # accounts and signatures of all three in one POST, then their signers


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
    assert seen.outbound_tx_count == 1  # this node has no getTransaction: signing is not ruled out


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


async def test_token_accounts_take_their_owners_key(node: SolanaNode, loopback: Loopback, http, clock) -> None:
    authority, holder, spender = node.wallet(), Keypair(), node.wallet()
    pda, _ = Pubkey.find_program_address([b"vault"], TOKEN_PROGRAM)
    legacy, token_2022 = node.mint(authority), node.mint(authority, TOKEN_2022_PROGRAM_ID)
    held = node.token_account(authority, legacy, holder.pubkey(), amount=1_000)  # the holder never signed
    spent = node.token_account(authority, token_2022, spender.pubkey(), amount=500)  # 170 bytes: an extension
    node.token_transfer(spender, spent, node.token_account(authority, token_2022, Keypair().pubkey()), 200)
    vault = node.token_account(authority, legacy, pda, amount=7)  # owned by a program-derived address
    blank = Keypair().pubkey()
    node.place(blank, 2_039_280, TOKEN_PROGRAM, data=bytes(165))  # never initialized
    spent_account = node.svm.get_account(spent)
    assert not held.is_on_curve() and spent_account is not None and len(spent_account.data) > 165

    seen = await client(loopback, http, clock).observe([address(k) for k in (held, spent, vault, legacy, blank)])
    by_owner = dict(zip(("held", "spent"), seen[:2], strict=True))
    for (name, observation), owner in zip(by_owner.items(), (holder, spender), strict=True):
        assert (observation.address_type, observation.account_type) == ("token_account", AccountType.EOA), name
        assert observation.exposure is Exposure.EXPOSED_AT_REST and observation.public_key == bytes(owner.pubkey())
        assert observation.balance == node.svm.get_balance(held if name == "held" else spent)  # lamports
    assert (seen[0].tx_count, seen[0].outbound_tx_count) == (1, 0)  # created by the mint authority only
    assert (seen[1].tx_count, seen[1].outbound_tx_count) == (2, 1)  # the owner signed the transfer out
    assert (seen[2].account_type, seen[2].exposure, seen[2].public_key) == (AccountType.PDA, Exposure.NOT_EXPOSED, None)
    assert [(o.account_type, o.address_type, o.exposure) for o in seen[3:]] == [
        (AccountType.CONTRACT, "contract", Exposure.NOT_EXPOSED)  # a mint; an uninitialized account
    ] * 2


async def test_signers_are_counted_whoever_pays_the_fee(node: SolanaNode, loopback: Loopback, http, clock) -> None:
    payer, sender, receiver = node.wallet(), node.wallet(), Keypair()
    node.transfer(sender, receiver.pubkey(), 2 * RENT_EXEMPT)
    node.transfer(sender, receiver.pubkey(), RENT_EXEMPT, payer=payer)  # the sender signs second
    node.transfer(payer, receiver.pubkey(), RENT_EXEMPT)
    seen = await client(loopback, http, clock).observe([address(k) for k in (sender, payer, receiver)])
    assert [(o.tx_count, o.outbound_tx_count) for o in seen] == [(2, 2), (2, 2), (3, 0)]


@pytest.mark.parametrize(
    ("options", "outbound", "fetched"),
    [
        ({"signer_checks": 6}, 0, 6),  # every transaction checked: none signed by the receiver
        ({"signer_checks": 4, "signer_round": 1}, 1, 4),  # 2 not checked: signing is assumed (rounds 1, 2, 1)
        ({"signer_checks": 0}, 1, 0),  # no checks at all: assumed
        ({"page_limit": 3, "max_pages": 1}, 1, 3),  # all seen checked, but the history was cut at 3
    ],
)
async def test_signer_checks_are_capped_and_fail_closed(
    node: SolanaNode, loopback: Loopback, http, clock, options: dict[str, int], outbound: int, fetched: int
) -> None:
    sender, receiver = node.wallet(10**10), Keypair()
    for _ in range(6):
        node.transfer(sender, receiver.pubkey(), RENT_EXEMPT)
    calls: list[str] = []

    def get_transaction(params: list[Any]) -> Any:
        calls.append(params[0])
        return node.get_transaction(params)

    loopback.rpc_methods({**node.methods(), "getTransaction": get_transaction})
    (seen,) = await client(loopback, http, clock, **options).observe([address(receiver)])
    assert seen.outbound_tx_count == outbound and len(calls) == fetched
    assert calls == [entry["signature"] for entry in node.signatures[str(receiver.pubkey())]][:fetched]  # newest first


async def test_signer_check_stops_at_the_first_round_that_finds_one(
    node: SolanaNode, loopback: Loopback, http, clock
) -> None:
    wallet = node.wallet(10**10)
    for _ in range(8):
        node.transfer(wallet, Keypair().pubkey(), RENT_EXEMPT)
    (seen,) = await client(loopback, http, clock, signer_round=3).observe([address(wallet)])
    assert (seen.tx_count, seen.outbound_tx_count) == (8, 3)  # a lower bound: one round of 3, not all 8
    assert loopback.count() == 2


def _documented_node(loopback: Loopback, rpc_vector, transaction: Any) -> str:
    """Serve the documented account, signature and transaction answers; returns the signature."""
    info = rpc_vector("rpc/solana_getAccountInfo.json")["response"]["result"]
    signature = rpc_vector("rpc/solana_getTransaction.json")["request"]["params"][0]
    entry = {**rpc_vector("rpc/solana_getSignaturesForAddress.json")["response"]["result"][0], "signature": signature}

    def answer(params: list[Any]) -> Any:
        if isinstance(transaction, Exception):
            raise transaction
        return transaction

    loopback.rpc_methods(
        {
            "getMultipleAccounts": lambda params: {
                "context": info["context"],
                "value": [info["value"]] * len(params[0]),
            },
            "getSignaturesForAddress": lambda params: [entry],
            "getTransaction": answer,
        }
    )
    return signature


FEE_PAYER, OTHER_KEY = "3UVYmECPPMZSCqWKfENfuoTv51fTDTWicX9xmBD2euKe", "AjozzgE83A3x1sHNUR64hfH7zaEBWeMaFuAN9kQgujrc"


async def test_documented_transaction_shape_names_its_fee_payer(loopback: Loopback, http, clock, rpc_vector) -> None:
    documented = rpc_vector("rpc/solana_getTransaction.json")["response"]["result"]  # abbreviated: no header
    _documented_node(loopback, rpc_vector, documented)
    addresses = [SolanaAddress.decode(key) for key in (FEE_PAYER, OTHER_KEY)]
    payer, other = await client(loopback, http, clock).observe(addresses)
    assert payer.outbound_tx_count == 1  # accountKeys[0] pays the fee, and so signed
    assert other.outbound_tx_count == 1  # without the header its signers are unknown: assumed


async def test_documented_transaction_with_its_header(loopback: Loopback, http, clock, rpc_vector) -> None:
    complete = copy.deepcopy(rpc_vector("rpc/solana_getTransaction.json")["response"]["result"])
    signature = rpc_vector("rpc/solana_getTransaction.json")["request"]["params"][0]
    complete["transaction"]["signatures"] = [signature]  # what a real node adds (see the vector's notes)
    complete["transaction"]["message"]["header"] = {
        "numRequiredSignatures": 1,
        "numReadonlySignedAccounts": 0,
        "numReadonlyUnsignedAccounts": 1,
    }
    _documented_node(loopback, rpc_vector, complete)
    addresses = [SolanaAddress.decode(key) for key in (FEE_PAYER, OTHER_KEY)]
    payer, other = await client(loopback, http, clock).observe(addresses)
    assert (payer.outbound_tx_count, other.outbound_tx_count) == (1, 0)
    request = loopback.requests[-1].body[0]
    assert request["method"] == "getTransaction" and request["params"] == [
        signature,
        {"encoding": "json", "maxSupportedTransactionVersion": 0, "commitment": "finalized"},
    ]


@pytest.mark.parametrize("answer", [None, RpcFailure(-32011, "Transaction history is not available from this node")])
async def test_transactions_the_node_cannot_serve_leave_signing_assumed(
    loopback: Loopback, http, clock, rpc_vector, answer: Any
) -> None:
    _documented_node(loopback, rpc_vector, answer)
    (seen,) = await client(loopback, http, clock).observe([SolanaAddress.decode(OTHER_KEY)])
    assert seen.outbound_tx_count == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda tx: tx["transaction"]["message"].update(header={"numRequiredSignatures": 9}), "numRequiredSignatures"),
        (lambda tx: tx["transaction"]["message"].pop("accountKeys"), "accountKeys"),
        (lambda tx: tx["transaction"].update(signatures=["another"]), "asked for transaction"),
    ],
)
async def test_malformed_transactions_are_refused(
    loopback: Loopback, http, clock, rpc_vector, change: Any, message: str
) -> None:
    transaction = copy.deepcopy(rpc_vector("rpc/solana_getTransaction.json")["response"]["result"])
    change(transaction)
    _documented_node(loopback, rpc_vector, transaction)
    with pytest.raises(MalformedChainData, match=message):
        await client(loopback, http, clock).observe([SolanaAddress.decode(OTHER_KEY)])


async def test_malformed_account_data_is_refused(loopback: Loopback, http, clock) -> None:
    account = {"lamports": 1, "owner": str(TOKEN_PROGRAM), "executable": False, "data": ["%%%", "base64"]}
    loopback.rpc_methods(
        {"getMultipleAccounts": lambda p: {"context": {"slot": 1}, "value": [account]}, "getSignaturesForAddress": list}
    )
    with pytest.raises(MalformedChainData, match="not valid base64"):
        await client(loopback, http, clock).observe([address(Keypair())])
