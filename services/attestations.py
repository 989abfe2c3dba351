"""Hybrid attestations: strict-mode statements, attestation and verification.
Free of HTTP; CPU-heavy calls are plain functions the routes run off the loop.
Registered post-quantum keys are ``services.pq_keys``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pqc
from core.clock import Clock
from core.ids import new_id
from services.accounts import Principal, environment_of
from services.errors import KeyNotRegistered, NotFound, StatementInvalid, StatementUsed
from services.pagination import Page, PageRequest, keyset_after, keyset_cursor, page_of
from services.signers import ClaimedSigner, ecdsa_signer
from services.statements import (
    attestation_statement,
    statement_hash,
)
from storage.models import Attestation, AttestationChallenge
from storage.repository import AttestationStore

#: Hybrid attestations pair ECDSA with ML-DSA (the spec's list).
HYBRID_ALGORITHMS = (pqc.Algorithm.ML_DSA_44, pqc.Algorithm.ML_DSA_65, pqc.Algorithm.ML_DSA_87)
#: The tag of attestation list cursors (``services.pagination``).
ATTESTATION_PAGES = "a"


def hybrid_algorithm(name: str) -> pqc.Algorithm:
    """An ML-DSA algorithm for a hybrid attestation; PQC_001 for anything else."""
    algorithm = pqc.parse_algorithm(name)
    if algorithm not in HYBRID_ALGORITHMS:
        raise pqc.UnsupportedAlgorithm(
            f"hybrid attestations use ML-DSA; {algorithm.value} is not supported here",
            algorithm=algorithm.value,
            supported=[a.value for a in HYBRID_ALGORITHMS],
        )
    return algorithm


@dataclass(frozen=True, slots=True)
class HybridInput:
    """A decoded hybrid attestation request."""

    message: bytes
    ecdsa_signature: bytes
    claimed: ClaimedSigner
    scheme: pqc.MessageScheme
    pqc_signature: bytes
    pqc_public_key: bytes
    algorithm: pqc.Algorithm
    context: bytes
    chain: str


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Both halves of a hybrid check; ``signer`` is the recovered ECDSA key."""

    ecdsa_valid: bool
    pqc_valid: bool
    signer: bytes | None

    @property
    def valid(self) -> bool:
        """True only when both signatures are valid."""
        return self.ecdsa_valid and self.pqc_valid


def check_hybrid(h: HybridInput) -> CheckResult:
    """Run both signature checks, in the spec's order, without stopping at the
    first failure (so the caller learns which half failed). Malformed inputs
    (wrong lengths, bad encodings) still raise."""
    try:
        signer: bytes | None = ecdsa_signer(h.message, h.ecdsa_signature, h.scheme, h.claimed)
    except pqc.MalformedSignature:
        raise
    except pqc.InvalidSignature:
        signer = None
    try:
        pqc.verify(h.algorithm, h.pqc_public_key, h.message, h.pqc_signature, h.context)
        pqc_valid = True
    except pqc.MalformedSignature:
        raise
    except pqc.InvalidSignature:
        pqc_valid = False
    return CheckResult(signer is not None, pqc_valid, signer)


def check_plain(algorithm: pqc.Algorithm, public_key: bytes, message: bytes, signature: bytes, context: bytes) -> bool:
    """One post-quantum signature check (the managed-custody verify form)."""
    try:
        pqc.verify(algorithm, public_key, message, signature, context)
    except pqc.MalformedSignature:
        raise
    except pqc.InvalidSignature:
        return False
    return True


