"""Account scans on the EVM chains from an account-level extended public key (``POST
/v1/scan/descriptor`` with an EVM ``chain``). Free of HTTP.

Wallets such as MetaMask derive their accounts as ``m/44'/60'/0'/0/i`` (BIP-44, coin type 60):
the account's extended public key (depth 3, ``m/44'/60'/0'``) derives every ``0/i`` child
without a private key. Each child is one account on every EVM chain and Tron (its keccak
family): an account is used when any of those chains has seen it, and the walk stops after
``gap_limit`` unused accounts in a row (``services.gap_walk``). Every used account gets the
verdict a wallet scan gives it on each chain where it is active, its family merged in (a key
that signed on one chain is exposed on all). The named chain must answer; the others are
waited for like family chains and reported unavailable when they fail. Wallets that harden
each account (Ledger Live's ``m/44'/60'/i'/0/0``) cannot be derived from one public key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coincurve import PublicKey as Secp256k1Point

from chains.bitcoin.bip32 import ExtendedPublicKey, parse_extended_key
from chains.bitcoin.descriptors import InvalidDescriptor
from chains.clients.prices import Price
from chains.codecs.address import Address
from chains.codecs.evm import EvmAddress
from chains.environment import Environment
from chains.evidence import Coverage, with_family
from chains.keys import KECCAK_CHAINS, keccak_family
from chains.observation import Observation
from chains.registry import CHAINS, EVM_CHAINS, Chain, parse_chain
from core.clock import Clock, iso
from pqc.hashes import keccak256
from scoring import load_readiness, score_observations
from scoring.model import RISK_BANDS, SCORING_VERSION
from scoring.readiness import ReadinessData
from scoring.result import WalletRisk, format_amount
from services.accounts import Principal, environment_of
from services.descriptor_scans import MAX_DERIVED
from services.gap_walk import Branches, Walk, gap_walk
from services.observer import ChainObserver
from services.pricing import PriceLookup
from storage.models import ScanResult
from storage.repository import ScanStore
from storage.scan_records import scan_record

#: The BIP-32 depth of an account key ``m/44'/60'/n'``.
ACCOUNT_DEPTH = 3
#: BIP-44's external chain, under which the accounts are derived.
EXTERNAL = 0


@dataclass(frozen=True, slots=True)
class Account:
    """The ``index``-th account of the key: its 20 bytes and its address on the named chain."""

    index: int
    address: EvmAddress


@dataclass(frozen=True, slots=True)
class _Entry:
    """One active (account, chain), scored."""

    account: Account
    observation: Observation
    risk: WalletRisk
    coverage: Coverage


@dataclass(frozen=True, slots=True)
class _Seen:
    """What the keccak family's chains said about one account; the chains that did not answer."""

    observations: tuple[Observation, ...]
    unavailable: tuple[str, ...]

    @property
    def used(self) -> bool:
        return any(o.has_activity for o in self.observations)


def parse_account_key(text: str) -> ExtendedPublicKey:
    """The account-level extended public key ``text`` (an ``xpub``; a ``tpub`` is taken as
    well, EVM test networks use the same derivation). ``PrivateKeyRefused`` for private key
    material; ``InvalidDescriptor`` for a key of a Bitcoin script type (``zpub`` ...) or not
    at account depth (a master key would derive ``m/0/i``, not the wallet's accounts)."""
    key, version = parse_extended_key(text.strip())
    if version.script is not None:
        raise InvalidDescriptor(
            f"a {version.name} is a Bitcoin {version.script} key; an EVM scan takes the account's xpub (m/44'/60'/0')"
        )
    if key.depth != ACCOUNT_DEPTH:
        raise InvalidDescriptor(
            f"the key is at depth {key.depth}; an EVM scan takes an account-level key (depth 3, m/44'/60'/0'), "
            "whose 0/i children are the wallet's accounts"
        )
    return key


def accounts(key: ExtendedPublicKey, indexes: range, chain: Chain, env: Environment) -> list[Account]:
    """The accounts ``0/i`` of ``key`` for ``indexes``, as addresses on ``chain``."""
    external = key.derive(EXTERNAL)
    found = []
    for index, child in zip(indexes, external.children(indexes), strict=True):
        point = Secp256k1Point(child.public_key).format(compressed=False)
        found.append(Account(index, EvmAddress(keccak256(point[1:])[12:], chain, env.network)))
    return found


