"""Delivering the outbox: claim due deliveries, sign, POST, record, retry with backoff.

At least once: a delivery leaves the outbox only when an attempt is recorded as a 2xx, so
a worker killed between sending and recording sends it again later (receivers drop
repeats by ``Qday-Event-Id``). Claims are leases (``LEASE_FACTOR`` × the timeout): a dead worker's claims
lapse and any node's worker takes them. Every node of the API runs one loop.

Retries: the n-th failed attempt waits ``retry_base × 2^(n-1)`` seconds (5 s by default),
at most an hour, for 24 hours after the event; then the delivery has failed. An endpoint
whose attempts have all failed for 24 hours is disabled (shown in ``GET /v1/webhooks``;
``POST /v1/webhooks/{id}/enable`` turns it back on) and its pending deliveries fail.
A delivery is never sent unsigned: without the signing key (custody down) the attempt
fails, is recorded, and is retried like any other.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timedelta

import httpx

from core.clock import Clock
from services.custody.errors import CustodyError
from services.offload import stop_task
from services.outbound import Resolver, post
from services.webhook_signing import WebhookSigner, delivery_headers, open_secret, signed_payload
from storage.sql_webhooks import SqlWebhookStore
from storage.webhook_records import ClaimedDelivery, DeliveryAttempt

log = logging.getLogger("qday.webhooks")

#: How long deliveries are retried after their event, and how long an endpoint may fail
#: before it is disabled.
RETRY_WINDOW = timedelta(hours=24)
#: The longest wait between two attempts.
MAX_BACKOFF_SECONDS = 3600.0
#: A claim lasts this many times the attempt timeout (at least 3 s): longer than an
#: attempt can take, signing included, and short enough that a dead worker's claims are
#: soon another's.
LEASE_FACTOR = 3.0
#: Deliveries claimed at a time, and attempts in flight at once, per worker.
BATCH = 32
#: Seconds between looks at the outbox when nothing woke the loop.
POLL_SECONDS = 1.0


def backoff_seconds(failed_attempts: int, retry_base: float) -> float:
    """The wait after the ``failed_attempts``-th failure: ``retry_base`` doubled each
    time, at most an hour."""
    return float(min(retry_base * 2 ** min(failed_attempts - 1, 30), MAX_BACKOFF_SECONDS))


class WebhookDeliverer:
    """Sends claimed deliveries and records each attempt; ``start`` runs it as a loop."""

    def __init__(
        self,
        store: SqlWebhookStore,
        signer: WebhookSigner,
        seal_key: bytes,
        clock: Clock,
        http: httpx.AsyncClient,
        *,
        allow_private: bool,
        retry_base: float,
        timeout: float,
        resolver: Resolver | None = None,
    ) -> None:
        self._store = store
        self._signer = signer
        self._seal_key = seal_key
        self._clock = clock
        self._http = http
        self._allow_private = allow_private
        self._retry_base = retry_base
        self._timeout = timeout
        self._resolver = resolver
        self._lease = timedelta(seconds=max(LEASE_FACTOR * timeout, 3.0))
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _secrets(self, claimed: ClaimedDelivery, now: datetime) -> list[str]:
        webhook = claimed.webhook
        secrets = [open_secret(self._seal_key, webhook.id, webhook.account_id, webhook.secret)]
        expires = webhook.previous_secret_expires_at
        if webhook.previous_secret is not None and expires is not None and now < expires:
            secrets.append(open_secret(self._seal_key, webhook.id, webhook.account_id, webhook.previous_secret))
        return secrets

    async def attempt(self, claimed: ClaimedDelivery) -> DeliveryAttempt:
        """One signed POST of a claimed delivery, recorded with what happens next."""
        now = self._clock.now()
        t = int(now.timestamp())
        number = claimed.delivery.attempts + 1
        started = time.perf_counter()
        status: int | None
        error: str | None
        try:
            mldsa = await self._signer.sign(signed_payload(t, claimed.body))
            headers = delivery_headers(claimed.delivery.event_id, t, claimed.body, self._secrets(claimed, now), mldsa)
        except CustodyError as exc:
            status, latency, error = None, (time.perf_counter() - started) * 1000, f"not sent: {exc}"
        else:
            result = await post(
                self._http,
                claimed.webhook.url,
                claimed.body,
                headers,
                allow_private=self._allow_private,
                resolver=self._resolver,
                timeout=self._timeout,
            )
            status, latency, error = result.status, result.latency_ms, result.error
        attempt = DeliveryAttempt(claimed.delivery.id, number, now, status, round(latency, 3), error)
        next_at: datetime | None = None
        disable: str | None = None
        if error is not None:
            retry_at = now + timedelta(seconds=backoff_seconds(number, self._retry_base))
            next_at = retry_at if retry_at < claimed.delivery.created_at + RETRY_WINDOW else None
            failing_since = claimed.webhook.failing_since or now
            if now - failing_since >= RETRY_WINDOW:
                disable = f"every delivery attempt failed for 24 hours (since {failing_since.isoformat()})"
        await self._store.record_attempt(attempt, next_at, disable)
        return attempt

    async def run_once(self) -> int:
        """Claim the deliveries due now (up to ``BATCH``) and attempt them concurrently; how
        many were claimed."""
        now = self._clock.now()
        claimed = await self._store.claim_due(now, now + self._lease, BATCH)
        if claimed:
            outcomes = await asyncio.gather(*(self.attempt(c) for c in claimed), return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, BaseException):  # its claim lapses and it is tried again
                    log.warning("webhook delivery attempt not recorded: %s", type(outcome).__name__)
        return len(claimed)

    async def deliver_now(self, delivery_id: str) -> DeliveryAttempt | None:
        """Attempt one delivery at once (a test ping); None when another worker holds it."""
        now = self._clock.now()
        claimed = await self._store.claim(delivery_id, now, now + self._lease)
        return None if claimed is None else await self.attempt(claimed)

    def wake(self) -> None:
        """Look at the outbox now rather than at the next poll (new events were written)."""
        self._wake.set()

    def start(self) -> None:
        """Run the delivery loop on the running event loop (once)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._forever())

    async def _forever(self) -> None:
        while True:
            self._wake.clear()  # a wake while this pass runs starts the next one at once
            try:
                busy = await self.run_once() >= BATCH
            except Exception as exc:  # noqa: BLE001 - the store is down: looked at again soon
                log.warning("webhook outbox not read: %s", type(exc).__name__)
                busy = False
            if not busy:
                try:
                    await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
                except TimeoutError:
                    pass

    async def aclose(self) -> None:
        """Stop the loop; attempts cut short are claimed again once their lease lapses."""
        await stop_task(self._task)
        self._task = None
