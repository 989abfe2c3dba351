"""Password hashing with argon2id, and a login check that takes the same time
whether or not the email exists (so it cannot be used to find accounts)."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from services.errors import WeakPassword

MIN_LENGTH = 12
MAX_LENGTH = 1024  # bounds the hashing work an attacker can ask for


class Passwords:
    """argon2id hashing (RFC 9106 defaults of argon2-cffi) with a dummy hash for
    unknown accounts."""

    def __init__(self, hasher: PasswordHasher | None = None) -> None:
        self._hasher = hasher or PasswordHasher()
        self._dummy_hash = self._hasher.hash("qday-dummy-password-for-timing")

    @staticmethod
    def check_policy(password: str) -> None:
        """Raise ``WeakPassword`` unless 12 to 1024 characters long."""
        if len(password) < MIN_LENGTH:
            raise WeakPassword(f"password must be at least {MIN_LENGTH} characters", field="password")
        if len(password) > MAX_LENGTH:
            raise WeakPassword(f"password must be at most {MAX_LENGTH} characters", field="password")

    def hash(self, password: str) -> str:
        """An argon2id hash string for storage."""
        return self._hasher.hash(password)

    def verify(self, stored_hash: str | None, password: str) -> bool:
        """True when the password matches; an absent account still costs one full
        verification against a dummy hash, then answers False."""
        try:
            ok = self._hasher.verify(stored_hash or self._dummy_hash, password)
        except (VerificationError, InvalidHashError):
            return False
        return ok and stored_hash is not None