class AttestationService:
    """Registered keys and attestations of one store, scoped by principal."""

    def __init__(self, store: AttestationStore, clock: Clock, domain: str, challenge_ttl_seconds: int) -> None:
        self._store = store
        self._clock = clock
        self._domain = domain
        self._ttl = timedelta(seconds=challenge_ttl_seconds)

    # --- attestations ---------------------------------------------------------------------

    async def issue_statement(
        self, principal: Principal, chain: str, claimed: ClaimedSigner, algorithm: pqc.Algorithm, pqc_public_key: bytes
    ) -> AttestationChallenge:
        """A single-use statement binding this service, the chain and both keys."""
        now = self._clock.now()
        text = attestation_statement(
            self._domain,
            chain,
            claimed.text,
            algorithm.value,
            pqc.public_key_fingerprint(pqc_public_key),
            now,
            now + self._ttl,
        )
        challenge = AttestationChallenge(
            new_id("chl"),
            principal.account.id,
            environment_of(principal),
            text,
            statement_hash(text.encode()),
            now + self._ttl,
            now,
        )
        await self._store.add_challenge(challenge)
        return challenge

    async def _strict_challenge(self, principal: Principal, h: HybridInput) -> AttestationChallenge:
        challenge = await self._store.challenge_by_statement(
            principal.account.id, environment_of(principal), statement_hash(h.message)
        )
        if challenge is None:
            raise StatementInvalid(
                "strict mode: the message is not a statement issued to this account", field="message"
            )
        fields = dict(line.split(": ", 1) for line in challenge.statement.splitlines()[1:])
        bound = (fields["chain"], fields["ecdsa"], fields["pqc"])
        given = (h.chain, h.claimed.text, f"{h.algorithm.value}:{pqc.public_key_fingerprint(h.pqc_public_key)}")
        if bound != given:
            raise StatementInvalid(
                "strict mode: the statement names a different chain or different keys", field="message"
            )
        if challenge.used_at is not None or self._clock.now() >= challenge.expires_at:
            raise StatementUsed(
                "strict mode: this statement was already used or has expired",
                field="message",
                reason="used" if challenge.used_at else "expired",
            )
        return challenge

    async def attest(
        self, principal: Principal, h: HybridInput, result: CheckResult, metadata: dict[str, Any], strict: bool
    ) -> Attestation:
        """Store an attestation whose signatures were checked; PQC_004 if either
        failed, PQC_003 if the PQ key is not the caller's, ATT_* in strict mode."""
        if not result.valid:
            raise pqc.InvalidSignature(
                "signature verification failed", ecdsaValid=result.ecdsa_valid, pqcValid=result.pqc_valid
            )
        env = environment_of(principal)
        key = await self._store.pq_key_by_fingerprint(
            principal.account.id, env, h.algorithm.value, pqc.public_key_fingerprint(h.pqc_public_key)
        )
        if key is None:
            raise KeyNotRegistered(
                f"this {h.algorithm.value} public key is not registered to your account in the"
                f" {env.value} environment; generate or register it first",
                field="pqcPublicKey",
            )
        challenge = await self._strict_challenge(principal, h) if strict else None
        assert result.signer is not None
        now = self._clock.now()
        attestation = Attestation(
            id=new_id("att"),
            account_id=principal.account.id,
            environment=env,
            pq_key_id=key.id,
            message=h.message,
            ecdsa_public_key=result.signer,
            ecdsa_claim=h.claimed.text,
            ecdsa_scheme=h.scheme.value,
            ecdsa_signature=h.ecdsa_signature,
            ecdsa_signature_hash=hashlib.sha256(h.ecdsa_signature).digest(),
            pqc_public_key=h.pqc_public_key,
            algorithm=h.algorithm.value,
            context=h.context,
            pqc_signature=h.pqc_signature,
            pqc_signature_hash=hashlib.sha256(h.pqc_signature).digest(),
            chain=h.chain,
            metadata=json.dumps(metadata, separators=(",", ":"), sort_keys=True),
            challenge_id=challenge.id if challenge else None,
            created_at=now,
        )
        if not await self._store.add_attestation(attestation, now):
            raise StatementUsed("strict mode: this statement was already used or has expired", field="message")
        return attestation

    async def stored(self, principal: Principal, attestation_id: str) -> Attestation:
        """One of the caller's attestations in its environment (REQ_005 otherwise)."""
        found = await self._store.get_attestation(principal.account.id, environment_of(principal), attestation_id)
        if found is None:
            raise NotFound(
                f"no attestation {attestation_id[:40]} in this account and environment",
                field="attestationId",
            )
        return found

    async def list_attestations(self, principal: Principal, page: PageRequest | None = None) -> Page[Attestation]:
        """A page of the caller's attestations in its environment, oldest first."""
        page = page or PageRequest()
        after = keyset_after(ATTESTATION_PAGES, page.cursor)
        rows = await self._store.list_attestations(
            principal.account.id, environment_of(principal), after, page.limit + 1
        )
        return page_of(rows, page.limit, lambda a: keyset_cursor(ATTESTATION_PAGES, a.created_at, a.id))
