"""A Solana JSON-RPC stand-in backed by solders' in-process LiteSVM.

LiteSVM runs real transactions (signature checks, rent, system transfers), so the
balances, owners and executable flags the client reads are what a validator would hold.
It keeps no address index, so this node records the signatures of the transactions it
sent to answer ``getSignaturesForAddress``, newest first with ``before`` paging, like RPC.
"""

from __future__ import annotations

import base64
from typing import Any

from solders.account import Account
from solders.keypair import Keypair
from solders.litesvm import LiteSVM
from solders.message import Message
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction
from solders.transaction_metadata import FailedTransactionMetadata

U64_MAX = 2**64 - 1
FIRST_BLOCK_TIME = 1_763_000_000


class SolanaNode:
    """LiteSVM plus a signature index, served through ``Loopback.rpc_methods(node.methods())``."""

    def __init__(self) -> None:
        self.svm = LiteSVM()
        self.signatures: dict[str, list[dict[str, Any]]] = {}

    def wallet(self, lamports: int = 10**9) -> Keypair:
        """A new key whose system account holds ``lamports`` (an airdrop, itself a transaction)."""
        keypair = Keypair()
        self.svm.airdrop(keypair.pubkey(), lamports)
        return keypair

    def transfer(self, sender: Keypair, to: Pubkey, lamports: int) -> str:
        """Send a signed system transfer; index its signature under every account it touches."""
        message = Message(
            [transfer(TransferParams(from_pubkey=sender.pubkey(), to_pubkey=to, lamports=lamports))], sender.pubkey()
        )
        tx = Transaction([sender], message, self.svm.latest_blockhash())
        result = self.svm.send_transaction(tx)
        if isinstance(result, FailedTransactionMetadata):
            raise RuntimeError(f"transfer failed: {result.err}")
        self.svm.expire_blockhash()  # the next transaction gets a fresh blockhash
        signature = str(tx.signatures[0])
        count = sum(len(v) for v in self.signatures.values())
        entry = {
            "signature": signature,
            "slot": self.svm.get_clock().slot,
            "err": None,
            "memo": None,
            "blockTime": FIRST_BLOCK_TIME + count,
            "confirmationStatus": "finalized",
        }
        for key in tx.message.account_keys:
            self.signatures.setdefault(str(key), []).insert(0, entry)
        return signature

    def place(self, address: Pubkey, lamports: int, owner: Pubkey, executable: bool = False) -> None:
        """Set an account directly (a program-owned data account, a PDA ...)."""
        self.svm.set_account(
            address,
            Account(lamports=lamports, data=b"\x00" * 8, owner=owner, executable=executable, rent_epoch=U64_MAX),
        )

    def _account(self, key: str) -> dict[str, Any] | None:
        account = self.svm.get_account(Pubkey.from_string(key))
        if account is None:
            return None
        return {
            "data": [base64.b64encode(b"").decode(), "base64"],
            "executable": account.executable,
            "lamports": account.lamports,
            "owner": str(account.owner),
            "rentEpoch": account.rent_epoch,
            "space": len(account.data),
        }

    def get_multiple_accounts(self, params: list[Any]) -> dict[str, Any]:
        keys, _config = params
        return {
            "context": {"apiVersion": "2.0.15", "slot": self.svm.get_clock().slot},
            "value": [self._account(key) for key in keys],
        }

    def get_signatures_for_address(self, params: list[Any]) -> list[dict[str, Any]]:
        key, config = params
        history = self.signatures.get(key, [])
        if "before" in config:
            index = next(i for i, item in enumerate(history) if item["signature"] == config["before"])
            history = history[index + 1 :]
        return history[: config.get("limit", 1000)]

    def methods(self) -> dict[str, Any]:
        """The JSON-RPC methods the client uses."""
        return {
            "getMultipleAccounts": self.get_multiple_accounts,
            "getSignaturesForAddress": self.get_signatures_for_address,
        }
