"""How a webhook delivery is signed, twice: HMAC-SHA256 with the endpoint's secret, and
ML-DSA-65 with the service's signing key held in managed custody (post-quantum signed
webhooks; a receiver checks both with ``qday_client.verify_webhook``).

Both sign ``"<t>." + body``, ``t`` the attempt's Unix time in seconds:

* ``Qday-Signature: t=<t>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>``: one ``v1`` per
  secret in use (two for 24 h after a rotation, so receivers can switch over);
* ``Qday-Signature-MLDSA: <hex ML-DSA-65 signature of "<t>." + body, empty context>``
  (3,309 bytes; the public key, 1,952 bytes, is ``GET /v1/webhooks/signing-key``);
* ``Qday-Event-Id: evt_…``, the body's ``id``, by which receivers drop repeats.

Endpoint secrets are ``whsec_`` and 32 random bytes in URL-safe base64 (the HMAC key is the
whole string). The store keeps them sealed with AES-256-GCM under a key derived from the
master secret, bound to the endpoint and its account, so a sealed secret copied to
another row does not open.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Sequence
from concurrent.futures import Executor

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from core.clock import Clock
from pqc import Algorithm
from services.custody.backend import KeyCustody, binding_for
from services.custody.errors import CustodyIntegrityError, CustodyUnavailable
from services.offload import run_blocking
from storage.sql_webhooks import SqlWebhookStore
from storage.webhook_records import ServiceKey

SECRET_PREFIX = "whsec_"
SIGNING_ALGORITHM = Algorithm.ML_DSA_65
#: The ``service_keys`` row of the webhook signing key.
SIGNING_KEY_NAME = "webhook-signing"
_NONCE = 12


def new_endpoint_secret() -> str:
    """A fresh endpoint secret: ``whsec_`` and 32 random bytes, URL-safe base64 unpadded."""
    return SECRET_PREFIX + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


def _aad(webhook_id: str, account_id: str) -> bytes:
    return f"qday-webhook-secret-v1\x00{webhook_id}\x00{account_id}".encode()


def seal_secret(key: bytes, webhook_id: str, account_id: str, secret: str) -> bytes:
    """``secret`` sealed for the store: nonce (12 bytes) and AES-256-GCM ciphertext, bound
    to the endpoint and its account."""
    nonce = os.urandom(_NONCE)
    return nonce + AESGCM(key).encrypt(nonce, secret.encode(), _aad(webhook_id, account_id))


def open_secret(key: bytes, webhook_id: str, account_id: str, sealed: bytes) -> str:
    """The secret ``seal_secret`` sealed; ``CustodyIntegrityError`` when it was sealed for
    another endpoint or under another master secret, or altered."""
    try:
        return AESGCM(key).decrypt(sealed[:_NONCE], sealed[_NONCE:], _aad(webhook_id, account_id)).decode()
    except (InvalidTag, ValueError):
        raise CustodyIntegrityError(f"the secret of webhook {webhook_id} does not open") from None


def signed_payload(t: int, body: bytes) -> bytes:
    """What both signatures cover: ``"<t>."`` and the body's bytes."""
    return f"{t}.".encode() + body


def hmac_header(t: int, body: bytes, secrets: Sequence[str]) -> str:
    """The ``Qday-Signature`` value: ``t=<t>`` and one ``v1=`` HMAC-SHA256 per secret."""
    payload = signed_payload(t, body)
    macs = (hmac.new(s.encode(), payload, hashlib.sha256).hexdigest() for s in secrets)
    return ",".join([f"t={t}", *(f"v1={m}" for m in macs)])


def delivery_headers(event_id: str, t: int, body: bytes, secrets: Sequence[str], mldsa: bytes) -> dict[str, str]:
    """Every header of one delivery attempt besides the transport's own."""
    return {
        "Content-Type": "application/json",
        "User-Agent": "qday-webhooks/1",
        "Qday-Event-Id": event_id,
        "Qday-Signature": hmac_header(t, body, secrets),
        "Qday-Signature-MLDSA": mldsa.hex(),
    }


def _binding() -> bytes:
    """What the signing key's custody reference is bound to: its name, the service."""
    return binding_for(SIGNING_KEY_NAME, "service", "live", SIGNING_ALGORITHM.value)


class WebhookSigner:
    """The service's ML-DSA-65 webhook signing key: made in managed custody on first use
    (the first node to store it wins; every node then signs with that one), public key
    published, private key never out of custody."""

    def __init__(self, store: SqlWebhookStore, custody: KeyCustody | None, executor: Executor, clock: Clock) -> None:
        self._store = store
        self._custody = custody
        self._executor = executor
        self._clock = clock
        self._key: ServiceKey | None = None

    def _backend(self) -> KeyCustody:
        if self._custody is None:
            raise CustodyUnavailable("managed custody is unavailable on this server: webhooks cannot be signed now")
        return self._custody

    async def key(self) -> ServiceKey:
        """The signing key, made now if no node has made it yet; ``CustodyUnavailable``
        when custody is needed and not there."""
        if self._key is None:
            stored = await self._store.service_key(SIGNING_KEY_NAME)
            if stored is None:
                backend = self._backend()
                made = await run_blocking(self._executor, backend.create, SIGNING_ALGORITHM, _binding())
                candidate = ServiceKey(
                    SIGNING_KEY_NAME,
                    SIGNING_ALGORITHM.value,
                    made.public_key,
                    made.key_ref,
                    made.backend,
                    made.wrapping_key,
                    self._clock.now(),
                )
                stored = await self._store.add_service_key(candidate)
                if stored.key_ref != made.key_ref:  # another node stored its key first
                    await run_blocking(self._executor, backend.destroy, made.key_ref, _binding())
            self._key = stored
        return self._key

    async def sign(self, payload: bytes) -> bytes:
        """An ML-DSA-65 signature (3,309 bytes, empty context) of ``payload``."""
        key = await self.key()
        backend = self._backend()
        return await run_blocking(
            self._executor, backend.sign, SIGNING_ALGORITHM, key.key_ref, _binding(), payload, b""
        )
