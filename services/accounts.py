"""Accounts, API keys and sessions: registration, login, credential checks,
key creation, deletion and rotation. Free of HTTP; raises ``services.errors``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from chains.environment import Environment
from core.clock import Clock, iso
from core.ids import new_id
from core.text import UNSAFE_DESCRIPTION, email_form, nfc, unsafe_character
from services.caps import API_KEY_CAP, API_KEYS, cap_reached
from services.credentials import ApiKeyCodec, InvalidSession, SessionCodec
from services.errors import (
    AlreadyRotated,
    CredentialNotAllowed,
    CredentialRevoked,
    InvalidRequest,
    NotFound,
    Unauthenticated,
)
from services.pagination import Page, PageRequest, keyset_after, keyset_cursor, page_of
from storage.models import Account, ApiKey, KeyType, Plan
from storage.repository import Store

_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s.]+(\.[^@\s.]+)+$")
_TOUCH_INTERVAL = timedelta(seconds=60)
#: The tag of API-key list cursors (``services.pagination``).
API_KEY_PAGES = "k"


def clean_text(value: str, field: str) -> str:
    """A chosen text (address, name) as stored: NFC. ``InvalidRequest`` naming ``field``
    when it holds a control or bidirectional-override character (``core.text``)."""
    char = unsafe_character(value)
    if char is not None:
        reason = f"contains {char}: {UNSAFE_DESCRIPTION} are not allowed"
        raise InvalidRequest(f"invalid request: {reason} (field '{field}')", field=field, reason=reason)
    return nfc(value)


def normalise_email(email: str) -> str:
    """The stored form of an email, the one an account is unique by (``core.text.email_form``:
    NFC, lower-cased as a whole). Raises ``InvalidRequest`` for a control or
    bidirectional-override character, or when it is not a plausible address."""
    normal = email_form(clean_text(email, "email"))
    if len(normal) > 254 or not _EMAIL.fullmatch(normal):
        raise InvalidRequest("invalid request: not a valid email address (field 'email')", field="email")
    return normal


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling, with which credential.

    ``environment`` is None for a session token (it manages keys of both).
    ``replaced_by`` and ``grace_ends_at`` are set for an API key that was rotated and
    is in its grace period: it still authenticates, but may not manage API keys.
    """

    account: Account
    kind: str  # "secret" | "publishable" | "session"
    credential_id: str
    environment: Environment | None
    replaced_by: str | None = None
    grace_ends_at: datetime | None = None
    session_expires_at: datetime | None = None  # a session token's own expiry

    @property
    def rate_key(self) -> str:
        """The identity rate limits are counted under."""
        return f"{self.kind}:{self.credential_id}"


def environment_of(principal: Principal) -> Environment:
    """The data environment of a key-authenticated caller."""
    assert principal.environment is not None, "secret-key endpoints always carry an environment"
    return principal.environment


