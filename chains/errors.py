"""Errors raised by the chain layer, domain errors (``core.errors.DomainError``).

The API maps each class to a scan error code (``api/errors.py``: SCAN_001 invalid address,
SCAN_002 unsupported chain, SCAN_003 no activity, SCAN_004 chain data unavailable) and
puts ``str(exc)`` and ``details`` in the envelope without knowing which chain or codec
raised it.
"""

from __future__ import annotations

from core.errors import DomainError


class ChainError(DomainError):
    """Base of every error the chain layer reports to a caller."""


class InvalidAddress(ChainError):
    """The address string is not a valid address for the requested (or any) chain."""


class UnsupportedChain(ChainError):
    """The chain identifier is not one of the 19 supported chains."""


class AddressNotFound(ChainError):
    """The address is valid but the chain has never seen it (no on-chain activity)."""


class ChainUnavailable(ChainError):
    """The chain's data source could not be reached or gave no usable answer."""


class MalformedChainData(ChainUnavailable):
    """Raw chain data (a transaction, block or script) could not be decoded.

    It is a ``ChainUnavailable`` because, to a scan caller, undecodable data from a node
    is the same as no data: the scan cannot go on and may succeed later.
    """
