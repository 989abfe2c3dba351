"""``QdayClient``: the typed async client of every ``/v1`` endpoint.

Each method sends one request and returns a typed result (``qday_client.models``)
or raises the typed error of the answer's code (``qday_client.errors``).

Rate limits: a ``429 RATE_001`` answer pauses *every* request of this client
for the server's ``Retry-After`` seconds (capped by ``max_retry_wait``), then the
request is sent again, at most ``max_retries`` times; after that the error is
raised. Refusals of requests sent before a pause began do not start another. Requests
turned away with 429 were not processed, so retrying is safe for every method.

Credentials are sent only as ``Authorization: Bearer``; the debug log names the
method, path, status and request id, never a header or a body.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

import httpx
import msgspec

from qday_client import models
from qday_client.errors import ConnectionFailed, LocalError, ServerError, error_from_response

log = logging.getLogger("qday_client")
T = TypeVar("T")
DEFAULT_API_URL = "http://127.0.0.1:8000"
_JSON = msgspec.json.Decoder()
_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
#: Runs of Base58 characters long enough to be a WIF key (51-52) or an extended key (111-112).
_KEY_SIZED_RUN = re.compile(f"[{_BASE58}]{{50,}}")
#: How extended private keys are written (BIP-32 and SLIP-132): refused even with a broken checksum.
_XPRV_PREFIXES = ("xprv", "tprv", "yprv", "zprv", "uprv", "vprv", "Yprv", "Zprv", "Uprv", "Vprv")


def retry_after_seconds(response: httpx.Response) -> float:
    """The ``Retry-After`` delay of an answer in seconds (1 when absent or not a number)."""
    try:
        return max(float(response.headers.get("retry-after", "1")), 0.0)
    except ValueError:
        return 1.0


def base58check_decode(text: str) -> bytes | None:
    """The payload of a Base58Check string; None when it is not one (a character outside the
    alphabet, too short, or a checksum that does not match)."""
    number = 0
    for char in text:
        digit = _BASE58.find(char)
        if digit < 0:
            return None
        number = number * 58 + digit
    raw = b"\0" * (len(text) - len(text.lstrip("1"))) + number.to_bytes((number.bit_length() + 7) // 8, "big")
    payload, checksum = raw[:-4], raw[-4:]
    if not payload or hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4] != checksum:
        return None
    return payload


def private_key_kind(text: str) -> str | None:
    """What private key ``text`` (a descriptor or an extended key) holds, or None: an extended
    private key (a 78-byte BIP-32 payload whose key data starts with 0x00, whatever its version
    bytes, or text written like one), or a WIF key (0x80 or 0xef, 32 bytes, optional 0x01)."""
    for match in _KEY_SIZED_RUN.finditer(text):
        payload = base58check_decode(match.group())
        if payload is None:
            if match.group().startswith(_XPRV_PREFIXES):
                return "an extended private key"
        elif len(payload) == 78 and payload[45] == 0:
            return "an extended private key"
        elif payload[0] in (0x80, 0xEF) and (len(payload) == 33 or (len(payload) == 34 and payload[33] == 1)):
            return "a WIF private key"
    return None


def refuse_private_keys(text: str, what: str) -> None:
    """``LocalError`` when ``text`` holds a private key (``private_key_kind``); the message names
    ``what`` and the kind of key, never the key."""
    kind = private_key_kind(text)
    if kind is not None:
        raise LocalError(
            f"{what} holds {kind}; give its public form (xpub, tpub ...) instead: nothing was sent, "
            "and private keys never leave this machine"
        )


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class QdayClient:
    """Async client of the qday API (use as ``async with QdayClient(key, url) as c``).

    ``token`` is an API key or a session token (from ``login``); ``transport``
    and ``sleep`` exist so tests can run against an in-process app and a manual clock.
    """

    def __init__(
        self,
        token: str | None = None,
        base_url: str = DEFAULT_API_URL,
        *,
        timeout: float = 60.0,
        max_retries: int = 3,
        max_retry_wait: float = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self._token = token
        self._sleep = sleep
        self._pause: asyncio.Future[None] | None = None
        self._pauses = 0  # pauses started so far
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            transport=transport,
            headers={"user-agent": "qday-client/0.1"},
        )

    def __repr__(self) -> str:
        return f"QdayClient(base_url={str(self._http.base_url)!r}, authenticated={self._token is not None})"

    async def __aenter__(self) -> QdayClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    # -- transport ---------------------------------------------------------

    async def _wait_for_window(self) -> None:
        pause = self._pause
        if pause is not None and not pause.done():
            await asyncio.shield(pause)

    def _pause_all(self, seconds: float, pauses_when_sent: int) -> None:
        """Start a pause unless one began after the refused request was sent
        (that pause already waits out the same window)."""
        if self._pauses == pauses_when_sent:
            self._pauses += 1
            self._pause = asyncio.ensure_future(self._sleep(seconds))

    async def _send(
        self, method: str, path: str, json: Any = None, params: dict[str, str] | None = None, token: str | None = None
    ) -> httpx.Response:
        headers = {}
        credential = token or self._token
        if credential:
            headers["authorization"] = f"Bearer {credential}"
        attempt = 0
        while True:
            await self._wait_for_window()
            pauses_when_sent = self._pauses
            try:
                response = await self._http.request(method, "/v1" + path, json=json, params=params, headers=headers)
            except httpx.HTTPError as exc:
                url = str(self._http.base_url).rstrip("/") + "/v1" + path  # the key is in a header, never here
                detail = f"{type(exc).__name__}: {exc or 'no answer'}"
                raise ConnectionFailed("NET", f"{method} /v1{path} failed: {detail} ({url})") from None
            log.debug("%s /v1%s -> %s (%s)", method, path, response.status_code, response.headers.get("x-request-id"))
            if response.status_code != 429 or attempt >= self.max_retries:
                return response
            attempt += 1
            self._pause_all(min(retry_after_seconds(response), self.max_retry_wait), pauses_when_sent)

    async def _call(
        self,
        method: str,
        path: str,
        result: type[T] | Any,
        json: Any = None,
        params: dict[str, str] | None = None,
        token: str | None = None,
    ) -> T:
        data, _ = await self._call_with_meta(method, path, result, json, params, token)
        return data

    async def _page(
        self, path: str, item: type[T], limit: int | None, cursor: str | None, token: str | None = None
    ) -> models.Page[T]:
        """One page of a list endpoint (``?limit=&cursor=``), with ``meta.nextCursor``."""
        params = _drop_none({"limit": None if limit is None else str(limit), "cursor": cursor})
        items: list[T]
        items, meta = await self._call_with_meta("GET", path, list[item], params=params or None, token=token)  # type: ignore[valid-type]  # item is a runtime type
        following = meta.get("nextCursor")
        return models.Page(items=items, next_cursor=following if isinstance(following, str) and following else None)

    async def _all_pages(self, path: str, item: type[T], page_size: int | None, token: str | None = None) -> list[T]:
        """Every item of a list endpoint, following ``meta.nextCursor`` page by page."""
        items: list[T] = []
        cursor: str | None = None
        while True:
            page = await self._page(path, item, page_size, cursor, token)
            items += page.items
            if page.next_cursor is None:
                return items
            if page.next_cursor == cursor:
                raise ServerError("SRV_001", f"GET /v1{path} returned the same cursor twice")
            cursor = page.next_cursor

    async def _call_with_meta(
        self,
        method: str,
        path: str,
        result: type[T] | Any,
        json: Any = None,
        params: dict[str, str] | None = None,
        token: str | None = None,
    ) -> tuple[T, dict[str, Any]]:
        response = await self._send(method, path, json, params, token)
        request_id = response.headers.get("x-request-id")
        try:
            body = _JSON.decode(response.content) if response.content else None
        except msgspec.DecodeError:
            body = None
        if response.status_code >= 400:
            raise error_from_response(response.status_code, body, request_id, retry_after_seconds(response))
        if result is None:
            return None, {}  # type: ignore[return-value]  # result=None means the caller expects no body
        if not isinstance(body, dict) or "data" not in body:
            raise ServerError(
                "SRV_001",
                f"HTTP {response.status_code} answer without a data envelope",
                status=response.status_code,
                request_id=request_id,
            )
        meta = body.get("meta")
        try:
            return msgspec.convert(body["data"], result), meta if isinstance(meta, dict) else {}
        except msgspec.ValidationError as exc:
            raise ServerError(
                "SRV_001",
                f"answer does not match the expected shape: {exc}",
                status=response.status_code,
                request_id=request_id,
            ) from None

    # -- service -----------------------------------------------------------

    async def health(self) -> models.Health:
        """GET /v1/health: liveness and version."""
        return await self._call("GET", "/health", models.Health)

    async def ready(self) -> models.Ready:
        """GET /v1/ready: whether the node's store takes reads and writes (``ServerError``
        ``SRV_002`` when it does not)."""
        return await self._call("GET", "/ready", models.Ready)

    async def openapi(self) -> dict[str, Any]:
        """GET /v1/openapi.json: the OpenAPI 3.1 document (not enveloped)."""
        response = await self._send("GET", "/openapi.json")
        if response.status_code != 200:
            raise error_from_response(response.status_code, None, response.headers.get("x-request-id"))
        return response.json()

    # -- accounts and API keys ---------------------------------------------

    async def register_account(self, email: str, password: str, name: str | None = None) -> models.Account:
        """POST /v1/auth/register: create an account (the password is sent, never kept)."""
        return await self._call(
            "POST", "/auth/register", models.Account, _drop_none({"email": email, "password": password, "name": name})
        )

    async def login(self, email: str, password: str) -> models.Login:
        """POST /v1/auth/login: a 12-hour session token for the API-key endpoints."""
        return await self._call("POST", "/auth/login", models.Login, {"email": email, "password": password})

    async def create_api_key(
        self,
        name: str,
        type: str = "secret",  # noqa: A002 - the API's field name
        environment: str = "test",
        token: str | None = None,
    ) -> models.CreatedApiKey:
        """POST /v1/auth/api-keys (session token or secret key); ``token`` overrides the client's."""
        return await self._call(
            "POST",
            "/auth/api-keys",
            models.CreatedApiKey,
            {"name": name, "type": type, "environment": environment},
            token=token,
        )

    async def list_api_keys(self, token: str | None = None, *, page_size: int | None = None) -> list[models.ApiKey]:
        """GET /v1/auth/api-keys: every key the credential may manage, oldest first (all
        pages, ``page_size`` at a time: 1-1000, default the server's 100)."""
        return await self._all_pages("/auth/api-keys", models.ApiKey, page_size, token)

    async def list_api_keys_page(
        self, limit: int | None = None, cursor: str | None = None, token: str | None = None
    ) -> models.Page[models.ApiKey]:
        """One page of GET /v1/auth/api-keys; pass its ``next_cursor`` for the next one."""
        return await self._page("/auth/api-keys", models.ApiKey, limit, cursor, token)

    async def delete_api_key(self, key_id: str, token: str | None = None) -> None:
        """DELETE /v1/auth/api-keys/{id}: revoke at once."""
        await self._call("DELETE", f"/auth/api-keys/{key_id}", None, token=token)

    async def rotate_api_key(self, key_id: str, token: str | None = None) -> models.RotatedApiKey:
        """POST /v1/auth/api-keys/{id}/rotate: a replacement; the old key works 24 h more."""
        return await self._call("POST", f"/auth/api-keys/{key_id}/rotate", models.RotatedApiKey, token=token)

    # -- post-quantum keys ---------------------------------------------------

    async def generate_key(
        self, algorithm: str, chain: str, custody: str = "self", private_key_form: str = "expanded"
    ) -> models.GeneratedKey | models.ManagedKey:
        """POST /v1/keys/generate: a server-generated pair (self custody) or a managed key;
        ``private_key_form="seed"`` returns ML-DSA private keys as the 32-byte seed (RFC 9881).
        Local generation (``qday_client.keyfile.generate``) never involves the server."""
        return await self._call(
            "POST",
            "/keys/generate",
            models.GeneratedKey | models.ManagedKey,
            {"algorithm": algorithm, "chain": chain, "custody": custody, "privateKeyForm": private_key_form},
        )

    async def registration_challenge(self, algorithm: str, public_key: str) -> models.RegistrationChallenge:
        """POST /v1/keys/register/challenge: text to sign to prove possession of a key."""
        return await self._call(
            "POST",
            "/keys/register/challenge",
            models.RegistrationChallenge,
            {"algorithm": algorithm, "publicKey": public_key},
        )

    async def register_key(
        self, algorithm: str, chain: str, public_key: str, challenge: str, signature: str
    ) -> models.PqKey:
        """POST /v1/keys/register: register a public key with its signature over the challenge."""
        return await self._call(
            "POST",
            "/keys/register",
            models.PqKey,
            {
                "algorithm": algorithm,
                "chain": chain,
                "publicKey": public_key,
                "challenge": challenge,
                "signature": signature,
            },
        )

    async def list_keys(self, *, page_size: int | None = None) -> list[models.PqKey]:
        """GET /v1/keys: every post-quantum public key registered in this environment,
        oldest first (all pages, ``page_size`` at a time)."""
        return await self._all_pages("/keys", models.PqKey, page_size)

    async def list_keys_page(self, limit: int | None = None, cursor: str | None = None) -> models.Page[models.PqKey]:
        """One page of GET /v1/keys; pass its ``next_cursor`` for the next one."""
        return await self._page("/keys", models.PqKey, limit, cursor)

    # -- attestations and verification ------------------------------------

    async def attestation_challenge(
        self, ecdsa_public_key: str, pqc_public_key: str, algorithm: str, chain: str = "ethereum"
    ) -> models.Statement:
        """POST /v1/attestations/challenge: a single-use statement for a strict attestation."""
        return await self._call(
            "POST",
            "/attestations/challenge",
            models.Statement,
            {
                "ecdsaPublicKey": ecdsa_public_key,
                "pqcPublicKey": pqc_public_key,
                "algorithm": algorithm,
                "chain": chain,
            },
        )

    async def sign_hybrid(
        self,
        *,
        message: str,
        ecdsa_signature: str,
        ecdsa_public_key: str,
        pqc_signature: str,
        pqc_public_key: str,
        algorithm: str,
        chain: str = "ethereum",
        ecdsa_scheme: str | None = None,
        context: str = "",
        strict: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> models.Attestation:
        """POST /v1/sign/hybrid: submit an ECDSA + ML-DSA signature pair (all byte fields hex)."""
        return await self._call(
            "POST",
            "/sign/hybrid",
            models.Attestation,
            _drop_none(
                {
                    "message": message,
                    "ecdsaSignature": ecdsa_signature,
                    "ecdsaPublicKey": ecdsa_public_key,
                    "pqcSignature": pqc_signature,
                    "pqcPublicKey": pqc_public_key,
                    "algorithm": algorithm,
                    "chain": chain,
                    "ecdsaScheme": ecdsa_scheme,
                    "context": context,
                    "strict": strict,
                    "metadata": metadata or {},
                }
            ),
        )

    async def verify_attestation(self, attestation_id: str) -> models.Verification:
        """POST /v1/verify {attestationId}: re-verify a stored attestation."""
        return await self._call("POST", "/verify", models.Verification, {"attestationId": attestation_id})

    async def verify_hybrid(
        self,
        *,
        message: str,
        ecdsa_signature: str,
        ecdsa_public_key: str,
        pqc_signature: str,
        pqc_public_key: str,
        algorithm: str,
        chain: str | None = None,
        ecdsa_scheme: str | None = None,
        context: str | None = None,
    ) -> models.Verification:
        """POST /v1/verify with raw hybrid components (no registration check, nothing stored)."""
        return await self._call(
            "POST",
            "/verify",
            models.Verification,
            _drop_none(
                {
                    "message": message,
                    "ecdsaSignature": ecdsa_signature,
                    "ecdsaPublicKey": ecdsa_public_key,
                    "pqcSignature": pqc_signature,
                    "pqcPublicKey": pqc_public_key,
                    "algorithm": algorithm,
                    "chain": chain,
                    "ecdsaScheme": ecdsa_scheme,
                    "context": context,
                }
            ),
        )

    async def verify_signature(
        self, *, public_key: str, message: str, signature: str, algorithm: str, context: str | None = None
    ) -> models.Verification:
        """POST /v1/verify {public_key, message, signature, algorithm}: one ML-DSA/SLH-DSA signature."""
        return await self._call(
            "POST",
            "/verify",
            models.Verification,
            _drop_none(
                {
                    "public_key": public_key,
                    "message": message,
                    "signature": signature,
                    "algorithm": algorithm,
                    "context": context,
                }
            ),
        )

    # -- managed custody -----------------------------------------------------

    async def sign_managed(
        self,
        key_id: str,
        message: str,
        algorithm: str,
        context: str = "",
    ) -> models.ManagedSignature:
        """POST /v1/sign/managed: sign hex ``message`` with a key held by the service."""
        return await self._call(
            "POST",
            "/sign/managed",
            models.ManagedSignature,
            {"key_id": key_id, "message": message, "algorithm": algorithm, "context": context},
        )

    async def managed_key(self, key_id: str) -> models.ManagedKey:
        """GET /v1/keys/{id}: a managed key in any state."""
        return await self._call("GET", f"/keys/{key_id}", models.ManagedKey)

    async def delete_managed_key(self, key_id: str) -> models.ManagedKey:
        """DELETE /v1/keys/{id}: schedule destruction (7-day waiting period)."""
        return await self._call("DELETE", f"/keys/{key_id}", models.ManagedKey)

    async def cancel_key_deletion(self, key_id: str) -> models.ManagedKey:
        """POST /v1/keys/{id}/cancel-deletion: back to active."""
        return await self._call("POST", f"/keys/{key_id}/cancel-deletion", models.ManagedKey)

    async def key_events(self, key_id: str, *, page_size: int | None = None) -> list[models.KeyEvent]:
        """GET /v1/keys/{id}/events: the key's whole audit log, oldest first (all pages)."""
        return await self._all_pages(f"/keys/{key_id}/events", models.KeyEvent, page_size)

    async def key_events_page(
        self, key_id: str, limit: int | None = None, cursor: str | None = None
    ) -> models.Page[models.KeyEvent]:
        """One page of GET /v1/keys/{id}/events; pass its ``next_cursor`` for the next one."""
        return await self._page(f"/keys/{key_id}/events", models.KeyEvent, limit, cursor)

    async def usage(self, month: str | None = None) -> models.Usage:
        """GET /v1/usage[?month=YYYY-MM]: managed-custody usage in this environment."""
        return await self._call("GET", "/usage", models.Usage, params={"month": month} if month else None)

    # -- scans and watch list ------------------------------------------------

    async def scan_wallet(self, address: str, chain: str | None = None, refresh: bool = False) -> models.WalletScan:
        """POST /v1/scan/wallet: the address's quantum-risk score (publishable or secret key)."""
        return await self._call(
            "POST",
            "/scan/wallet",
            models.WalletScan,
            _drop_none({"address": address, "chain": chain, "refresh": refresh or None}),
        )

    async def scan_key(self, public_key: str, chains: list[str] | None = None, refresh: bool = False) -> models.KeyScan:
        """POST /v1/scan/key: every address and output of a public key (hex), one verdict."""
        return await self._call(
            "POST",
            "/scan/key",
            models.KeyScan,
            _drop_none({"publicKey": public_key, "chains": chains, "refresh": refresh or None}),
        )

    async def scan_descriptor(
        self, descriptor: str, chain: str = "bitcoin", gap_limit: int = 20
    ) -> models.DescriptorScan:
        """POST /v1/scan/descriptor: a whole wallet from its descriptor or extended public key
        (secret key): every used address's verdict, its coins and the totals. A private key in
        ``descriptor`` is refused here (``LocalError``) before anything is sent."""
        refuse_private_keys(descriptor, "the descriptor")
        return await self._call(
            "POST",
            "/scan/descriptor",
            models.DescriptorScan,
            {"descriptor": descriptor, "chain": chain, "gapLimit": gap_limit},
        )

    async def plan_migration(
        self,
        descriptor: str,
        destination: str,
        fee_rate: float | None = None,
        max_per_address_sat: int | None = None,
        gap_limit: int = 20,
    ) -> models.MigrationPlan:
        """POST /v1/plan/migration: unsigned PSBTs moving the wallet's coins to fresh addresses of
        ``destination``, exposed coins first (secret key). ``fee_rate`` (sat/vB) and
        ``max_per_address_sat`` default to the server's; private keys are refused as by
        ``scan_descriptor``."""
        refuse_private_keys(descriptor, "the descriptor")
        refuse_private_keys(destination, "the destination")
        return await self._call(
            "POST",
            "/plan/migration",
            models.MigrationPlan,
            _drop_none(
                {
                    "descriptor": descriptor,
                    "destination": destination,
                    "feeRate": fee_rate,
                    "maxPerAddressSat": max_per_address_sat,
                    "gapLimit": gap_limit,
                }
            ),
        )

    async def detect_chains(self, address: str) -> models.Detection:
        """POST /v1/scan/detect: every chain the address may belong to."""
        return await self._call("POST", "/scan/detect", models.Detection, {"address": address})

    async def watch(self, address: str, chain: str | None = None, label: str | None = None) -> models.Watched:
        """POST /v1/watchlist: rescore the address daily (idempotent)."""
        return await self._call(
            "POST", "/watchlist", models.Watched, _drop_none({"address": address, "chain": chain, "label": label})
        )

    async def watchlist(self, *, page_size: int | None = None) -> list[models.Watched]:
        """GET /v1/watchlist: every watched address, oldest first (all pages, ``page_size``
        at a time)."""
        return await self._all_pages("/watchlist", models.Watched, page_size)

    async def watchlist_page(self, limit: int | None = None, cursor: str | None = None) -> models.Page[models.Watched]:
        """One page of GET /v1/watchlist; pass its ``next_cursor`` for the next one."""
        return await self._page("/watchlist", models.Watched, limit, cursor)

    async def unwatch(self, entry_id: str) -> None:
        """DELETE /v1/watchlist/{id}."""
        await self._call("DELETE", f"/watchlist/{entry_id}", None)

    async def watch_descriptor(
        self, descriptor: str, label: str | None = None, gap_limit: int = 20
    ) -> models.WatchedDescriptor:
        """POST /v1/watchlist/descriptors: scan the wallet now and rescore it daily
        (idempotent). Private keys are refused here, before anything is sent."""
        refuse_private_keys(descriptor, "the descriptor")
        body = _drop_none({"descriptor": descriptor, "label": label, "gapLimit": gap_limit})
        return await self._call("POST", "/watchlist/descriptors", models.WatchedDescriptor, body)

    async def watched_descriptors(self, *, page_size: int | None = None) -> list[models.WatchedDescriptor]:
        """GET /v1/watchlist/descriptors: every watched wallet with its latest summary (all pages)."""
        return await self._all_pages("/watchlist/descriptors", models.WatchedDescriptor, page_size)

    async def unwatch_descriptor(self, entry_id: str) -> None:
        """DELETE /v1/watchlist/descriptors/{id}."""
        await self._call("DELETE", f"/watchlist/descriptors/{entry_id}", None)

    # -- webhooks ----------------------------------------------------------

    async def create_webhook(
        self, url: str, events: list[str], description: str | None = None
    ) -> models.WebhookWithSecret:
        """POST /v1/webhooks: a new endpoint for ``events`` (``key.exposed``,
        ``risk.changed``, ``balance.changed``); its secret is in this answer only."""
        body = _drop_none({"url": url, "events": events, "description": description})
        return await self._call("POST", "/webhooks", models.WebhookWithSecret, body)

    async def webhooks(self, *, page_size: int | None = None) -> list[models.Webhook]:
        """GET /v1/webhooks: every endpoint of this key's environment (all pages)."""
        return await self._all_pages("/webhooks", models.Webhook, page_size)

    async def delete_webhook(self, webhook_id: str) -> None:
        """DELETE /v1/webhooks/{id}."""
        await self._call("DELETE", f"/webhooks/{webhook_id}", None)

    async def rotate_webhook_secret(self, webhook_id: str) -> models.WebhookWithSecret:
        """POST /v1/webhooks/{id}/rotate-secret: a new secret (the old one signs too for 24 h)."""
        return await self._call("POST", f"/webhooks/{webhook_id}/rotate-secret", models.WebhookWithSecret)

    async def enable_webhook(self, webhook_id: str) -> models.Webhook:
        """POST /v1/webhooks/{id}/enable: turn an endpoint disabled after 24 h of failures on."""
        return await self._call("POST", f"/webhooks/{webhook_id}/enable", models.Webhook)

    async def test_webhook(self, webhook_id: str) -> models.WebhookPing:
        """POST /v1/webhooks/{id}/test: send a ``ping`` now and report its first attempt."""
        return await self._call("POST", f"/webhooks/{webhook_id}/test", models.WebhookPing)

    async def webhook_deliveries(self, webhook_id: str, *, page_size: int | None = None) -> list[models.Delivery]:
        """GET /v1/webhooks/{id}/deliveries: every delivery with its attempts (all pages)."""
        return await self._all_pages(f"/webhooks/{webhook_id}/deliveries", models.Delivery, page_size)

    async def webhook_signing_key(self) -> models.SigningKey:
        """GET /v1/webhooks/signing-key: the ML-DSA-65 public key for ``verify_webhook``."""
        return await self._call("GET", "/webhooks/signing-key", models.SigningKey)
