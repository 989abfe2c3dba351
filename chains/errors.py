"""Errors raised by the chain layer, each carrying the scan endpoint's error code.

The API layer turns a ``ChainError`` into the spec's error envelope
(``error.code`` = ``code``, ``error.message`` = ``str(exc)``, ``error.details`` = ``details``)
without knowing which chain or codec raised it.
"""

from __future__ import annotations

from typing import ClassVar


class ChainError(Exception):
    """Base of every error the chain layer reports to a caller."""

    code: ClassVar[str]

    def __init__(self, message: str, **details: object) -> None:
        """Keep a human-readable reason and machine-readable details for the error envelope."""
        super().__init__(message)
        self.message = message
        self.details: dict[str, object] = details


class InvalidAddress(ChainError):
    """The address string is not a valid address for the requested (or any) chain."""

    code = "SCAN_001"


class UnsupportedChain(ChainError):
    """The chain identifier is not one of the 19 supported chains."""

    code = "SCAN_002"


class AddressNotFound(ChainError):
    """The address is valid but the chain has never seen it (no on-chain activity)."""

    code = "SCAN_003"


class ChainUnavailable(ChainError):
    """The chain's data source could not be reached or gave no usable answer."""

    code = "SCAN_004"


class MalformedChainData(ChainUnavailable):
    """Raw chain data (a transaction, block or script) could not be decoded.

    It is a ``ChainUnavailable`` because, to a scan caller, undecodable data from a node
    is the same as no data: the scan cannot go on and may succeed later.
    """
