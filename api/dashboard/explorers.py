"""Links to a public block explorer for a transaction or an address, per chain and
environment (live: the main network; test: the test network the chain endpoints default to,
``chains.endpoints``). The pages only link to them (``<a href rel="noopener noreferrer">``),
never load them: the Content-Security-Policy allows nothing from another origin.

A link is built only from what is safe to put in a URL path: a transaction id of letters and
digits (hex, base58), an address the chain's codec accepts; anything else gets no link."""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

from chains.codecs.detect import parse_address
from chains.environment import Environment
from chains.errors import ChainError
from chains.registry import Chain


@dataclass(frozen=True, slots=True)
class Explorer:
    """One explorer: its name and the URL templates of a transaction (``{txid}``) and of an
    address (``{address}``)."""

    name: str
    tx: str
    address: str


def _scan(host: str) -> Explorer:
    """An Etherscan-style explorer (``/tx/<id>``, ``/address/<address>``)."""
    return Explorer(host, f"https://{host}/tx/{{txid}}", f"https://{host}/address/{{address}}")


def _with_query(explorer: Explorer, query: str) -> Explorer:
    return Explorer(f"{explorer.name} ({query})", explorer.tx + "?" + query, explorer.address + "?" + query)


_SOLANA = _scan("explorer.solana.com")

#: (live, test) explorer of each chain; None: no public explorer of that network.
EXPLORERS: MappingProxyType[Chain, tuple[Explorer | None, Explorer | None]] = MappingProxyType(
    {
        Chain.ETHEREUM: (_scan("etherscan.io"), _scan("sepolia.etherscan.io")),
        Chain.BITCOIN: (_scan("mempool.space"), _scan("mempool.space/testnet4")),
        Chain.SOLANA: (_SOLANA, _with_query(_SOLANA, "cluster=devnet")),
        Chain.BASE: (_scan("basescan.org"), _scan("sepolia.basescan.org")),
        Chain.ARBITRUM: (_scan("arbiscan.io"), _scan("sepolia.arbiscan.io")),
        Chain.OPTIMISM: (_scan("optimistic.etherscan.io"), _scan("sepolia-optimism.etherscan.io")),
        Chain.POLYGON: (_scan("polygonscan.com"), _scan("amoy.polygonscan.com")),
        Chain.ZKSYNC: (_scan("explorer.zksync.io"), _scan("sepolia.explorer.zksync.io")),
        Chain.LINEA: (_scan("lineascan.build"), _scan("sepolia.lineascan.build")),
        Chain.SCROLL: (_scan("scrollscan.com"), _scan("sepolia.scrollscan.com")),
        Chain.MANTLE: (_scan("mantlescan.xyz"), _scan("sepolia.mantlescan.xyz")),
        Chain.BLAST: (_scan("blastscan.io"), _scan("sepolia.blastscan.io")),
        Chain.SONIC: (_scan("sonicscan.org"), _scan("testnet.sonicscan.org")),
        Chain.GNOSIS: (_scan("gnosisscan.io"), _scan("gnosis-chiado.blockscout.com")),
        Chain.CELO: (_scan("celoscan.io"), _scan("celo-sepolia.blockscout.com")),
        Chain.BSC: (_scan("bscscan.com"), _scan("testnet.bscscan.com")),
        Chain.AVALANCHE: (_scan("snowtrace.io"), _scan("testnet.snowtrace.io")),
        Chain.COSMOS: (_scan("www.mintscan.io/cosmos"), None),
        Chain.TRON: (
            Explorer(
                "tronscan.org", "https://tronscan.org/#/transaction/{txid}", "https://tronscan.org/#/address/{address}"
            ),
            Explorer(
                "nile.tronscan.org",
                "https://nile.tronscan.org/#/transaction/{txid}",
                "https://nile.tronscan.org/#/address/{address}",
            ),
        ),
    }
)

_TXID = re.compile(r"[0-9A-Za-z]{16,128}")


def explorer(chain: str, environment: Environment) -> Explorer | None:
    """The explorer of ``chain``'s network in ``environment`` (None: unknown chain, or none)."""
    try:
        pair = EXPLORERS[Chain(chain)]
    except ValueError:
        return None
    return pair[0] if environment is Environment.LIVE else pair[1]


def tx_url(chain: str, environment: Environment, txid: str | None) -> str | None:
    """The explorer's page of a transaction (None: no explorer, or not a transaction id)."""
    found = explorer(chain, environment)
    if found is None or txid is None or not _TXID.fullmatch(txid):
        return None
    return found.tx.format(txid=quote(txid, safe=""))


def address_url(chain: str, environment: Environment, address: str) -> str | None:
    """The explorer's page of an address the chain's codec accepts in ``environment`` (None
    otherwise, e.g. an output script shown in hex)."""
    found = explorer(chain, environment)
    if found is None:
        return None
    try:
        parse_address(address, Chain(chain), environment.network)
    except ChainError:
        return None
    return found.address.format(address=quote(address, safe=""))


def evidence_rows(evidence: list[dict[str, Any]], environment: Environment) -> list[dict[str, Any]]:
    """Exposure evidence (the API's ``{chain, address, kind, txid, blockHeight}`` objects) as
    the pages' ``_evidence.html`` shows it: with explorer links for its transaction and address."""
    return [
        {
            "chain": e.get("chain"),
            "address": e.get("address"),
            "kind": e.get("kind"),
            "txid": e.get("txid"),
            "block": e.get("blockHeight"),
            "tx_href": tx_url(str(e.get("chain")), environment, e.get("txid")),
            "address_href": address_url(str(e.get("chain")), environment, str(e.get("address"))),
        }
        for e in evidence
    ]
