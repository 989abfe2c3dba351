"""Errors the application services raise, one class per thing a caller can be told.

They say what went wrong, never how HTTP spells it: the API maps every class to the
spec's code and status in one table (``api/errors.py``); the CLI prints the message.
Errors of the lower layers (``pqc.errors``, ``chains.errors``, ``storage.errors``)
pass through the services unchanged.
"""

from __future__ import annotations

from core.errors import DomainError


class InvalidRequest(DomainError):
    """A parameter is malformed or out of range; ``details['field']`` names it."""


class NotFound(DomainError):
    """No such resource in the caller's account and environment."""


class Unauthenticated(DomainError):
    """No credential, or a malformed, unknown or expired one."""


class CredentialRevoked(DomainError):
    """The API key was deleted, or its rotation grace period has ended."""


class CredentialNotAllowed(DomainError):
    """The credential is valid but may not do this (publishable key, session token,
    other environment)."""


class InvalidLogin(DomainError):
    """Wrong email or password (the same answer for both)."""


class WeakPassword(DomainError):
    """The password does not meet the policy (12 to 1024 characters)."""


class AlreadyRotated(DomainError):
    """The API key was already rotated; only its replacement can be rotated."""


class ChallengeInvalid(DomainError):
    """A key-registration challenge was not issued for this key, or has expired."""


class KeyNotRegistered(DomainError):
    """The post-quantum public key is not registered to the account and environment."""


class StatementInvalid(DomainError):
    """Strict mode: the message is not a statement issued to this account for these keys."""


class StatementUsed(DomainError):
    """Strict mode: the statement was already used or has expired."""


class InvalidCombination(DomainError):
    """The algorithm cannot be used with this chain."""


class KeyGenerationFailed(DomainError):
    """Key generation failed inside the service; nothing was stored."""


class PlanCapReached(DomainError):
    """The account's plan allows no more of something (watched addresses, API keys);
    ``details``: ``cap`` (what), ``limit`` (how many the plan allows), ``plan``."""
