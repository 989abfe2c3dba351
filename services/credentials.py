"""API key strings, their keyed hashes, session tokens and the master secret.

An API key is shown to its owner once and stored only as HMAC-SHA256 under a
server secret, so a stolen database does not yield usable keys. Session tokens
are self-contained, HMAC-signed and expiring.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from chains.environment import Environment
from storage.models import KeyType

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_RANDOM_CHARS = 43  # 62**43 > 2**256: at least 256 bits of randomness
_TYPE_PARTS = {KeyType.SECRET: ("sec", "sk"), KeyType.PUBLISHABLE: ("pub", "pk")}
_PREFIX_RANDOM_CHARS = 6


class Secrets:
    """Purpose-bound keys derived from the master secret."""

    def __init__(self, master: bytes) -> None:
        if len(master) < 32:
            raise ValueError("master secret must be at least 32 bytes")
        self.key_hash_key = hmac.new(master, b"qday/api-key-hash/v1", hashlib.sha256).digest()
        self.session_key = hmac.new(master, b"qday/session-token/v1", hashlib.sha256).digest()
        self.challenge_key = hmac.new(master, b"qday/registration-challenge/v1", hashlib.sha256).digest()
        self.webhook_seal_key = hmac.new(master, b"qday/webhook-secret-seal/v1", hashlib.sha256).digest()
        self.csrf_key = hmac.new(master, b"qday/dashboard-csrf/v1", hashlib.sha256).digest()


def load_master_secret(configured_hex: str, secrets_dir: Path) -> bytes:
    """The configured master secret, or the one kept in ``secrets_dir`` (created
    on first start with owner-only permissions; concurrent starters agree: the
    file appears under its name only once written in full, so a worker starting
    beside another never reads it half-made)."""
    if configured_hex:
        return bytes.fromhex(configured_hex)
    secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = secrets_dir / "master.key"
    if not path.exists():
        draft = secrets_dir / f".master.key.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(draft, path)  # atomic, and never replaces a key another starter put there first
            except FileExistsError:
                pass
        finally:
            draft.unlink()
    text = path.read_text().strip()
    if len(text) < 64:
        raise ValueError(f"{path} is truncated or empty; restore it or remove it to start afresh")
    return bytes.fromhex(text)


@dataclass(frozen=True, slots=True)
class NewApiKey:
    """A freshly generated key: the full string (shown once) and what is stored."""

    key: str
    key_hash: bytes
    prefix: str


class ApiKeyCodec:
    """Generates, parses and hashes API key strings for one service token."""

    def __init__(self, token: str, key_hash_key: bytes) -> None:
        self._token = token
        # HMAC-SHA256 keyed once: copying it per request skips OpenSSL's per-call
        # algorithm fetch (measured 23-35 µs -> 15-20 µs on a request's cold caches)
        self._hasher = hmac.new(key_hash_key, digestmod=hashlib.sha256)
        self._pattern = re.compile(
            rf"^{re.escape(token)}_(sec|pub)_(live|test)_(sk|pk)_[0-9A-Za-z]{{{_RANDOM_CHARS}}}$"
        )

    def generate(self, key_type: KeyType, environment: Environment) -> NewApiKey:
        """A new random key string such as ``svc_sec_live_sk_<43 base62 chars>``."""
        kind, short = _TYPE_PARTS[key_type]
        random_part = "".join(secrets.choice(_BASE62) for _ in range(_RANDOM_CHARS))
        key = f"{self._token}_{kind}_{environment.value}_{short}_{random_part}"
        head = f"{self._token}_{kind}_{environment.value}_{short}_"
        return NewApiKey(key=key, key_hash=self.hash(key), prefix=head + random_part[:_PREFIX_RANDOM_CHARS])

    def looks_like_key(self, value: str) -> bool:
        """True when the string has the exact shape of one of our API keys."""
        match = self._pattern.match(value)
        return match is not None and (match.group(1), match.group(3)) in (("sec", "sk"), ("pub", "pk"))

    def hash(self, key: str) -> bytes:
        """The keyed hash under which a key is stored and looked up."""
        hasher = self._hasher.copy()
        hasher.update(key.encode())
        return hasher.digest()


class _SessionClaims(msgspec.Struct, forbid_unknown_fields=True):
    sub: str
    iat: int
    exp: int
    sid: str


@dataclass(frozen=True, slots=True)
class Session:
    """A verified session: whose it is and until when it is valid."""

    account_id: str
    expires_at: datetime
    session_id: str


class InvalidSession(Exception):
    """The token is malformed, tampered with or expired; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionCodec:
    """Issues and verifies HMAC-signed, expiring session tokens."""

    def __init__(self, token: str, session_key: bytes) -> None:
        self._prefix = f"{token}_sess_"
        self._key = session_key

    def looks_like_session(self, value: str) -> bool:
        """True when the string claims to be a session token (not an API key)."""
        return value.startswith(self._prefix)

    def issue(self, account_id: str, now: datetime, ttl_seconds: int) -> tuple[str, datetime]:
        """A new token for the account and its expiry time."""
        iat = int(now.timestamp())
        claims = _SessionClaims(sub=account_id, iat=iat, exp=iat + ttl_seconds, sid=secrets.token_hex(8))
        body = _b64(msgspec.json.encode(claims))
        sig = _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())
        return f"{self._prefix}{body}.{sig}", datetime.fromtimestamp(claims.exp, UTC)

    def verify(self, token: str, now: datetime) -> Session:
        """The session a token stands for; raises ``InvalidSession`` otherwise."""
        if not token.startswith(self._prefix) or token.count(".") != 1:
            raise InvalidSession("malformed")
        body, sig = token[len(self._prefix) :].split(".")
        expected = _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())
        if not hmac.compare_digest(sig.encode(), expected.encode()):
            raise InvalidSession("bad signature")
        try:
            claims = msgspec.json.decode(_unb64(body), type=_SessionClaims)
        except (ValueError, msgspec.DecodeError):
            raise InvalidSession("malformed") from None
        if now.timestamp() >= claims.exp:
            raise InvalidSession("expired")
        return Session(claims.sub, datetime.fromtimestamp(claims.exp, UTC), claims.sid)