class EvmAccountScanService:
    """Scans of EVM accounts derived from an account key, over the scans' chain observer."""

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

    @staticmethod
    def covers(chain: str) -> bool:
        """True when ``chain`` names an EVM chain (``UnsupportedChain`` for an unknown one)."""
        return parse_chain(chain) in EVM_CHAINS

    async def scan(self, principal: Principal, text: str, chain: str, gap_limit: int) -> dict[str, Any]:
        """The answer of ``POST /v1/scan/descriptor`` for an EVM chain (fields in docs/api.md);
        each active (account, chain) result is stored as its wallet scan. ``ChainUnavailable``
        when the named chain fails."""
        env = environment_of(principal)
        named = parse_chain(chain)
        key = parse_account_key(text)
        missing: set[str] = set()
        walk = await self._walk(env, key, named, gap_limit, missing)
        entries, records = await self._verdicts(env, walk, principal.account.id)
        await self._store.save_results(records)
        return self._answer(text.strip(), walk, entries, gap_limit, missing)

    async def _walk(
        self, env: Environment, key: ExtendedPublicKey, named: Chain, gap_limit: int, missing: set[str]
    ) -> Walk[Account, _Seen]:
        """The gap walk over the key's accounts; ``missing`` collects the family chains that did
        not answer some round (an account used only there may have ended the walk early)."""

        async def lookup(batch: list[Account]) -> list[_Seen]:
            seen = await self._observe_families(env, named, batch)
            missing.update(c for s in seen for c in s.unavailable)
            return seen

        how: Branches[None, Account, _Seen] = Branches(
            ranged=lambda _branch: True,
            derive=lambda _branch, indexes: accounts(key, indexes, named, env),
            position=lambda a: (None, a.index),
            lookup=lookup,
            used=lambda seen: seen.used,
        )
        return await gap_walk([None], how, gap_limit, MAX_DERIVED)

    async def _observe_families(self, env: Environment, named: Chain, batch: Sequence[Account]) -> list[_Seen]:
        """Each account on every chain of its keccak family: the named chain must answer, the
        others are bounded by the family wait (one batched call per chain)."""
        families = [keccak_family(a.address) for a in batch]
        others = [c for c in KECCAK_CHAINS if c is not named and self._observer.allowed(c)]
        skipped = tuple(c.value for c in KECCAK_CHAINS if c is not named and not self._observer.allowed(c))

        def on(chain: Chain) -> list[Address]:
            return [next(a for a in family if a.chain is chain) for family in families]

        pending = [asyncio.ensure_future(self._observer.bounded(self._observer.observe(env, c, on(c)))) for c in others]
        try:
            own = await self._observer.observe(env, named, on(named))
        except BaseException:
            for task in pending:
                task.cancel()
            raise
        answers = dict(zip(others, await asyncio.gather(*pending), strict=True))
        unavailable = (*skipped, *(c.value for c, answer in answers.items() if answer is None))
        seen = []
        for i, observation in enumerate(own):
            found = [observation, *(answer[i] for answer in answers.values() if answer is not None)]
            seen.append(_Seen(tuple(found), tuple(c.value for c in CHAINS if c.value in unavailable)))
        return seen

    async def _verdicts(
        self, env: Environment, walk: Walk[Account, _Seen], account_id: str
    ) -> tuple[list[_Entry], list[ScanResult]]:
        """Each active (account, chain) scored with its family merged in."""
        active = {Chain(o.chain) for _, seen in walk.used for o in seen.observations if o.has_activity}
        prices = dict(zip(active, await asyncio.gather(*(self._prices.price(env, c) for c in active)), strict=True))
        judged = []
        for account, seen in walk.used:
            checked = {o.chain for o in seen.observations}
            coverage = Coverage(
                checked=tuple(c.value for c in CHAINS if c.value in checked),
                unavailable=seen.unavailable,
                limits=(),
            )
            for observation in seen.observations:
                if observation.has_activity:
                    merged = with_family(observation, [o for o in seen.observations if o is not observation])
                    judged.append((account, merged, coverage))
        risks = await asyncio.to_thread(self._score, [m for _, m, _ in judged], prices)
        now = self._clock.now()
        entries = [_Entry(a, m, r, c) for (a, m, c), r in zip(judged, risks, strict=True)]
        records = [scan_record(e.observation, e.risk, account_id, env, now, "api", e.coverage) for e in entries]
        return entries, records

    def _score(self, observations: Sequence[Observation], prices: Mapping[Chain, Price | None]) -> list[WalletRisk]:
        """Score ``observations`` one vectorised pass per chain, each with its own chain's
        price (chains sharing a symbol may differ: a local node's coins have no value)."""
        risks: dict[int, WalletRisk] = {}
        for chain in {Chain(o.chain) for o in observations}:
            group = [(i, o) for i, o in enumerate(observations) if o.chain == chain.value]
            price = prices.get(chain)
            quotes = {} if price is None else {CHAINS[chain].symbol: price}
            scored = score_observations([o for _, o in group], quotes, self._readiness)
            risks.update((i, risk) for (i, _), risk in zip(group, scored, strict=True))
        return [risks[i] for i in range(len(observations))]

    def _answer(
        self, text: str, walk: Walk[Account, _Seen], entries: Sequence[_Entry], gap_limit: int, missing: set[str]
    ) -> dict[str, Any]:
        """The JSON answer, in the descriptor scan's shape: balances in each chain's own units,
        so the totals that would add different coins are null."""
        counts: dict[str, int] = {}
        checked: dict[str, None] = {}
        for entry in entries:
            counts[entry.observation.exposure.value] = counts.get(entry.observation.exposure.value, 0) + 1
            checked.update(dict.fromkeys(entry.coverage.checked))
        usd = [e.risk.balance_at_risk_usd for e in entries if e.observation.balance]
        worst = max(entries, key=lambda e: e.risk.risk_value, default=None)
        limits: tuple[str, ...] = ()
        if walk.truncated:
            limits = (
                f"descriptor: the scan stopped after deriving {len(walk.derived)} accounts before reaching "
                f"{gap_limit} unused accounts; later accounts were not looked at",
            )
        coverage = Coverage(tuple(checked), tuple(c.value for c in CHAINS if c.value in missing), limits)
        return {
            "descriptor": None,
            "descriptors": [
                {
                    "descriptor": f"{text}/0/*",
                    "usedAddresses": len(walk.used),
                    "derivedAddresses": len(walk.derived),
                    "balanceSat": None,
                }
            ],
            "addresses": [_address(e) for e in entries],
            "coins": [],
            "exposedUnused": [],
            "summary": {
                "balanceSat": None,
                "exposedBalanceSat": None,
                "balanceAtRiskUsd": None if None in usd else round(sum(u for u in usd if u is not None), 2),
                "riskScore": RISK_BANDS[0].score if worst is None else worst.risk.risk_score,
                "riskValue": 0 if worst is None else worst.risk.risk_value,
                "usedAddresses": len(walk.used),
                "derivedAddresses": len(walk.derived),
                "byExposure": {level: {"addresses": n, "balanceSat": None} for level, n in counts.items()},
                "gapLimit": gap_limit,
                "lookupRounds": walk.rounds,
            },
            "coverage": coverage.to_dict(),
            "exposureComplete": coverage.complete,
            "scannedAt": iso(self._clock.now()),
            "scoringVersion": SCORING_VERSION,
        }


def _address(entry: _Entry) -> dict[str, Any]:
    """One active (account, chain) of the answer."""
    o, risk = entry.observation, entry.risk
    return {
        "address": o.address,
        "chain": o.chain,
        "branch": "receive",
        "index": entry.account.index,
        "scriptType": o.address_type,
        "balanceSat": o.balance,
        "balance": format_amount(o.balance, o.decimals, o.symbol),
        "txCount": o.tx_count,
        "publicKeyExposed": risk.public_key_exposed,
        "exposure": o.exposure.value,
        "riskScore": risk.risk_score,
        "riskValue": risk.risk_value,
        "balanceAtRiskUsd": risk.balance_at_risk_usd,
        "exposureEvidence": [e.to_dict() for e in o.evidence],
        "exposureComplete": entry.coverage.complete,
    }
