"""Models of the managed-custody endpoints.

The spec shows the signing body in snake_case (``key_id``), so that request
model keeps snake_case names; responses are camelCase like every other one.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from api.models.accounts import Out, Timestamp
from api.models.crypto import Algorithm, Context, Hex

KeyState = Literal["active", "pending_deletion", "destroyed"]


class ManagedSignRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Body of POST /v1/sign/managed (snake_case, as the spec shows it)."""

    key_id: Annotated[str, Meta(min_length=1, max_length=100, description="The managed key's id (key_...)")]
    message: Annotated[
        Hex,
        Meta(
            description="The message to sign, hex (with or without 0x; may be empty). "
            "To sign text, send its UTF-8 bytes in hex."
        ),
    ]
    algorithm: Annotated[Algorithm, Meta(description="Must be the managed key's algorithm (ml-dsa-44/65/87)")]
    context: Context = ""


class ManagedKeyOut(Out, tag_field="custody", tag="managed"):
    """A managed key. Its private key never leaves custody and is never returned."""

    id: str
    algorithm: str
    chain: str
    public_key: str
    fingerprint: Annotated[str, Meta(description="SHA-256 of the public key, hex")]
    format: Literal["hex", "base64"]
    state: KeyState
    environment: Literal["test", "live"]
    created_at: Timestamp
    deletion_requested_at: Timestamp | None = None
    deletion_scheduled_at: Annotated[
        Timestamp | None, Meta(description="When the key will be destroyed (pending_deletion only)")
    ] = None
    destroyed_at: Timestamp | None = None


class ManagedSignatureOut(Out):
    """A signature made with a managed key (FIPS 204 pure ML-DSA)."""

    key_id: str
    algorithm: str
    signature: Annotated[str, Meta(description="Hex")]
    public_key: Annotated[str, Meta(description="Hex, for POST /v1/verify")]
    context: Annotated[str, Meta(description="Hex of the FIPS 204 context signed with (empty by default)")]
    message_sha256: Annotated[str, Meta(description="SHA-256 of the signed message bytes, hex")]
    signed_at: Timestamp


class ManagedKeyEventOut(Out):
    """One entry of a managed key's append-only audit log."""

    id: str
    key_id: str
    type: Literal["created", "deletion_scheduled", "deletion_cancelled", "destroyed"]
    state: KeyState
    actor: Annotated[str, Meta(description="api_key:<id> for a request, system:purge for the scheduled destruction")]
    request_id: str | None
    at: Timestamp
    details: dict[str, str]
    hash: Annotated[str, Meta(description="SHA-256 chaining this event to the account's previous one, hex")]


class KeyUsageOut(Out):
    """Signatures of one managed key in the month."""

    key_id: str
    algorithm: str
    state: KeyState
    signatures: int


class UsageOut(Out):
    """Managed-custody usage of the caller's account and environment in one
    calendar month (UTC). Counts only; no prices, no billing."""

    month: Annotated[str, Meta(pattern=r"^\d{4}-\d{2}$")]
    environment: Literal["test", "live"]
    active_keys: Annotated[int, Meta(description="Managed keys in state active now")]
    key_months: Annotated[
        int,
        Meta(description="Managed keys that held key material at some time in the month (billed per key per month)"),
    ]
    signatures: Annotated[int, Meta(description="Signing operations in the month (verification is free)")]
    signature_blocks: Annotated[int, Meta(description="ceil(signatures / 10,000)")]
    billable_units: Annotated[int, Meta(description="keyMonths + signatureBlocks")]
    keys: list[KeyUsageOut]
