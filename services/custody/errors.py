"""What managed custody refuses or fails with (domain errors; the API maps them to CUS_*)."""

from __future__ import annotations

from core.errors import DomainError


class CustodyError(DomainError):
    """Base of custody failures: the backend cannot do what was asked."""


class CustodyUnavailable(CustodyError):
    """The custody backend cannot be reached or is not configured."""


class CustodyIntegrityError(CustodyError):
    """Stored key material failed its integrity check: tampered with, moved to
    another row, or wrapped under a key this token does not hold."""


class PlanRequired(DomainError):
    """Managed custody needs the Pro or Enterprise plan."""


class KeyPendingDeletion(DomainError):
    """The managed key is pending deletion: signing is refused until it is cancelled."""


class AlgorithmNotManaged(DomainError):
    """The algorithm cannot be held in managed custody (ML-DSA only)."""


class KeyDestroyed(DomainError):
    """The managed key was destroyed; its private key no longer exists."""


class InvalidKeyState(DomainError):
    """The managed key is not in a state that allows this change."""
