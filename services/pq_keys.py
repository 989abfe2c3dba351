"""Post-quantum public keys of an account: records of keys the service generated,
and registration of locally generated keys with proof of possession.

Free of HTTP. The rules every entry point shares live here once: which chains keys
are generated for (GEN_001) and the exact length of a public key (PQC_002).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pqc
from core.clock import Clock
from core.ids import new_id
from services.accounts import Principal, environment_of
from services.errors import ChallengeInvalid, InvalidCombination
from services.pagination import Page, PageRequest, keyset_after, keyset_cursor, page_of
from services.statements import RegistrationClaims, read_registration_challenge, registration_challenge
from storage.models import KeyOrigin, PqKey
from storage.repository import AttestationStore

#: Chains ``POST /v1/keys/generate`` accepts (the spec's list).
KEYGEN_CHAINS = ("ethereum", "bitcoin", "solana", "polygon", "avalanche")
#: The tag of registered-key list cursors (``services.pagination``).
PQ_KEY_PAGES = "p"


def keygen_chain(name: str) -> str:
    """The canonical (lower-case) name of a chain keys may be generated for;
    ``InvalidCombination`` for any other."""
    if name.lower() not in KEYGEN_CHAINS:
        raise InvalidCombination(
            f"keys can be generated for {', '.join(KEYGEN_CHAINS)}; not for {name[:40]!r}",
            field="chain",
            supported=list(KEYGEN_CHAINS),
        )
    return name.lower()


def public_key_from_hex(algorithm: pqc.Algorithm, text: str, field: str) -> bytes:
    """A public key of ``algorithm`` from hex text: ``InvalidHex`` for bad hex,
    ``InvalidKeyFormat`` unless exactly the algorithm's public-key size."""
    public_key = pqc.decode_hex(text, field=field)
    expected = pqc.SPECS[algorithm].public_key_size
    if len(public_key) != expected:
        raise pqc.InvalidKeyFormat(
            f"{algorithm.value} public keys are {expected} bytes, got {len(public_key)}", field=field
        )
    return public_key


class PqKeyService:
    """Registered post-quantum public keys of one store, scoped by principal."""

    def __init__(self, store: AttestationStore, clock: Clock, challenge_key: bytes, challenge_ttl_seconds: int) -> None:
        self._store = store
        self._clock = clock
        self._challenge_key = challenge_key
        self._ttl = timedelta(seconds=challenge_ttl_seconds)

    async def record_generated(self, principal: Principal, keypair: pqc.KeyPair, chain: str) -> PqKey:
        """Register the public half of a key pair the server generated (never the private half)."""
        return await self._store.add_pq_key(
            self._pq_key(principal, keypair.algorithm, chain, keypair.public_key, KeyOrigin.GENERATED)
        )

    def _pq_key(
        self, principal: Principal, algorithm: pqc.Algorithm, chain: str, public_key: bytes, origin: KeyOrigin
    ) -> PqKey:
        return PqKey(
            new_id("key"),
            principal.account.id,
            environment_of(principal),
            algorithm.value,
            chain,
            public_key,
            pqc.public_key_fingerprint(public_key),
            origin,
            self._clock.now(),
        )

    def registration_challenge(
        self, principal: Principal, algorithm: pqc.Algorithm, public_key: bytes
    ) -> tuple[str, datetime]:
        """A challenge to sign with the private key being registered, and its expiry."""
        expires = self._clock.now() + self._ttl
        claims = RegistrationClaims(
            principal.account.id,
            environment_of(principal).value,
            algorithm.value,
            pqc.public_key_fingerprint(public_key),
            expires,
        )
        return registration_challenge(claims, self._challenge_key), expires

    def check_registration(
        self, principal: Principal, algorithm: pqc.Algorithm, public_key: bytes, challenge: str
    ) -> None:
        """Raise ``ChallengeInvalid`` unless ``challenge`` was issued by us, for this
        caller, key and algorithm, and has not expired (the signature is checked separately)."""
        claims = read_registration_challenge(challenge, self._challenge_key)
        expected = (
            principal.account.id,
            environment_of(principal).value,
            algorithm.value,
            pqc.public_key_fingerprint(public_key),
        )
        if claims is None or (claims.account_id, claims.environment, claims.algorithm, claims.fingerprint) != expected:
            raise ChallengeInvalid(
                "challenge was not issued for this account, environment, algorithm and key",
                field="challenge",
            )
        if self._clock.now() >= claims.expires_at:
            raise ChallengeInvalid("challenge has expired; request a new one", field="challenge", reason="expired")

    async def register(self, principal: Principal, algorithm: pqc.Algorithm, chain: str, public_key: bytes) -> PqKey:
        """Register a key whose possession was proven (idempotent)."""
        return await self._store.add_pq_key(self._pq_key(principal, algorithm, chain, public_key, KeyOrigin.REGISTERED))

    async def list_keys(self, principal: Principal, page: PageRequest | None = None) -> Page[PqKey]:
        """A page of the caller's registered keys in its environment, oldest first."""
        page = page or PageRequest()
        after = keyset_after(PQ_KEY_PAGES, page.cursor)
        rows = await self._store.list_pq_keys(principal.account.id, environment_of(principal), after, page.limit + 1)
        return page_of(rows, page.limit, lambda k: keyset_cursor(PQ_KEY_PAGES, k.created_at, k.id))
