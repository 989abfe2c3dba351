"""Wallet scans from a descriptor or an extended public key (``POST /v1/scan/descriptor``):
every address the wallet derived, its coins, and which of them a quantum attacker could
take. Free of HTTP.

The walk derives receive and change addresses until ``gap_limit`` consecutive addresses
have no confirmed history after the last used one, in rounds of one batched lookup whose
windows grow with what was found (``services.gap_walk``: O(log n) rounds for n used
addresses). A scan derives at most ``MAX_DERIVED`` addresses (a watched wallet: what its
plan's watch cap leaves); a wallet that needs more is answered with what was seen and a
limit saying where it stopped.

Each used address gets the same verdict a wallet scan gives it: its own history, its key
family's addresses (the other encodings of a key hash, the Cosmos account), and the
Bitcoin exposure index for every key its script holds (multisig cosigners and taproot
internal keys included). The index is also asked about the keys of the unused addresses
derived: an address not used yet whose key was already revealed is listed
(``exposedUnused``), since paying it would put coins at rest behind an exposed key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from chains.bitcoin.descriptors import Descriptor
from chains.bitcoin.revelations import key_hashes
from chains.bitcoin.utxo import Utxo
from chains.bitcoin.wallet import DerivedAddress, Wallet, WalletBranch, derive, parse_wallet
from chains.codecs.address import Address
from chains.codecs.bitcoin import BitcoinAddress
from chains.environment import Environment
from chains.errors import UnsupportedChain
from chains.evidence import Coverage, with_family
from chains.keys import siblings
from chains.observation import Exposure, ExposureEvidence, Observation
from chains.registry import CHAINS, Chain, parse_chain
from core.clock import Clock, iso
from scoring import load_readiness, score_observations
from scoring.model import RISK_BANDS, SCORING_VERSION
from scoring.readiness import ReadinessData
from scoring.result import WalletRisk, format_amount
from services.accounts import Principal, environment_of
from services.exposure_index import IndexAnswer, with_index
from services.gap_walk import Branches, Walk, gap_walk
from services.observer import ChainObserver, limits_of
from services.pricing import PriceLookup
from storage.models import ScanResult
from storage.repository import ScanStore
from storage.scan_records import scan_record

#: A Bitcoin wallet's walk: its derived addresses, and the observations of the used ones.
AddressWalk = Walk[DerivedAddress, Observation]

#: Most addresses one scan derives and looks up, over all its branches.
MAX_DERIVED = 10_000
#: The gap limit when none is given (BIP-44's) and the range accepted.
DEFAULT_GAP_LIMIT = 20
MAX_GAP_LIMIT = 1_000


@runtime_checkable
class CoinSource(Protocol):
    """A Bitcoin client that lists an address's unspent outputs (Esplora's ``/utxo``)."""

    async def coins(self, address: BitcoinAddress) -> list[Utxo]:
        """The confirmed unspent outputs of ``address``; ``ChainUnavailable`` on failure."""
        ...


@dataclass(slots=True)
class _Verdict:
    """One used address, scored, with its coins."""

    derived: DerivedAddress
    observation: Observation
    risk: WalletRisk
    coverage: Coverage
    coins: list[Utxo] = field(default_factory=list)


def lookup_hashes(derived: DerivedAddress) -> list[bytes]:
    """The HASH160s the exposure index is asked for the keys of ``derived``: the compressed
    encoding of each SEC key (the index lists both encodings under it), and both parities of
    each x-only key (a BIP-340 key signs for either point with its x)."""
    found: list[bytes] = []
    for key in derived.keys:
        if len(key.pubkey) == 32:
            for parity in (b"\x02", b"\x03"):
                hashes = key_hashes(parity + key.pubkey)
                if hashes is not None:
                    found.append(hashes[0])
        else:
            hashes = key_hashes(key.pubkey)
            if hashes is not None:
                found.append(hashes[0])
    return found


def exposure_rank(observation: Observation) -> int:
    """Which coins move first (lower first): 0 for a key on chain by the output type itself
    (P2PK, P2TR), 1 for a key revealed by a spend, a reuse, its family or the index (or a
    level that could not be determined: fail closed), 2 for a key not on chain."""
    if observation.exposure is Exposure.EXPOSED_AT_REST and observation.address_type in ("p2pk", "p2tr"):
        return 0
    if observation.exposure.key_on_chain:
        return 1
    return 2


def wallet_coverage(
    walk: AddressWalk, verdicts: Sequence[_Verdict], index: IndexAnswer | None, gap_limit: int, max_derived: int
) -> Coverage:
    """What a wallet's verdicts could see, together: the chains read and not read, each used
    address's limits, an address whose coins and balance disagree (the chain moved during the
    scan), a walk stopped before its gap, and the index's limit when nothing was used."""
    limits: dict[str, None] = {}
    unavailable: dict[str, None] = {}
    checked: dict[str, None] = {Chain.BITCOIN.value: None}
    for v in verdicts:
        coin_sum = sum(c.value for c in v.coins)
        if coin_sum != v.observation.balance:
            limits[
                f"coins: the unspent outputs of {v.derived.address} ({coin_sum} sat) differ from its balance "
                f"({v.observation.balance} sat): the chain moved during the scan; scan again"
            ] = None
        limits.update(dict.fromkeys(v.coverage.limits))
        unavailable.update(dict.fromkeys(v.coverage.unavailable))
        checked.update(dict.fromkeys(v.coverage.checked))
    if walk.truncated:
        why = "the most one scan derives" if max_derived >= MAX_DERIVED else "what the plan's watch cap leaves"
        limits[
            f"descriptor: the scan stopped after deriving {len(walk.derived)} addresses ({why}) before every "
            f"branch reached {gap_limit} unused addresses; later addresses were not looked at"
        ] = None
    if not verdicts and index is not None:
        limit = index.limit(None)
        if limit is not None:
            limits[limit] = None
    return Coverage(
        checked=tuple(checked),
        unavailable=tuple(unavailable),
        limits=tuple(limits),
        index_height=None if index is None else index.complete_to,
    )


