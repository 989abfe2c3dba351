"""Errors raised by the operational store, each carrying a documented API code."""

from __future__ import annotations

from typing import Any, ClassVar


class StorageError(Exception):
    """Base of store failures; ``code`` is the error code the API reports."""

    code: ClassVar[str] = "SRV_002"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


class DuplicateEmail(StorageError):
    """An account with this email already exists."""

    code = "ACC_001"


class AccountNotFound(StorageError):
    """No account has this email or id."""

    code = "ACC_004"


class StoreUnavailable(StorageError):
    """The store cannot take writes now (disk full, read-only, locked too long)."""

    code = "SRV_002"
