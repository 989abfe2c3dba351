"""The hash an EVM transaction's sender signed, rebuilt from ``eth_getTransactionByHash`` JSON.

Every signed EVM transaction lets anyone recover its sender's public key. To do that, the
signing payload is rebuilt per transaction type:

| type | signed payload |
|---|---|
| 0, pre-EIP-155 (v 27/28) | ``rlp([nonce, gasPrice, gas, to, value, data])`` |
| 0, EIP-155 (v = 2·chainId + 35/36) | ``rlp([nonce, gasPrice, gas, to, value, data, chainId, 0, 0])`` |
| 1 (EIP-2930) | ``0x01 ‖ rlp([chainId, nonce, gasPrice, gas, to, value, data, accessList])`` |
| 2 (EIP-1559) | ``0x02 ‖ rlp([chainId, nonce, maxPriorityFeePerGas, maxFeePerGas, gas, to, value, data,
  accessList])`` |
| 3 (EIP-4844) | type 2's fields + ``maxFeePerBlobGas, blobVersionedHashes``, prefix ``0x03`` |
| 4 (EIP-7702) | type 2's fields + ``authorizationList``, prefix ``0x04`` |

The digest is keccak-256 of the payload. Other types (L2 deposit transactions, zkSync's
EIP-712 type 0x71, Celo's 0x7b ...) are not rebuilt, so no key is recovered from them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import rlp

from pqc.hashes import keccak256


@dataclass(frozen=True, slots=True)
class SignedDigest:
    """What a transaction's signature signed: the digest, and r, s and recovery id."""

    digest: bytes
    r: int
    s: int
    recovery_id: int


def _int(value: Any) -> int:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise ValueError(f"expected a 0x quantity, got {value!r:.80}")
    return int(value, 16)


def _data(value: Any) -> bytes:
    if value is None:
        return b""  # contract creation: empty "to"
    if not isinstance(value, str) or not value.startswith("0x"):
        raise ValueError(f"expected 0x data, got {value!r:.80}")
    return bytes.fromhex(value[2:])


def _access_list(value: Any) -> list[list[Any]]:
    return [[_data(item["address"]), [_data(key) for key in item["storageKeys"]]] for item in value or []]


def _authorizations(value: Any) -> list[list[Any]]:
    return [
        [_int(a["chainId"]), _data(a["address"]), _int(a["nonce"]), _int(a["yParity"]), _int(a["r"]), _int(a["s"])]
        for a in value
    ]


def _hashes(value: Any) -> list[bytes]:
    return [_data(h) for h in value]


_FieldReader = Callable[[Any], Any]
_COMMON_1559: tuple[tuple[str, _FieldReader], ...] = (
    ("chainId", _int),
    ("nonce", _int),
    ("maxPriorityFeePerGas", _int),
    ("maxFeePerGas", _int),
    ("gas", _int),
    ("to", _data),
    ("value", _int),
    ("input", _data),
    ("accessList", _access_list),
)

#: The signed fields of each typed transaction, in RLP order.
TYPED_FIELDS: Mapping[int, tuple[tuple[str, _FieldReader], ...]] = MappingProxyType(
    {
        1: (
            ("chainId", _int),
            ("nonce", _int),
            ("gasPrice", _int),
            ("gas", _int),
            ("to", _data),
            ("value", _int),
            ("input", _data),
            ("accessList", _access_list),
        ),
        2: _COMMON_1559,
        3: (*_COMMON_1559, ("maxFeePerBlobGas", _int), ("blobVersionedHashes", _hashes)),
        4: (*_COMMON_1559, ("authorizationList", _authorizations)),
    }
)

_LEGACY_FIELDS: tuple[tuple[str, _FieldReader], ...] = (
    ("nonce", _int),
    ("gasPrice", _int),
    ("gas", _int),
    ("to", _data),
    ("value", _int),
    ("input", _data),
)


def _fields(tx: Mapping[str, Any], spec: Sequence[tuple[str, _FieldReader]]) -> list[Any]:
    return [read(tx.get(name)) for name, read in spec]


def signed_digest(tx: Mapping[str, Any]) -> SignedDigest | None:
    """The digest ``tx``'s sender signed, with r, s and recovery id; None for an
    unsupported type. Raises ``ValueError`` (or ``KeyError``/``TypeError``) on malformed fields."""
    tx_type = _int(tx.get("type", "0x0"))
    r, s = _int(tx["r"]), _int(tx["s"])
    if tx_type == 0:
        v = _int(tx["v"])
        fields = _fields(tx, _LEGACY_FIELDS)
        if v in (27, 28):
            return SignedDigest(keccak256(rlp.encode(fields)), r, s, v - 27)
        if v < 35:
            raise ValueError(f"legacy transaction with invalid v {v}")
        chain_id, recovery_id = divmod(v - 35, 2)
        return SignedDigest(keccak256(rlp.encode([*fields, chain_id, 0, 0])), r, s, recovery_id)
    spec = TYPED_FIELDS.get(tx_type)
    if spec is None:
        return None
    parity = tx.get("yParity", tx.get("v"))
    payload = bytes([tx_type]) + rlp.encode(_fields(tx, spec))
    return SignedDigest(keccak256(payload), r, s, _int(parity))