class DescriptorScanService:
    """Descriptor and extended-key scans, over the scans' chain observer and price sources."""

    def __init__(
        self,
        store: ScanStore,
        observer: ChainObserver,
        prices: PriceLookup,
        clock: Clock,
        readiness: ReadinessData | None = None,
    ) -> None:
        self._store = store
        self._observer = observer
        self._prices = prices
        self._clock = clock
        self._readiness = readiness or load_readiness()

    def wallet(self, principal: Principal, text: str, chain: str) -> tuple[Environment, Wallet]:
        """The caller's environment and the wallet ``text`` names (``parse_wallet``) on
        ``chain``; ``UnsupportedChain`` (SCAN_002) for a chain descriptors do not cover."""
        env = environment_of(principal)
        if parse_chain(chain) is not Chain.BITCOIN:
            raise UnsupportedChain(f"descriptor scans cover bitcoin and the EVM chains, not {chain}", chain=chain)
        return env, parse_wallet(text, env.network)

    async def scan(self, principal: Principal, text: str, chain: str, gap_limit: int) -> dict[str, Any]:
        """The answer of ``POST /v1/scan/descriptor`` (fields in docs/api.md). Each used
        address's result is stored as its wallet scan. ``PrivateKeyRefused``,
        ``InvalidDescriptor``, ``UnsupportedChain``; ``ChainUnavailable`` when Bitcoin's source
        fails (a family chain failing only makes the verdict incomplete)."""
        env, wallet = self.wallet(principal, text, chain)
        answer, records = await self.assess(env, wallet, gap_limit, principal.account.id, "api")
        await self.save(records)
        return answer

    async def save(self, records: list[ScanResult]) -> None:
        """Store used addresses' records as their latest wallet scans (durable on return)."""
        await self._store.save_results(records)

    async def assess(
        self,
        env: Environment,
        wallet: Wallet,
        gap_limit: int,
        account_id: str,
        source: Literal["api", "pipeline"],
        max_derived: int = MAX_DERIVED,
    ) -> tuple[dict[str, Any], list[ScanResult]]:
        """Walk, judge and summarise ``wallet``: the answer, and each used address's wallet-scan
        record for ``account_id`` (made by ``source``), for the caller to store. At most
        ``max_derived`` addresses are derived (a watched wallet's share of its plan's cap)."""
        walk = await self.walk(env, wallet.branches(), gap_limit, min(max_derived, MAX_DERIVED))
        verdicts, exposed_unused, index = await self.verdicts(env, walk)
        now = self._clock.now()
        records = [scan_record(v.observation, v.risk, account_id, env, now, source, v.coverage) for v in verdicts]
        return self._answer(wallet, walk, verdicts, exposed_unused, index, gap_limit, max_derived), records

    async def walk(
        self, env: Environment, branches: Sequence[WalletBranch], gap_limit: int, max_derived: int = MAX_DERIVED
    ) -> AddressWalk:
        """Derive and observe a wallet's ``branches`` to their gap (``services.gap_walk``),
        at most ``max_derived`` addresses; one batched Bitcoin lookup per round."""

        async def lookup(batch: list[DerivedAddress]) -> list[Observation]:
            return await self._observer.observe(env, Chain.BITCOIN, [d.address for d in batch])

        how: Branches[WalletBranch, DerivedAddress, Observation] = Branches(
            ranged=lambda branch: branch.descriptor.ranged,
            derive=lambda branch, indexes: derive(branch, indexes, env.network),
            position=lambda d: (d.branch, d.index),
            lookup=lookup,
            used=lambda o: o.has_activity,
        )
        return await gap_walk(branches, how, gap_limit, max_derived)

    async def verdicts(
        self, env: Environment, walk: AddressWalk
    ) -> tuple[list[_Verdict], list[tuple[DerivedAddress, IndexAnswer]], IndexAnswer | None]:
        """Each used address scored with its family, the index and its coins; the unused
        addresses the index shows exposed; the index's state (None without an index)."""
        hashes = {id(d): lookup_hashes(d) for d in walk.derived}
        index: IndexAnswer | None = None
        found: Mapping[bytes, tuple[ExposureEvidence, ...]] = {}
        if self._observer.index is not None:
            index, found = await self._observer.index.revealed_by_hash(
                env, [h for d in walk.derived for h in hashes[id(d)]]
            )
        heights = [o.height for _, o in walk.used if o.height is not None]
        covers = index is not None and not index.unreadable and index.limit(max(heights, default=None)) is None
        family = await self._family(env, walk, covers)
        price = await self._prices.price(env, Chain.BITCOIN)
        judged = []
        for derived, own in walk.used:
            found_family, unavailable = family.get(str(derived.address), ([], ()))
            merged = with_family(own, found_family)
            answer = None if index is None else index.with_evidence(found, hashes[id(derived)])
            if answer is not None:
                merged = with_index(merged, answer)
            checked = {Chain.BITCOIN.value, *(o.chain for o in found_family)}
            coverage = Coverage(
                checked=tuple(c.value for c in CHAINS if c.value in checked),
                unavailable=tuple(unavailable),
                limits=limits_of(merged, answer, own.height),
                index_height=None if answer is None else answer.complete_to,
            )
            judged.append((derived, merged, coverage))
        prices = {} if price is None else {CHAINS[Chain.BITCOIN].symbol: price}
        risks = await asyncio.to_thread(score_observations, [m for _, m, _ in judged], prices, self._readiness)
        verdicts = [
            _Verdict(derived, merged, risk, coverage)
            for (derived, merged, coverage), risk in zip(judged, risks, strict=True)
        ]
        await self._coins(env, verdicts)
        used_ids = {id(d) for d, _ in walk.used}
        exposed_unused = []
        if index is not None:
            for derived in walk.derived:
                if id(derived) not in used_ids:
                    answer = index.with_evidence(found, hashes[id(derived)])
                    if answer.evidence:
                        exposed_unused.append((derived, answer))
        return verdicts, exposed_unused, index

    async def _family(
        self, env: Environment, walk: AddressWalk, index_covers_bitcoin: bool
    ) -> dict[str, tuple[list[Observation], tuple[str, ...]]]:
        """The key family of each used address (``chains.keys.siblings``), one fetch per chain
        for all of them. The Bitcoin siblings (the key hash's other address types) are part of
        the scan, as for a wallet scan: Bitcoin's source must answer; they are not fetched
        when the exposure index is complete up to the scanned height (``index_covers_bitcoin``):
        every Bitcoin revelation of the key is then in it, whatever the address type. Other
        chains (Cosmos) are bounded by the family wait. An address the walk observed is not
        fetched again. Per address: the siblings seen, and the family chains not read."""
        seen = {str(d.address): o for d, o in walk.used}
        derived_text = {str(d.address) for d in walk.derived}
        wanted = {str(derived.address): siblings(derived.address) for derived, _ in walk.used}
        by_chain: dict[Chain, dict[str, Address]] = {}
        for found in wanted.values():
            for sibling in found:
                text = str(sibling)
                if sibling.chain is Chain.BITCOIN and (index_covers_bitcoin or text in derived_text):
                    continue
                by_chain.setdefault(sibling.chain, {})[text] = sibling
        own = list(by_chain.pop(Chain.BITCOIN, {}).values())
        allowed = [chain for chain in by_chain if self._observer.allowed(chain)]
        pending = [
            asyncio.ensure_future(self._observer.bounded(self._observer.observe(env, c, list(by_chain[c].values()))))
            for c in allowed
        ]
        try:
            same_chain = await self._observer.observe(env, Chain.BITCOIN, own) if own else []
        except BaseException:
            for task in pending:
                task.cancel()
            raise
        observed: dict[tuple[str, str], Observation] = {(Chain.BITCOIN.value, o.address): o for o in same_chain}
        failed = {chain.value for chain in by_chain if chain not in allowed}
        for chain, answer in zip(allowed, await asyncio.gather(*pending), strict=True):
            if answer is None:
                failed.add(chain.value)
                continue
            observed.update(((chain.value, o.address), o) for o in answer)
        result: dict[str, tuple[list[Observation], tuple[str, ...]]] = {}
        for text, found in wanted.items():
            observations = []
            missing = set()
            for sibling in found:
                key = (sibling.chain.value, str(sibling))
                if sibling.chain is Chain.BITCOIN and str(sibling) in seen:
                    observations.append(seen[str(sibling)])
                elif key in observed:
                    observations.append(observed[key])
                elif sibling.chain.value in failed:
                    missing.add(sibling.chain.value)
            result[text] = (observations, tuple(c.value for c in CHAINS if c.value in missing))
        return result

    async def _coins(self, env: Environment, verdicts: Sequence[_Verdict]) -> None:
        """Fill in the unspent outputs of every used address holding a balance (one request
        each, concurrently). ``ChainUnavailable`` when Bitcoin's source cannot list them: a
        scan that cannot name the coins at risk does not answer."""
        client = self._observer.client(env, Chain.BITCOIN)
        funded = [v for v in verdicts if v.observation.balance > 0]
        if not funded:
            return
        if not isinstance(client, CoinSource):
            raise UnsupportedChain("the configured Bitcoin source cannot list unspent outputs", chain="bitcoin")
        lists = await asyncio.gather(*(client.coins(v.derived.address) for v in funded))
        for verdict, coins in zip(funded, lists, strict=True):
            verdict.coins = coins

    def _answer(
        self,
        wallet: Wallet,
        walk: AddressWalk,
        verdicts: Sequence[_Verdict],
        exposed_unused: Sequence[tuple[DerivedAddress, IndexAnswer]],
        index: IndexAnswer | None,
        gap_limit: int,
        max_derived: int,
    ) -> dict[str, Any]:
        """The JSON answer (field names as docs/api.md gives them)."""
        now = self._clock.now()
        addresses = []
        coins = []
        by_exposure: dict[str, dict[str, int]] = {}
        for v in verdicts:
            o = v.observation
            exposed = v.risk.public_key_exposed
            addresses.append(
                {
                    "address": str(v.derived.address),
                    "chain": o.chain,
                    "branch": v.derived.branch.branch.value,
                    "index": v.derived.index,
                    "scriptType": v.derived.output_type,
                    "balanceSat": o.balance,
                    "balance": format_amount(o.balance, o.decimals, o.symbol),
                    "txCount": o.tx_count,
                    "publicKeyExposed": exposed,
                    "exposure": o.exposure.value,
                    "riskScore": v.risk.risk_score,
                    "riskValue": v.risk.risk_value,
                    "balanceAtRiskUsd": v.risk.balance_at_risk_usd,
                    "exposureEvidence": [e.to_dict() for e in o.evidence],
                    "exposureComplete": v.coverage.complete,
                }
            )
            coins += [
                {
                    "txid": c.txid,
                    "vout": c.vout,
                    "value": c.value,
                    "address": str(v.derived.address),
                    "height": c.height,
                    "publicKeyExposed": exposed,
                    "exposure": o.exposure.value,
                }
                for c in v.coins
            ]
            level = by_exposure.setdefault(o.exposure.value, {"addresses": 0, "balanceSat": 0})
            level["addresses"] += 1
            level["balanceSat"] += o.balance
        coverage = wallet_coverage(walk, verdicts, index, gap_limit, max_derived)
        usd = [v.risk.balance_at_risk_usd for v in verdicts if v.observation.balance]
        worst = max(verdicts, key=lambda v: v.risk.risk_value, default=None)
        lowest = RISK_BANDS[0]
        return {
            "descriptor": wallet.descriptors[0].canonical() if not wallet.bare_key else None,
            "descriptors": [self._descriptor_summary(d, walk, verdicts) for d in wallet.descriptors],
            "addresses": addresses,
            "coins": coins,
            "exposedUnused": [
                {
                    "address": str(d.address),
                    "branch": d.branch.branch.value,
                    "index": d.index,
                    "scriptType": d.output_type,
                    "exposureEvidence": [e.to_dict() for e in answer.evidence],
                }
                for d, answer in exposed_unused
            ],
            "summary": {
                "balanceSat": sum(v.observation.balance for v in verdicts),
                "exposedBalanceSat": sum(v.observation.balance for v in verdicts if v.risk.public_key_exposed),
                "balanceAtRiskUsd": None if None in usd else round(sum(u for u in usd if u is not None), 2),
                "riskScore": lowest.score if worst is None else worst.risk.risk_score,
                "riskValue": 0 if worst is None else worst.risk.risk_value,
                "usedAddresses": len(verdicts),
                "derivedAddresses": len(walk.derived),
                "byExposure": by_exposure,
                "gapLimit": gap_limit,
                "lookupRounds": walk.rounds,
            },
            "coverage": coverage.to_dict(),
            "exposureComplete": coverage.complete,
            "scannedAt": iso(now),
            "scoringVersion": SCORING_VERSION,
        }

    @staticmethod
    def _descriptor_summary(descriptor: Descriptor, walk: AddressWalk, verdicts: Sequence[_Verdict]) -> dict[str, Any]:
        mine = [v for v in verdicts if v.derived.branch.descriptor is descriptor]
        return {
            "descriptor": descriptor.canonical(),
            "usedAddresses": len(mine),
            "derivedAddresses": sum(1 for d in walk.derived if d.branch.descriptor is descriptor),
            "balanceSat": sum(v.observation.balance for v in mine),
        }
