"""A Solana JSON-RPC stand-in backed by solders' in-process LiteSVM.

LiteSVM runs real transactions (signature checks, rent, system transfers, the SPL Token and
Token-2022 programs), so the balances, owners, account data and executable flags the client
reads are what a validator would hold. It keeps no address index, so this node records the
transactions it sent to answer ``getSignaturesForAddress`` (newest first, with ``before``
paging, like RPC) and ``getTransaction`` (serialised by solders' own
``EncodedConfirmedTransactionWithStatusMeta``, the RPC's ``json`` encoding).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import spl.token.instructions as token
from solders.account import Account
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.litesvm import LiteSVM
from solders.message import Message
from solders.pubkey import Pubkey
from solders.system_program import CreateAccountParams, TransferParams, create_account, transfer
from solders.transaction import Legacy, Transaction
from solders.transaction_metadata import FailedTransactionMetadata
from solders.transaction_status import (
    EncodedConfirmedTransactionWithStatusMeta,
    EncodedTransactionWithStatusMeta,
    UiCompiledInstruction,
    UiRawMessage,
    UiTransaction,
    UiTransactionStatusMeta,
)
from spl.token import models
from spl.token.constants import TOKEN_PROGRAM_ID

from chains.codecs.base58 import b58encode

U64_MAX = 2**64 - 1
FIRST_BLOCK_TIME = 1_763_000_000
MINT_LEN = 82


class SolanaNode:
    """LiteSVM plus a transaction index, served through ``Loopback.rpc_methods(node.methods())``."""

    def __init__(self) -> None:
        self.svm = LiteSVM()
        self.signatures: dict[str, list[dict[str, Any]]] = {}
        self.transactions: dict[str, dict[str, Any]] = {}

    def wallet(self, lamports: int = 10**9) -> Keypair:
        """A new key whose system account holds ``lamports`` (an airdrop, itself a transaction)."""
        keypair = Keypair()
        self.svm.airdrop(keypair.pubkey(), lamports)
        return keypair

    def send(self, instructions: list[Instruction], payer: Keypair, *signers: Keypair) -> str:
        """Run a transaction paid by ``payer``; index its signature under every account it touches."""
        tx = Transaction([payer, *signers], Message(instructions, payer.pubkey()), self.svm.latest_blockhash())
        result = self.svm.send_transaction(tx)
        if isinstance(result, FailedTransactionMetadata):
            raise RuntimeError(f"transaction failed: {result.err}")
        self.svm.expire_blockhash()  # the next transaction gets a fresh blockhash
        signature = str(tx.signatures[0])
        slot = self.svm.get_clock().slot
        block_time = FIRST_BLOCK_TIME + len(self.transactions)
        entry = {
            "signature": signature,
            "slot": slot,
            "err": None,
            "memo": None,
            "blockTime": block_time,
            "confirmationStatus": "finalized",
        }
        for key in tx.message.account_keys:
            self.signatures.setdefault(str(key), []).insert(0, entry)
        self.transactions[signature] = self._encoded(tx, slot, block_time, result.fee())
        return signature

    @staticmethod
    def _encoded(tx: Transaction, slot: int, block_time: int, fee: int) -> dict[str, Any]:
        """The ``getTransaction`` result of ``tx`` in the ``json`` encoding, as solders serialises it."""
        message = tx.message
        instructions = [
            UiCompiledInstruction(ix.program_id_index, bytes(ix.accounts), b58encode(bytes(ix.data)))
            for ix in message.instructions
        ]
        ui = UiRawMessage(message.header, list(message.account_keys), message.recent_blockhash, instructions)
        balances = [0] * len(message.account_keys)  # not tracked; the client does not read them
        meta = UiTransactionStatusMeta(None, fee, balances, balances)
        encoded = EncodedConfirmedTransactionWithStatusMeta(
            slot,
            EncodedTransactionWithStatusMeta(UiTransaction(list(tx.signatures), ui), meta, Legacy.Legacy),
            block_time,
        )
        result: dict[str, Any] = json.loads(encoded.to_json())
        return result

    def transfer(self, sender: Keypair, to: Pubkey, lamports: int, payer: Keypair | None = None) -> str:
        """A signed system transfer from ``sender``, its fee paid by ``payer`` (default the sender)."""
        instruction = transfer(TransferParams(from_pubkey=sender.pubkey(), to_pubkey=to, lamports=lamports))
        if payer is None or payer == sender:
            return self.send([instruction], sender)
        return self.send([instruction], payer, sender)

    def mint(self, authority: Keypair, program: Pubkey = TOKEN_PROGRAM_ID) -> Pubkey:
        """A new SPL mint of ``program`` (Token or Token-2022), ``authority`` paying and minting."""
        mint = Keypair()
        rent = self.svm.minimum_balance_for_rent_exemption(MINT_LEN)
        create = create_account(
            CreateAccountParams(
                from_pubkey=authority.pubkey(), to_pubkey=mint.pubkey(), lamports=rent, space=MINT_LEN, owner=program
            )
        )
        initialize = token.initialize_mint(
            models.InitializeMintParams(
                decimals=6, program_id=program, mint=mint.pubkey(), mint_authority=authority.pubkey()
            )
        )
        self.send([create, initialize], authority, mint)
        return mint.pubkey()

    def token_account(self, authority: Keypair, mint: Pubkey, owner: Pubkey, amount: int = 0) -> Pubkey:
        """The associated token account of ``owner`` for ``mint`` (an off-curve address), created
        and funded with ``amount`` tokens by the mint ``authority`` (the owner does not sign)."""
        program = self.owner(mint)
        account = token.get_associated_token_address(owner, mint, token_program_id=program)
        instructions = [
            token.create_associated_token_account(authority.pubkey(), owner, mint, token_program_id=program)
        ]
        if amount:
            params = models.MintToParams(
                program_id=program, mint=mint, dest=account, mint_authority=authority.pubkey(), amount=amount
            )
            instructions.append(token.mint_to(params))
        self.send(instructions, authority)
        return account

    def token_transfer(self, owner: Keypair, source: Pubkey, dest: Pubkey, amount: int) -> str:
        """Move ``amount`` tokens out of ``source``, signed by its ``owner``."""
        program = self.owner(source)
        params = models.TransferParams(
            program_id=program, source=source, dest=dest, owner=owner.pubkey(), amount=amount
        )
        return self.send([token.transfer(params)], owner)

    def owner(self, address: Pubkey) -> Pubkey:
        """The program owning the existing account ``address``."""
        account = self.svm.get_account(address)
        assert account is not None, f"no account {address}"
        return account.owner

    def place(self, address: Pubkey, lamports: int, owner: Pubkey, executable: bool = False, data: bytes = b"") -> None:
        """Set an account directly (a program-owned data account, a PDA ...; 8 zero bytes of data by default)."""
        self.svm.set_account(
            address,
            Account(
                lamports=lamports, data=data or b"\x00" * 8, owner=owner, executable=executable, rent_epoch=U64_MAX
            ),
        )

    def _account(self, key: str, config: dict[str, Any]) -> dict[str, Any] | None:
        account = self.svm.get_account(Pubkey.from_string(key))
        if account is None:
            return None
        data = bytes(account.data)
        if "dataSlice" in config:
            offset, length = config["dataSlice"]["offset"], config["dataSlice"]["length"]
            data = data[offset : offset + length]
        return {
            "data": [base64.b64encode(data).decode(), "base64"],
            "executable": account.executable,
            "lamports": account.lamports,
            "owner": str(account.owner),
            "rentEpoch": account.rent_epoch,
            "space": len(account.data),
        }

    def get_multiple_accounts(self, params: list[Any]) -> dict[str, Any]:
        keys, config = params
        return {
            "context": {"apiVersion": "2.0.15", "slot": self.svm.get_clock().slot},
            "value": [self._account(key, config) for key in keys],
        }

    def get_signatures_for_address(self, params: list[Any]) -> list[dict[str, Any]]:
        key, config = params
        history = self.signatures.get(key, [])
        if "before" in config:
            index = next(i for i, item in enumerate(history) if item["signature"] == config["before"])
            history = history[index + 1 :]
        return history[: config.get("limit", 1000)]

    def get_transaction(self, params: list[Any]) -> dict[str, Any] | None:
        signature, config = params
        assert config["encoding"] == "json" and config["maxSupportedTransactionVersion"] == 0
        return self.transactions.get(signature)

    def methods(self) -> dict[str, Any]:
        """The JSON-RPC methods the client uses."""
        return {
            "getMultipleAccounts": self.get_multiple_accounts,
            "getSignaturesForAddress": self.get_signatures_for_address,
            "getTransaction": self.get_transaction,
        }
