"""Errors raised by the operational store, domain errors (``core.errors.DomainError``)."""

from __future__ import annotations

from core.errors import DomainError


class StorageError(DomainError):
    """Base of store failures."""


class DuplicateEmail(StorageError):
    """An account with this email already exists."""


class AccountNotFound(StorageError):
    """No account has this email or id."""


class ConstraintViolation(StorageError):
    """A write broke a uniqueness or other constraint (either engine)."""


class StoreUnavailable(StorageError):
    """The store cannot take writes now (disk full, read-only, locked too long)."""


class IndexUnreadable(StorageError):
    """The Bitcoin exposure index's files could not be read (a damaged or vanished file): a
    verdict that needed it says it could not see the index, and the scan still answers."""
