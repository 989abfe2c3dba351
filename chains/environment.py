"""The data environment every resource and API key belongs to: ``live`` or ``test``."""

from __future__ import annotations

import enum

from chains.registry import Network


class Environment(enum.StrEnum):
    """A tenant's data environment. Test and live resources never see each other, and
    ``test`` keys scan public test networks. The one environment type of the service."""

    LIVE = "live"
    TEST = "test"

    @property
    def network(self) -> Network:
        """The address network of this environment (Bitcoin test addresses differ)."""
        return Network.MAINNET if self is Environment.LIVE else Network.TESTNET

    @property
    def env_prefix(self) -> str:
        """Prefix of this environment's variables (``QDAY_`` or ``QDAY_TEST_``)."""
        return "QDAY_" if self is Environment.LIVE else "QDAY_TEST_"
