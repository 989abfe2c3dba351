"""Bitcoin through an Esplora REST API (Blockstream, mempool.space, a self-hosted electrs).

Per address (or raw script, by ``/scripthash/:sha256``): ``GET /address/:a`` for the
confirmed ``chain_stats`` (funded/spent output counts and sums, ``tx_count``), then the
history newest first: ``/txs`` (the first page of confirmed transactions, 25 on public
servers), and ``/txs/chain/:last_txid`` for each further page, up to ``max_pages`` pages.
Every input that spends the address's script is passed to ``analyze_input`` with the
script as its prevout, which gives what that spend revealed. The draft BIP's rules then give
the level (``exposure_with_history``):

- the complete history (every confirmed transaction seen, matching ``tx_count`` and
  ``spent_txo_count``): ``SpendHistory.complete``. A spend that revealed key material
  makes the address ``EXPOSED_AT_REST``; otherwise it keeps its type's level.
- history cut short by the page cap or a failing page: ``SpendHistory.counted`` with
  ``spent_txo_count``. A count above zero is an ``EXPOSED_AT_REST`` floor.
- history that contradicts the stats (pages end before ``tx_count`` transactions, or
  more spends than ``spent_txo_count``): the stats are not trusted. Any spend seen still
  floors at ``EXPOSED_AT_REST``; with none the level is ``UNDETERMINED``, never "safe".

P2PK and bare-multisig outputs have no address. Address indexes do not list them (the
draft's "indexer blind spots"), so ``observe_scripts`` queries them by script hash.
The public key reported is the one the script shows (P2PK, P2TR) or the first one a
spend revealed. Only confirmed data counts; the balance is the confirmed one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx

from chains.bitcoin.exposure import STRUCTURALLY_EXPOSED, SpendHistory, exposure_with_history
from chains.bitcoin.script import OutputType, classify_script
from chains.bitcoin.spend import InputDisclosure, analyze_input
from chains.bitcoin.tx import Transaction, TxIn, TxOut, parse_transaction, serialize_transaction
from chains.bitcoin.utxo import Utxo
from chains.clients.base import Snapshot, register, typed_addresses
from chains.clients.transport import Timing, Transport
from chains.codecs.address import Address
from chains.codecs.bitcoin import BitcoinAddress
from chains.endpoints import EndpointConfig, EnvironmentEndpoints
from chains.errors import ChainUnavailable, InvalidAddress, MalformedChainData
from chains.observation import AccountType, EvidenceKind, ExposureEvidence, Observation
from chains.registry import Chain, Family, Network
from pqc.hashes import sha256

PAGE_SIZE = 25
"""Confirmed transactions per history page of Blockstream's and mempool.space's Esplora
(API.md); electrs makes it configurable (``--rest-default-chain-txs-per-page``)."""


@dataclass(frozen=True, slots=True)
class ChainStats:
    """An Esplora ``chain_stats`` object: confirmed counts and sums of one script."""

    funded_txo_count: int
    funded_txo_sum: int
    spent_txo_count: int
    spent_txo_sum: int
    tx_count: int


@dataclass(frozen=True, slots=True)
class History:
    """The confirmed transactions fetched, newest first, and how the paging ended.

    ``ended`` is True when the server gave a short page (nothing older exists);
    False when the page cap or a failing page stopped the fetch.
    """

    txs: tuple[Mapping[str, Any], ...]
    ended: bool


def _int(data: Mapping[str, Any], key: str, what: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedChainData(f"{what}: {key} must be a non-negative integer, got {value!r:.60}")
    return value


def _hex(value: Any, what: str) -> bytes:
    try:
        return bytes.fromhex(value)
    except (TypeError, ValueError):
        raise MalformedChainData(f"{what}: expected hex, got {value!r:.60}") from None


def _vin_txin(vin: Mapping[str, Any], what: str) -> TxIn:
    try:
        return TxIn(
            prev_txid=str(vin["txid"]),
            vout=int(vin["vout"]),
            script_sig=_hex(vin.get("scriptsig", ""), what),
            sequence=int(vin["sequence"]),
            witness=tuple(_hex(item, what) for item in vin.get("witness") or ()),
        )
    except (KeyError, TypeError, ValueError):
        raise MalformedChainData(f"{what}: malformed input {vin!r:.120}") from None


def spend_history(stats: ChainStats, history: History, spends: Sequence[InputDisclosure]) -> SpendHistory:
    """What the stats and the fetched pages say about spends of the script (rules in the module docstring)."""
    seen = len(history.txs)
    contradicts = (history.ended and seen < stats.tx_count) or len(spends) > stats.spent_txo_count
    if contradicts:
        count = max(stats.spent_txo_count, len(spends))
        return SpendHistory.counted(count) if count else SpendHistory()
    if history.ended and seen == stats.tx_count:
        return SpendHistory.complete(spends)
    return SpendHistory.counted(stats.spent_txo_count)


def _tx_evidence(display: str, kind: EvidenceKind, tx: Mapping[str, Any]) -> ExposureEvidence:
    status = tx.get("status")
    height = status.get("block_height") if isinstance(status, Mapping) else None
    txid = tx.get("txid")
    return ExposureEvidence(
        Chain.BITCOIN.value,
        display,
        kind,
        txid if isinstance(txid, str) else None,
        height if isinstance(height, int) and not isinstance(height, bool) else None,
    )


def _evidence(
    display: str,
    output_type: OutputType,
    txs: Sequence[Mapping[str, Any]],
    script: bytes,
    spends: Sequence[tuple[int, InputDisclosure]],
    spent_count: int,
) -> tuple[ExposureEvidence, ...]:
    """What revealed the key of ``script``: the oldest funding transaction seen for a type
    that shows its key in the output (``output``), each transaction whose input published
    key material (``spend``), and, when spends were counted but none was seen (history cut
    short), one ``spend`` without a transaction id."""
    found: list[ExposureEvidence] = []
    if output_type in STRUCTURALLY_EXPOSED:
        script_hex = script.hex()
        funding = [
            tx
            for tx in txs
            if any(isinstance(o, Mapping) and o.get("scriptpubkey") == script_hex for o in tx.get("vout") or ())
        ]
        if funding:
            found.append(
                _tx_evidence(display, EvidenceKind.OUTPUT, funding[-1])
            )  # newest first: the last is the oldest
    disclosing = sorted({index for index, d in spends if d.discloses_key_material})
    found += [_tx_evidence(display, EvidenceKind.SPEND, txs[index]) for index in disclosing]
    if spent_count and not spends:
        found.append(ExposureEvidence(Chain.BITCOIN.value, display, EvidenceKind.SPEND))
    return tuple(found)


class EsploraClient:
    """Observes Bitcoin addresses and scripts through one Esplora endpoint."""

    source = "esplora"

    def __init__(
        self,
        endpoint: EndpointConfig,
        http: httpx.AsyncClient | None = None,
        *,
        network: Network = Network.MAINNET,
        max_pages: int = 40,
        page_size: int = PAGE_SIZE,
        concurrency: int = 8,
        timing: Timing | None = None,
    ) -> None:
        """``network`` is the endpoint's (mainnet, or a test network); ``max_pages`` caps
        the history pages per address, of ``page_size`` confirmed transactions each (the
        server's setting); ``concurrency`` caps the requests in flight."""
        if max_pages < 1 or page_size < 1 or concurrency < 1:
            raise ValueError("max_pages, page_size and concurrency must be at least 1")
        self.chain = Chain.BITCOIN
        self.network = network
        self.transport = Transport(endpoint, http, "bitcoin Esplora", timing)
        self._max_pages = max_pages
        self._page_size = page_size
        self._limit = asyncio.Semaphore(concurrency)

    async def observe(self, addresses: Sequence[Address]) -> list[Observation]:
        """One observation per address: confirmed balance, counts, exposure, revealed key."""
        typed = typed_addresses(addresses, BitcoinAddress, self.chain)  # type: ignore[type-abstract]  # abstract is fine for isinstance (mypy#4717)
        wrong = [a for a in typed if a.network is not self.network]
        if wrong:
            raise InvalidAddress(
                f"{wrong[0]} is a {wrong[0].network} address; this Esplora endpoint serves {self.network}",
                chain=str(self.chain),
                address=str(wrong[0]),
            )
        targets = [(f"/address/{a}", str(a), a.script_pubkey) for a in typed]
        return await self._observe_all(targets)

    async def observe_scripts(self, scripts: Sequence[bytes]) -> list[Observation]:
        """Observations of raw output scripts (P2PK, bare multisig ...) by script hash.

        The observation's ``address`` is the script in hex, since these have no address.
        """
        targets = [(f"/scripthash/{sha256(s).hex()}", s.hex(), s) for s in scripts]
        return await self._observe_all(targets)

    async def _observe_all(self, targets: Sequence[tuple[str, str, bytes]]) -> list[Observation]:
        tip = await self.tip_height()
        snapshot = Snapshot(self.chain, self.source, tip, self.transport.timing.now())
        return list(await asyncio.gather(*(self._observe(snapshot, *t) for t in targets)))

    async def tip_height(self) -> int:
        """The height of the endpoint's best block (``GET /blocks/tip/height``)."""
        reply = await self.transport.get("/blocks/tip/height")
        if isinstance(reply.data, bool) or not isinstance(reply.data, int):
            raise MalformedChainData(f"{self.transport.label}: tip height is not an integer: {reply.data!r:.60}")
        return reply.data

    async def _get(self, path: str) -> Any:
        async with self._limit:
            return (await self.transport.get(path)).data

    async def stats(self, resource: str) -> ChainStats:
        """The confirmed ``chain_stats`` of ``/address/:a`` or ``/scripthash/:h``."""
        data = await self._get(resource)
        what = f"{self.transport.label} {resource}"
        if not isinstance(data, Mapping) or not isinstance(data.get("chain_stats"), Mapping):
            raise MalformedChainData(f"{what}: no chain_stats object")
        stats = data["chain_stats"]
        return ChainStats(*(_int(stats, key, what) for key in ChainStats.__dataclass_fields__))

    async def history(self, resource: str, tx_count: int) -> History:
        """The confirmed transactions of ``resource``, newest first, at most ``max_pages`` pages.

        A page that fails after its retries stops the paging (``ended`` False) rather than
        failing the observation: the stats still bound the exposure.
        """
        txs: list[Mapping[str, Any]] = []
        path = f"{resource}/txs"
        for page in range(self._max_pages):
            if page and len(txs) >= tx_count:
                return History(tuple(txs), ended=True)
            try:
                data = await self._get(path)
            except ChainUnavailable:
                if page == 0:
                    raise
                return History(tuple(txs), ended=False)
            if not isinstance(data, list) or not all(isinstance(tx, Mapping) for tx in data):
                raise MalformedChainData(f"{self.transport.label} {path}: expected a list of transactions")
            confirmed = [tx for tx in data if isinstance(tx.get("status"), Mapping) and tx["status"].get("confirmed")]
            txs.extend(confirmed)
            if len(confirmed) < self._page_size:
                return History(tuple(txs), ended=True)
            path = f"{resource}/txs/chain/{confirmed[-1].get('txid')}"
        return History(tuple(txs), ended=False)

    async def coins(self, address: BitcoinAddress) -> list[Utxo]:
        """The confirmed unspent outputs of ``address`` (``GET /address/:a/utxo``), oldest first.

        Unconfirmed outputs are left out, as the balance leaves them out."""
        what = f"{self.transport.label} /address/{address}/utxo"
        data = await self._get(f"/address/{address}/utxo")
        if not isinstance(data, list) or not all(isinstance(item, Mapping) for item in data):
            raise MalformedChainData(f"{what}: expected a list of outputs")
        found = []
        for item in data:
            status = item.get("status")
            if not isinstance(status, Mapping) or status.get("confirmed") is not True:
                continue
            txid = item.get("txid")
            if not isinstance(txid, str) or len(txid) != 64:
                raise MalformedChainData(f"{what}: txid must be 64 hex digits, got {txid!r:.80}")
            _hex(txid, what)
            coin = Utxo(txid, _int(item, "vout", what), _int(item, "value", what), _int(status, "block_height", what))
            found.append(coin)
        return sorted(found, key=lambda c: (c.height, c.txid, c.vout))

    async def transaction(self, txid: str) -> bytes:
        """The raw transaction ``txid`` (witness serialisation when it has witnesses), rebuilt
        from ``GET /tx/:txid`` and checked: its bytes must hash to ``txid``, so a server cannot
        hand a signer a previous transaction with other amounts (what a PSBT's
        ``non_witness_utxo`` is there to prevent)."""
        what = f"{self.transport.label} /tx/{txid}"
        data = await self._get(f"/tx/{txid}")
        if not isinstance(data, Mapping):
            raise MalformedChainData(f"{what}: expected a transaction object")
        try:
            inputs = tuple(_vin_txin(vin, what) for vin in data["vin"])
            outputs = tuple(TxOut(_int(out, "value", what), _hex(out["scriptpubkey"], what)) for out in data["vout"])
            draft = Transaction(int(data["version"]), inputs, outputs, int(data["locktime"]), "", "")
            raw = serialize_transaction(draft)
        except (KeyError, TypeError, ValueError, OverflowError):
            raise MalformedChainData(f"{what}: malformed transaction object") from None
        if parse_transaction(raw).txid != txid:
            raise MalformedChainData(f"{what}: the transaction served does not hash to its id")
        return raw

    async def fee_rate(self, target_blocks: int) -> float:
        """The fee rate in sat/vB estimated to confirm within ``target_blocks`` blocks
        (``GET /fee-estimates``: the estimate of the largest target not above it)."""
        data = await self._get("/fee-estimates")
        what = f"{self.transport.label} /fee-estimates"
        if not isinstance(data, Mapping):
            raise MalformedChainData(f"{what}: expected an object of target -> sat/vB")
        estimates: dict[int, float] = {}
        for target, rate in data.items():
            if not str(target).isdigit() or isinstance(rate, bool) or not isinstance(rate, int | float | Decimal):
                raise MalformedChainData(f"{what}: malformed estimate {target!r:.20}: {rate!r:.20}")
            estimates[int(target)] = float(rate)
        usable = [t for t in estimates if t <= target_blocks and estimates[t] > 0]
        if not usable:
            raise ChainUnavailable(f"{what}: no estimate for {target_blocks} blocks or fewer", endpoint=what)
        return estimates[max(usable)]

    def _spends(self, txs: Sequence[Mapping[str, Any]], script: bytes, what: str) -> list[tuple[int, InputDisclosure]]:
        """(index of the transaction, disclosure) for every input spending ``script``."""
        script_hex = script.hex()
        found = []
        for index, tx in enumerate(txs):
            for vin in tx.get("vin") or ():
                prevout = vin.get("prevout") if isinstance(vin, Mapping) else None
                if isinstance(prevout, Mapping) and prevout.get("scriptpubkey") == script_hex:
                    found.append((index, analyze_input(_vin_txin(vin, what), prevout_script=script)))
        return found

    async def _observe(self, snapshot: Snapshot, resource: str, display: str, script: bytes) -> Observation:
        what = f"{self.transport.label} {resource}"
        stats = await self.stats(resource)
        history = await self.history(resource, stats.tx_count) if stats.tx_count else History((), ended=True)
        spends = self._spends(history.txs, script, what)
        disclosures = [d for _, d in spends]
        info = classify_script(script)
        exposure = exposure_with_history(info.output_type, spend_history(stats, history, disclosures))
        revealed = [key for d in disclosures for key in d.revealed_keys]
        times = [tx["status"].get("block_time") for tx in history.txs]
        times = [t for t in times if isinstance(t, int)]
        complete = history.ended and len(history.txs) == stats.tx_count
        spending_txs = len({index for index, _ in spends})
        evidence = _evidence(display, info.output_type, history.txs, script, spends, stats.spent_txo_count)
        return snapshot.observation(
            display,
            address_type=info.output_type.value,
            account_type=AccountType.UTXO_SCRIPT,
            balance=stats.funded_txo_sum - stats.spent_txo_sum,
            tx_count=stats.tx_count,
            outbound_tx_count=spending_txs if complete else max(spending_txs, min(stats.spent_txo_count, 1)),
            exposure=exposure,
            public_key=next(iter(info.keys or revealed), None),
            address_reuse_count=max(stats.funded_txo_count - 1, 0),
            first_activity=datetime.fromtimestamp(min(times), UTC) if complete and times else None,
            last_activity=datetime.fromtimestamp(max(times), UTC) if times else None,
            evidence=evidence,
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this client created it."""
        await self.transport.aclose()


@register(Family.BITCOIN)
def build(
    chain: Chain, endpoints: EnvironmentEndpoints, http: httpx.AsyncClient | None, timing: Timing | None
) -> EsploraClient:
    """The Esplora client of the environment (mainnet for live, a test network for test)."""
    return EsploraClient(endpoints.bitcoin_esplora, http, network=endpoints.environment.network, timing=timing)
