"""Models of the account, login and API-key endpoints."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

Name = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=200,
        description="Human-readable label; stored in NFC; control and bidi-override characters: REQ_001",
    ),
]
Email = Annotated[
    str,
    Meta(
        min_length=3,
        max_length=254,
        description="Account email: one account per address in NFC, lower-cased as a whole; "
        "control and bidi-override characters: REQ_001",
    ),
]
Password = Annotated[str, Meta(max_length=4096, description="At least 12 characters (ACC_003 otherwise)")]
Timestamp = Annotated[str, Meta(description="ISO 8601 UTC timestamp")]


class Strict(msgspec.Struct, forbid_unknown_fields=True, rename="camel", kw_only=True):
    """Base of request models: unknown fields are an error, names are camelCase."""


class Out(msgspec.Struct, rename="camel", kw_only=True):
    """Base of response models: names are camelCase."""


class RegisterRequest(Strict):
    """Body of POST /v1/auth/register."""

    email: Email
    password: Password
    name: Annotated[str, Meta(max_length=200)] | None = None


class LoginRequest(Strict):
    """Body of POST /v1/auth/login."""

    email: Email
    password: Password


class AccountOut(Out):
    """A user account."""

    id: Annotated[str, Meta(pattern="^usr_[0-9a-z]+$")]
    email: str
    name: str | None
    plan: Literal["free", "builder", "pro", "enterprise"]
    created_at: Timestamp


class SessionUser(Out):
    """The account summary inside a login result."""

    id: str
    email: str
    plan: Literal["free", "builder", "pro", "enterprise"]


class LoginOut(Out):
    """A session token for the key-management endpoints."""

    token: str
    expires_at: Timestamp
    user: SessionUser


class CreateApiKeyRequest(Strict):
    """Body of POST /v1/auth/api-keys."""

    name: Name
    type: Literal["publishable", "secret"]
    environment: Literal["test", "live"]


class ApiKeyCreatedOut(Out):
    """A new API key; ``key`` is shown only here, never again."""

    id: Annotated[str, Meta(pattern="^key_[0-9a-z]+$")]
    name: str
    type: Literal["publishable", "secret"]
    environment: Literal["test", "live"]
    key: str
    prefix: str
    created_at: Timestamp


class ApiKeyOut(Out):
    """An API key as listed: the prefix instead of the full key."""

    id: str
    name: str
    type: Literal["publishable", "secret"]
    environment: Literal["test", "live"]
    prefix: str
    last_used_at: Timestamp | None
    created_at: Timestamp
    expires_at: Annotated[Timestamp | None, Meta(description="Set once the key was rotated out")]


class RotatedKeyOut(ApiKeyCreatedOut):
    """The replacement key of a rotation, and until when the old one still works."""

    rotated_from: str
    previous_key_expires_at: Timestamp