class AccountService:
    """Account and credential operations over the operational store."""

    def __init__(
        self,
        store: Store,
        keys: ApiKeyCodec,
        sessions: SessionCodec,
        clock: Clock,
        session_ttl_seconds: int,
        rotation_grace_seconds: int,
    ) -> None:
        self._store = store
        self._keys = keys
        self._sessions = sessions
        self._clock = clock
        self._session_ttl = session_ttl_seconds
        self._grace = timedelta(seconds=rotation_grace_seconds)
        self._last_touch: dict[str, datetime] = {}

    # --- accounts -----------------------------------------------------------------

    async def register(self, email: str, name: str | None, password_hash: str) -> Account:
        """Create a free-plan account (address and name normalised, ``clean_text``);
        raises ``DuplicateEmail`` (ACC_001)."""
        name = None if name is None else clean_text(name, "name")
        account = Account(new_id("usr"), normalise_email(email), name, Plan.FREE, self._clock.now())
        await self._store.create_account(account, password_hash)
        return account

    async def stored_password_hash(self, email: str) -> tuple[Account | None, str | None]:
        """The account and password hash for a login attempt (both None when
        unknown, so the caller still spends one verification). An address with a
        control or bidirectional-override character is an ``InvalidRequest`` (REQ_001)."""
        clean_text(email, "email")
        try:
            found = await self._store.account_by_email(normalise_email(email))
        except InvalidRequest:  # not an email address: no such account
            found = None
        return (None, None) if found is None else found

    def issue_session(self, account: Account) -> tuple[str, datetime]:
        """A signed session token for a logged-in account, and its expiry."""
        return self._sessions.issue(account.id, self._clock.now(), self._session_ttl)

    # --- authentication -------------------------------------------------------------

    async def authenticate(self, credential: str | None) -> Principal:
        """The principal behind a bearer credential; AUTH_001 for a missing,
        malformed, unknown or expired one, AUTH_002 for a deleted or rotated-out key."""
        if not credential:
            raise Unauthenticated("missing credential", reason="missing")
        now = self._clock.now()
        if self._sessions.looks_like_session(credential):
            return await self._session_principal(credential, now)
        if not self._keys.looks_like_key(credential):
            raise Unauthenticated("malformed API key")
        found = await self._store.api_key_by_hash(self._keys.hash(credential))
        if found is None:
            raise Unauthenticated("unknown API key")
        key, account = found
        if key.deleted_at is not None:
            raise CredentialRevoked("this API key has been deleted", reason="deleted")
        if not key.is_usable(now):
            raise CredentialRevoked(
                "this API key was rotated and its 24-hour grace period has ended",
                reason="rotated",
                replacedBy=key.replaced_by,
            )
        self._touch(key.id, now)
        if key.replaced_by is not None:
            return Principal(account, key.type.value, key.id, key.environment, key.replaced_by, key.expires_at)
        return Principal(account, key.type.value, key.id, key.environment)

    async def _session_principal(self, token: str, now: datetime) -> Principal:
        try:
            session = self._sessions.verify(token, now)
        except InvalidSession as exc:
            raise Unauthenticated(f"invalid session token ({exc.reason})", reason=exc.reason) from None
        if await self._store.session_revoked(session.session_id):
            raise Unauthenticated("invalid session token (logged out)", reason="logged out")
        account = await self._store.account_by_id(session.account_id)
        if account is None:
            raise Unauthenticated("invalid session token (account no longer exists)")
        return Principal(account, "session", session.session_id, None, session_expires_at=session.expires_at)

    async def logout(self, principal: Principal) -> None:
        """End the caller's session now, on every worker and node (AUTH_003 for an API key:
        keys are deleted, not logged out)."""
        if principal.kind != "session" or principal.session_expires_at is None:
            raise CredentialNotAllowed(
                "logout ends a session: send the session token from POST /v1/auth/login (API keys are deleted"
                " with DELETE /v1/auth/api-keys/{id})"
            )
        await self._store.revoke_session(
            principal.credential_id, principal.account.id, self._clock.now(), principal.session_expires_at
        )

    def _touch(self, key_id: str, now: datetime) -> None:
        last = self._last_touch.get(key_id)
        if last is None or now - last >= _TOUCH_INTERVAL:
            self._last_touch[key_id] = now
            self._store.touch_api_key(key_id, now)

    # --- API keys ------------------------------------------------------------------

    @staticmethod
    def _check_may_manage(principal: Principal) -> None:
        """A rotated key in its grace period may not create, rotate or delete keys: otherwise
        the old (possibly leaked) key could delete its own replacement or mint new keys."""
        if principal.replaced_by is not None:
            ends = iso(principal.grace_ends_at) if principal.grace_ends_at else None
            raise CredentialNotAllowed(
                "this API key was rotated: until its grace period ends it still authenticates, but it"
                f" cannot create, rotate or delete API keys; use its replacement ({principal.replaced_by})"
                " or a session token",
                reason="rotated",
                replacedBy=principal.replaced_by,
                graceEndsAt=ends,
            )

    @staticmethod
    def _check_environment(principal: Principal, environment: Environment) -> None:
        if principal.environment is not None and principal.environment is not environment:
            raise CredentialNotAllowed(
                f"a {principal.environment.value} secret key cannot manage {environment.value} keys;"
                " use a session token or a key of that environment",
            )

    async def create_key(
        self, principal: Principal, name: str, key_type: KeyType, environment: Environment
    ) -> tuple[ApiKey, str]:
        """A new API key for the caller's account; the full key string is returned once."""
        self._check_may_manage(principal)
        self._check_environment(principal, environment)
        generated = self._keys.generate(key_type, environment)
        key = ApiKey(
            id=new_id("key"),
            account_id=principal.account.id,
            name=name,
            type=key_type,
            environment=environment,
            key_hash=generated.key_hash,
            prefix=generated.prefix,
            created_at=self._clock.now(),
        )
        if not await self._store.create_api_key(key, API_KEY_CAP):
            raise cap_reached(API_KEYS, API_KEY_CAP, principal.account.plan)
        return key, generated.key

    async def list_keys(self, principal: Principal, page: PageRequest | None = None) -> Page[ApiKey]:
        """A page of the caller's usable keys, oldest first (only its own environment's when
        called with a key); keys deleted or past their rotation grace period are not listed."""
        page = page or PageRequest()
        after = keyset_after(API_KEY_PAGES, page.cursor)
        rows = await self._store.list_api_keys(
            principal.account.id, principal.environment, self._clock.now(), after, page.limit + 1
        )
        return page_of(rows, page.limit, lambda k: keyset_cursor(API_KEY_PAGES, k.created_at, k.id))

    async def _own_key(self, principal: Principal, key_id: str) -> ApiKey:
        key = await self._store.get_api_key(principal.account.id, key_id)
        if key is None or key.deleted_at is not None:
            raise NotFound(f"no API key {key_id} on this account", id=key_id)
        self._check_environment(principal, key.environment)
        return key

    async def delete_key(self, principal: Principal, key_id: str) -> None:
        """Delete one of the caller's keys, effective immediately and for good."""
        self._check_may_manage(principal)
        await self._own_key(principal, key_id)
        if not await self._store.delete_api_key(principal.account.id, key_id, self._clock.now()):
            raise NotFound(f"no API key {key_id} on this account", id=key_id)

    async def rotate_key(self, principal: Principal, key_id: str) -> tuple[ApiKey, str, datetime]:
        """Replace a key with a new one of the same name, type and environment; the
        old one keeps working for the grace period (24 h) and then stops."""
        self._check_may_manage(principal)
        old = await self._own_key(principal, key_id)
        now = self._clock.now()
        if old.replaced_by is not None:
            raise AlreadyRotated(f"API key {key_id} was already rotated", replacedBy=old.replaced_by)
        if not old.is_usable(now):
            raise NotFound(f"no API key {key_id} on this account", id=key_id)
        generated = self._keys.generate(old.type, old.environment)
        new = ApiKey(
            id=new_id("key"),
            account_id=old.account_id,
            name=old.name,
            type=old.type,
            environment=old.environment,
            key_hash=generated.key_hash,
            prefix=generated.prefix,
            created_at=now,
        )
        expires = now + self._grace
        if not await self._store.rotate_api_key(principal.account.id, key_id, new, expires):
            raise AlreadyRotated(f"API key {key_id} was already rotated")
        return new, generated.key, expires
