"""Signing digests of EVM transaction types, checked against eth-account's own signing.

anvil covers types 0, 1, 2 and 4 end to end (test_evm.py). A blob transaction (type 3)
needs a 128 KiB blob and its KZG cell proofs to be sent (about 13 s to sign), so its digest
is checked here offline. The node's JSON field names are those anvil returns for a pending
blob transaction.
"""

from __future__ import annotations

from typing import Any

from eth_account import Account
from eth_account.typed_transactions import TypedTransaction

from chains.clients.evm_tx import signed_digest
from chains.clients.recovery import recover_account_key
from chains.codecs.evm import EvmAddress

_NODE_NAMES = {"data": "input"}


def node_json(raw: bytes) -> dict[str, Any]:
    """What ``eth_getTransactionByHash`` returns for a typed transaction: hex quantities, ``input``."""
    fields = TypedTransaction.from_bytes(raw).as_dict()

    def hexify(value: Any) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            return hex(value)
        if isinstance(value, bytes):
            return "0x" + value.hex()
        if isinstance(value, list | tuple):
            return [hexify(v) for v in value]
        if isinstance(value, dict):
            return {k: hexify(v) for k, v in value.items()}
        return value

    node = {_NODE_NAMES.get(k, k): hexify(v) for k, v in fields.items()}
    node["yParity"] = node.pop("v")
    return node


BLOB = {
    "type": 3,
    "nonce": 7,
    "chainId": 1,
    "maxFeePerGas": 3 * 10**9,
    "maxPriorityFeePerGas": 10**9,
    "maxFeePerBlobGas": 2 * 10**9,
    "gas": 21_000,
    "to": "0x000000000000000000000000000000000000dEaD",
    "value": 5,
    "accessList": [{"address": "0x000000000000000000000000000000000000dEaD", "storageKeys": []}],
    "blobVersionedHashes": ["0x01" + "ab" * 31, "0x01" + "cd" * 31],
}


def test_blob_transaction_digest_recovers_the_sender() -> None:
    account = Account.create()
    raw = account.sign_transaction(BLOB).raw_transaction
    signed = signed_digest(node_json(raw))
    assert signed is not None
    key = recover_account_key(
        signed.digest, signed.r, signed.s, signed.recovery_id, EvmAddress.decode(account.address).payload
    )
    assert key is not None and key == account._key_obj.public_key.to_compressed_bytes()


def test_unknown_type_gives_no_digest() -> None:
    assert signed_digest({"type": "0x7e", "r": "0x0", "s": "0x0"}) is None  # an OP-stack deposit


def test_tampered_field_recovers_someone_else() -> None:
    account = Account.create()
    eip1559 = {k: v for k, v in BLOB.items() if k not in ("blobVersionedHashes", "maxFeePerBlobGas")} | {"type": 2}
    node = node_json(account.sign_transaction(eip1559).raw_transaction)
    node["value"] = "0x6"  # not what was signed
    signed = signed_digest(node)
    assert signed is not None
    assert (
        recover_account_key(
            signed.digest, signed.r, signed.s, signed.recovery_id, EvmAddress.decode(account.address).payload
        )
        is None
    )
