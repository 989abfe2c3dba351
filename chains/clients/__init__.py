"""Async chain clients: every chain's data source behind one ``ChainClient`` interface.

Importing the package registers each family's builder, so ``build_clients`` can create a
client for every chain. Modules: ``base`` (interface, registry), ``transport`` and
``breaker`` (resilience), ``jsonrpc``, ``evm``, ``esplora``, ``bitcoin_core``, ``solana``,
``cosmos``, ``tron``, ``prices``; see docs/chain-clients.md.
"""

from chains.clients import cosmos, esplora, evm, solana, tron  # noqa: F401  # imported to register their builders
from chains.clients.base import ChainClient, build_clients
from chains.clients.transport import Timing

__all__ = ["ChainClient", "Timing", "build_clients"]
