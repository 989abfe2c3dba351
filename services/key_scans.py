"""Key scans (``POST /v1/scan/key``): every address and output a public key controls, on
every chain, observed together, with one verdict for the key. Free of HTTP.

The forms come from ``chains.keys.key_addresses`` (P2PK outputs by script hash, so coins
of the Satoshi era are found); each chain is waited for at most the family wait, and a
chain that fails is listed with its error, never failing the scan. A key revealed by any
form exposes every form (``chains.evidence``), except that a P2TR output key is its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec

from chains.bitcoin.revelations import key_hashes
from chains.clients.prices import Price
from chains.environment import Environment
from chains.evidence import Coverage, shared_evidence, with_family
from chains.keys import KeyAddress, KeyType, PublicKey, key_addresses, parse_public_key
from chains.observation import Exposure, Observation
from chains.registry import CHAINS, Chain, parse_chain
from core.clock import Clock, iso
from pqc import decode_hex
from scoring import load_readiness, score_observation
from scoring.model import RISK_BANDS, SCORING_VERSION
from scoring.readiness import ReadinessData
from scoring.records import scored_scan
from services.accounts import Principal, environment_of
from services.errors import NotFound
from services.exposure_index import IndexAnswer, with_index
from services.observer import ChainObserver
from services.pagination import Page, PageRequest, id_after, id_cursor, page_of
from services.pricing import ScanPrices
from storage.models import KeyScanResult
from storage.repository import ScanStore

#: What a "not exposed" verdict on a secp256k1 key cannot see on Bitcoin even with its
#: P2PK outputs looked up by script.
BITCOIN_SCRIPT_LIMIT = (
    "bitcoin-index: a key revealed only inside a multisig or another script is not visible "
    "through address and script lookups"
)

_DECODER = msgspec.json.Decoder()
#: The tag of stored key-scan cursors (``services.pagination``).
KEY_PAGES = "ks"
#: The most sets of chains one key's stored scans are read for (a scan of all chains, and subsets).
_CHAIN_SETS = 50
_ENCODER = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class KeyScanOutcome:
    """A key-scan answer (JSON text, without ``cached``) and whether it came from the store."""

    result: str
    cached: bool


@dataclass(frozen=True, slots=True)
class _Form:
    """One form of the key and what its chain said: an observation, or the error."""

    place: KeyAddress
    observation: Observation | None
    error: str | None


class KeyScanService:
    """Scans of public keys, over the scans' chain observer and price sources."""

    def __init__(
        self,
        store: ScanStore,
        observer: ChainObserver,
        prices: ScanPrices,
        clock: Clock,
        ttl_seconds: int,
        readiness: ReadinessData | None = None,
    ) -> None:
        self._store = store
        self._observer = observer
        self._prices = prices
        self._clock = clock
        self._ttl = timedelta(seconds=ttl_seconds)
        self._readiness = readiness or load_readiness()

    async def scan(
        self, principal: Principal, public_key: str, chains: Sequence[str] | None, refresh: bool
    ) -> KeyScanOutcome:
        """The verdict on ``public_key`` (hex: 33- or 65-byte SEC or 32-byte ed25519) over
        ``chains`` (all by default), from the store when younger than the scan TTL and not
        ``refresh``. ``InvalidHex`` / ``InvalidKeyFormat`` (PQC_002) for a bad key or a
        point off its curve, ``UnsupportedChain`` (SCAN_002) for an unknown chain."""
        env = environment_of(principal)
        key = parse_public_key(decode_hex(public_key, field="publicKey"))
        wanted = None if chains is None else frozenset(parse_chain(c) for c in chains)
        chain_list = "*" if wanted is None else ",".join(sorted(c.value for c in wanted))
        subject = f"{SCORING_VERSION}:{key.compressed.hex()}/{chain_list}"  # older rules never answer
        now = self._clock.now()
        stored = await self._store.latest_key_result(principal.account.id, env, subject)
        if stored is not None and not refresh and now - stored.scanned_at < self._ttl:
            return KeyScanOutcome(stored.result, cached=True)
        places = [p for p in key_addresses(key, env.network) if wanted is None or p.chain in wanted]
        forms = await self._observe(env, places)
        index = None
        if key.key_type is KeyType.SECP256K1 and self._observer.index is not None:
            hashes = [h for h in key_hashes(key.compressed) or () if h is not None]  # both encodings
            index = await self._observer.index.revealed(env, hashes)
        body, data_as_of = await self._answer(env, key, forms, index, now)
        result = _ENCODER.encode(body).decode()
        await self._store.save_key_result(KeyScanResult(principal.account.id, env, subject, result, data_as_of, now))
        return KeyScanOutcome(result, cached=False)

    async def scanned(self, principal: Principal, page: PageRequest) -> Page[KeyScanResult]:
        """A page of the caller's stored key scans under today's scoring rules, in key order
        (older rules' results are never shown: they would not answer a scan either)."""
        after = id_after(KEY_PAGES, page.cursor)
        rows = await self._store.key_results(
            principal.account.id, environment_of(principal), _subjects(f"{SCORING_VERSION}:"), after, page.limit + 1
        )
        return page_of(rows, page.limit, lambda r: id_cursor(KEY_PAGES, r.subject))

    async def results_of(self, principal: Principal, public_key: str) -> list[KeyScanResult]:
        """The caller's stored scans of one key (hex, any encoding) under today's rules, one per
        set of chains asked for; ``NotFound`` (REQ_005) when it was never scanned."""
        key = parse_public_key(decode_hex(public_key, field="publicKey"))
        prefix = f"{SCORING_VERSION}:{key.compressed.hex()}/"
        rows = await self._store.key_results(
            principal.account.id, environment_of(principal), _subjects(prefix), None, _CHAIN_SETS
        )
        if not rows:
            raise NotFound(f"no scan of key {key.compressed.hex()[:16]}…", id=key.compressed.hex())
        return rows

    async def _observe(self, env: Environment, places: Sequence[KeyAddress]) -> list[_Form]:
        """Every form observed, one bounded fetch per chain (and one for P2PK scripts)."""
        groups: dict[tuple[Chain, bool], list[KeyAddress]] = {}
        for place in places:
            groups.setdefault((place.chain, place.address is None), []).append(place)
        fetches = {group: self._fetch(env, group, members) for group, members in groups.items()}
        answers = dict(zip(fetches, await asyncio.gather(*fetches.values()), strict=True))
        forms: list[_Form] = []
        for place in places:
            group = (place.chain, place.address is None)
            found, error = answers[group]
            observation = None if found is None else found[groups[group].index(place)]
            forms.append(_Form(place, observation, error))
        return forms

    async def _fetch(
        self, env: Environment, group: tuple[Chain, bool], members: Sequence[KeyAddress]
    ) -> tuple[list[Observation] | None, str | None]:
        chain, scripts = group
        if not self._observer.allowed(chain):
            return None, f"{chain.value} lookups are not configured (family_chains)"
        if scripts:
            fetch = self._observer.observe_scripts(env, [m.script_pubkey for m in members if m.script_pubkey])
        else:
            fetch = self._observer.observe(env, chain, [m.address for m in members if m.address is not None])
        found = await self._observer.bounded(fetch)
        if found is None:
            return None, f"{chain.value} data is unavailable (down, too slow, or no script lookups)"
        return found, None

    async def _answer(
        self, env: Environment, key: PublicKey, forms: Sequence[_Form], index: IndexAnswer | None, now: datetime
    ) -> tuple[dict[str, Any], datetime]:
        """The answer's fields, and when its oldest chain data was observed. The key is
        exposed when any form's evidence or the Bitcoin exposure ``index`` reveals it (or a
        form's level is undetermined: fail closed); its risk is the worst of its active forms'."""
        seen = [f.observation for f in forms if f.observation is not None]
        evidence = shared_evidence(seen)
        if index is not None:
            cited = {e.txid for e in evidence}
            evidence += tuple(e for e in index.evidence if e.txid not in cited)
        unavailable = {f.place.chain for f in forms if f.observation is None}
        checked = {f.place.chain for f in forms} - unavailable
        exposed = bool(evidence) or any(
            o.exposure is Exposure.UNDETERMINED and o.has_activity and o.address_type != "p2tr" for o in seen
        )
        limit = None
        if key.key_type is KeyType.SECP256K1 and not exposed and Chain.BITCOIN in checked:
            heights = [o.height for o in seen if o.chain == Chain.BITCOIN.value and o.height is not None]
            limit = BITCOIN_SCRIPT_LIMIT if index is None else index.limit(min(heights, default=None))
        coverage = Coverage(
            checked=tuple(c.value for c in CHAINS if c in checked),
            unavailable=tuple(c.value for c in CHAINS if c in unavailable),
            limits=() if limit is None else (limit,),
            index_height=None if index is None else index.complete_to,
        )
        active = [f for f in forms if f.observation is not None and f.observation.has_activity]
        prices = await self._prices_for(env, {f.place.chain for f in active})
        scans: dict[int, dict[str, Any]] = {}
        usd: list[float | None] = []
        for f in active:
            assert f.observation is not None
            merged = with_family(f.observation, [o for o in seen if o is not f.observation])
            if index is not None:  # the key itself: a BIP-86 output key is its tweak, exposed with it
                merged = with_index(merged, index)
            risk = score_observation(merged, prices.get(f.place.chain), self._readiness)
            scans[id(f)] = _DECODER.decode(scored_scan(merged, risk, now, coverage).result)
            usd += [risk.balance_at_risk_usd] if merged.balance else []
        worst = max(scans.values(), key=lambda s: s["riskValue"], default=None)
        lowest = RISK_BANDS[0]
        addresses = [
            {
                "chain": f.place.chain.value,
                "address": f.place.text,
                "form": f.place.form.value,
                "active": id(f) in scans,
                "scan": scans.get(id(f)),
                "error": None if f.error is None else {"code": "SCAN_004", "message": f.error},
            }
            for f in forms
        ]
        body = {
            "publicKey": key.compressed.hex(),
            "keyType": key.key_type.value,
            "publicKeyExposed": exposed,
            "exposureEvidence": [e.to_dict() for e in evidence],
            "riskScore": lowest.score if worst is None else worst["riskScore"],
            "riskLabel": lowest.label if worst is None else worst["riskLabel"],
            "riskValue": 0 if worst is None else worst["riskValue"],
            "balanceAtRiskUsd": None if None in usd else round(sum(u for u in usd if u is not None), 2),
            "addresses": addresses,
            "coverage": coverage.to_dict(),
            "exposureComplete": coverage.complete,
            "scannedAt": iso(now),
            "scoringVersion": SCORING_VERSION,
        }
        data_as_of = min((o.observed_at for o in seen), default=now)
        return body, data_as_of

    async def _prices_for(self, env: Environment, chains: set[Chain]) -> dict[Chain, Price]:
        found = await asyncio.gather(*(self._prices.price(env, chain) for chain in chains))
        return {chain: p for chain, p in zip(chains, found, strict=True) if p is not None}


def _subjects(prefix: str) -> tuple[str, str]:
    """The subject range ``[prefix, next)`` holding every subject that starts with ``prefix``."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)
