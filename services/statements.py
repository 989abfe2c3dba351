"""Canonical texts that clients sign: key-registration challenges (proof of
possession) and strict-mode attestation statements.

Both are plain UTF-8 lines a person can read before signing. A registration
challenge carries an HMAC tag, so the server needs no state to accept it; an
attestation statement is stored and can be used once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

from core.clock import iso

REGISTRATION_HEADER = "qday key registration v1"
ATTESTATION_HEADER = "qday hybrid attestation v1"
#: FIPS 204/205 context string under which proof-of-possession signatures are made.
REGISTRATION_CONTEXT = b"qday-key-registration-v1"


@dataclass(frozen=True, slots=True)
class RegistrationClaims:
    """What a registration challenge binds: who, where, which key, until when."""

    account_id: str
    environment: str
    algorithm: str
    fingerprint: str
    expires_at: datetime


def _lines(fields: list[tuple[str, str]]) -> str:
    return "\n".join(f"{name}: {value}" for name, value in fields)


def registration_challenge(claims: RegistrationClaims, key: bytes) -> str:
    """A signed challenge text for proving possession of a private key."""
    body = (
        REGISTRATION_HEADER
        + "\n"
        + _lines(
            [
                ("account", claims.account_id),
                ("environment", claims.environment),
                ("algorithm", claims.algorithm),
                ("key", claims.fingerprint),
                ("expires", iso(claims.expires_at)),
                ("nonce", secrets.token_hex(16)),
            ]
        )
    )
    tag = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    return f"{body}\ntag: {tag}"


def read_registration_challenge(text: str, key: bytes) -> RegistrationClaims | None:
    """The claims of a challenge this server issued (tag checked in constant
    time), or None for anything else."""
    body, sep, tag_line = text.rpartition("\ntag: ")
    if not sep or not body.startswith(REGISTRATION_HEADER + "\n"):
        return None
    expected = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(tag_line.encode(), expected.encode()):
        return None
    fields = dict(line.split(": ", 1) for line in body.splitlines()[1:])
    return RegistrationClaims(
        fields["account"],
        fields["environment"],
        fields["algorithm"],
        fields["key"],
        datetime.fromisoformat(fields["expires"].replace("Z", "+00:00")),
    )


def attestation_statement(
    domain: str,
    chain: str,
    ecdsa_signer: str,
    algorithm: str,
    pqc_fingerprint: str,
    issued_at: datetime,
    expires_at: datetime,
) -> str:
    """The statement both keys sign in strict mode: it names the service, the chain
    and both keys, so a signature over it cannot be replayed elsewhere."""
    return (
        ATTESTATION_HEADER
        + "\n"
        + _lines(
            [
                ("domain", domain),
                ("chain", chain),
                ("ecdsa", ecdsa_signer),
                ("pqc", f"{algorithm}:{pqc_fingerprint}"),
                ("nonce", secrets.token_hex(16)),
                ("issued", iso(issued_at)),
                ("expires", iso(expires_at)),
            ]
        )
    )


def statement_hash(statement: bytes) -> bytes:
    """The SHA-256 under which a statement is stored and looked up."""
    return hashlib.sha256(statement).digest()
