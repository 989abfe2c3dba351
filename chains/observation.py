"""The one record every chain client returns about an address.

Chain clients (EVM, Bitcoin, Solana, Cosmos, Tron) all produce an ``Observation``;
the scoring functions, the scan endpoint and the pipelines consume only this record,
so a new chain never changes the code downstream of its client.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any


class Exposure(enum.StrEnum):
    """Public-key exposure level of an address, after the draft BIP on output
    public-key exposure classification (levels apply to every chain here)."""

    EXPOSED_AT_REST = "EXPOSED_AT_REST"
    EXPOSED_ON_SPEND = "EXPOSED_ON_SPEND"
    NOT_EXPOSED = "NOT_EXPOSED"
    UNDETERMINED = "UNDETERMINED"

    @property
    def key_on_chain(self) -> bool:
        """True when key material is already public (fail closed on UNDETERMINED)."""
        return self in (Exposure.EXPOSED_AT_REST, Exposure.UNDETERMINED)


class AccountType(enum.StrEnum):
    """What kind of account an address is, as far as exposure is concerned."""

    EOA = "eoa"  # key-controlled account (EVM, Tron, Cosmos, Solana wallet)
    CONTRACT = "contract"  # code account: no ECDSA key of its own
    PDA = "pda"  # Solana program-derived address: off-curve, no private key exists
    UTXO_SCRIPT = "utxo_script"  # Bitcoin script/address


class EvidenceKind(enum.StrEnum):
    """How a public key became visible (the ``kind`` of an ``exposureEvidence`` entry)."""

    SPEND = "spend"  # an input spending the address revealed the key (a scriptSig or witness)
    OUTPUT = "output"  # the key sits in an output script or is the address itself (P2PK, P2TR, Solana)
    NONCE = "nonce"  # an account chain counted signed transactions (EVM nonce, Tron)
    SIGNATURE = "signature"  # the chain stored the key or a signature by it (Cosmos pub_key, Solana signer)
    INDEX = "index"  # the chain-wide exposure index holds the key


@dataclass(frozen=True, slots=True)
class ExposureEvidence:
    """One place a key was revealed: ``chain`` and ``address`` (an output script in hex
    for outputs without an address), the ``kind`` of revelation, and the transaction and
    block that revealed it when the source says (``None`` otherwise)."""

    chain: str
    address: str
    kind: EvidenceKind
    txid: str | None = None
    block_height: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The API's ``{chain, address, kind, txid, blockHeight}``."""
        return {
            "chain": self.chain,
            "address": self.address,
            "kind": self.kind.value,
            "txid": self.txid,
            "blockHeight": self.block_height,
        }


@dataclass(frozen=True, slots=True)
class Observation:
    """What one chain said about one address at one point of its history.

    ``balance`` is exact, in base units (wei, satoshi, lamport, uatom, sun), with
    ``decimals`` to scale it; never a float. ``address_type`` is the chain-specific
    format (``p2pkh``, ``p2tr``, ``eoa``, ``ed25519`` ...). ``source`` names the data
    source (e.g. ``evm-jsonrpc``, ``esplora``) and ``height`` its block height or slot.
    ``evidence`` lists what the client saw reveal the key, with transaction ids where it
    knows them (``chains.evidence.evidence_of`` fills in what the other fields imply);
    it explains ``exposure`` and is not a scoring input of its own.
    """

    chain: str
    address: str
    address_type: str
    account_type: AccountType
    balance: int
    decimals: int
    symbol: str
    tx_count: int
    outbound_tx_count: int
    exposure: Exposure
    public_key: bytes | None
    address_reuse_count: int
    first_activity: datetime | None
    last_activity: datetime | None
    source: str
    height: int | None
    observed_at: datetime
    evidence: tuple[ExposureEvidence, ...] = ()

    @property
    def public_key_exposed(self) -> bool:
        """The spec's ``publicKeyExposed``: the key is, or may be, visible on chain."""
        return self.exposure.key_on_chain

    @property
    def has_activity(self) -> bool:
        """False for an address the chain has never seen (the spec's SCAN_003)."""
        return self.tx_count > 0 or self.balance > 0
