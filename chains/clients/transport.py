"""Resilient reads from one upstream endpoint: deadlines, bounded retries, circuit breaker.

``Resilience`` runs one logical read as a series of attempts. Each attempt has a deadline
(the endpoint's timeout, cut to what is left of the retry budget). A failed attempt is
retried only when it is worth it: connection errors, timeouts, 5xx and 429 answers of an
idempotent read. Backoff is exponential with full jitter, and ``Retry-After`` is honoured
when it fits the budget. Each attempt asks the endpoint's ``CircuitBreaker`` first.
``Transport`` applies this to HTTP requests that return JSON. The Solana client wraps
solana-py calls in the same ``Resilience``.

Every failure becomes ``ChainUnavailable`` (SCAN_004), whose message names the chain and
the redacted endpoint, never a credential. Undecodable JSON is ``MalformedChainData``.
JSON is decoded with integers kept exact and fractions as ``Decimal``, never float.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import httpx

from chains.clients.breaker import CircuitBreaker
from chains.endpoints import EndpointConfig
from chains.errors import ChainError, ChainUnavailable, MalformedChainData

T = TypeVar("T")

_RETRY_STATUSES = frozenset({429}) | frozenset(range(500, 600))


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Timing:
    """The clocks, sleep and randomness the clients use; tests inject fakes.

    ``monotonic`` drives deadlines and the breaker; ``now`` stamps observations;
    ``random`` draws the jitter in [0, 1).
    """

    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    random: Callable[[], float] = random.random
    monotonic: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = field(default=_utc_now)


class Retryable(Exception):
    """An attempt failed in a way worth retrying (raised inside ``Resilience.run`` only)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        """``reason`` is safe to show (no URL); ``retry_after`` is the server's hint in seconds."""
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class _SharedDeadline:
    """The deadline of every read inside one ``shared_deadline`` block (set by the first)."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at: float | None = None


_SHARED_DEADLINE: ContextVar[_SharedDeadline | None] = ContextVar("qday_shared_deadline", default=None)


@contextmanager
def shared_deadline() -> Iterator[None]:
    """Make the reads inside the block share one retry budget.

    The first read fixes the deadline at its start plus its endpoint's ``retry_budget``;
    later reads (an EVM signer's key-recovery batches, Esplora history pages) get only
    what is left of it. A scan uses this so that an endpoint answering each request just
    within its timeout cannot stretch one scan to several budgets. Tasks started inside
    the block share it too.
    """
    token = _SHARED_DEADLINE.set(_SharedDeadline())
    try:
        yield
    finally:
        _SHARED_DEADLINE.reset(token)


class Resilience:
    """Retry policy, deadline and circuit breaker of one endpoint."""

    def __init__(self, config: EndpointConfig, label: str, timing: Timing) -> None:
        """``label`` names the endpoint in messages, e.g. ``"ethereum JSON-RPC http://host/***"``."""
        self.config = config
        self.label = label
        self.timing = timing
        self.breaker = CircuitBreaker(config.breaker, label, timing.monotonic)

    async def run(self, what: str, attempt: Callable[[float], Awaitable[T]], *, idempotent: bool = True) -> T:
        """Run ``attempt(timeout)`` until it succeeds or the policy gives up.

        ``attempt`` raises ``Retryable`` for a retryable failure, a ``ChainError`` for a
        final answer (recorded as a failure when it is a ``MalformedChainData``), or returns.
        A non-idempotent call is never retried. ``what`` (e.g. ``"GET /address/bc1q…"``)
        goes into the error message.
        """
        retry = self.config.retry
        start = self.timing.monotonic()
        deadline = start + retry.budget
        shared = _SHARED_DEADLINE.get()
        if shared is not None:
            if shared.at is None:
                shared.at = deadline
            deadline = min(deadline, shared.at)
        reason = "no time left of the shared retry budget"
        made = 0
        for number in range(retry.attempts):
            remaining = deadline - self.timing.monotonic()
            if remaining <= 0:
                break
            self.breaker.before_request()
            made += 1
            timeout = min(self.config.timeout, remaining)
            try:
                async with asyncio.timeout(timeout):
                    result = await attempt(timeout)
            except Retryable as exc:
                self.breaker.record_failure()
                reason = exc.reason
                retry_after = exc.retry_after
            except TimeoutError:
                self.breaker.record_failure()
                reason, retry_after = f"no answer within {timeout:.3g}s", None
            except MalformedChainData:
                self.breaker.record_failure()
                raise
            except ChainError:
                self.breaker.record_success()
                raise
            except BaseException:
                self.breaker.record_failure()  # cancelled: a stuck probe must not block the breaker
                raise
            else:
                self.breaker.record_success()
                return result
            if not idempotent or number + 1 == retry.attempts:
                break
            delay = self.timing.random() * min(retry.max_delay, retry.base_delay * 2**number)
            if retry_after is not None:
                delay = max(delay, retry_after)
            if self.timing.monotonic() + delay >= deadline:
                break
            await self.timing.sleep(delay)
        elapsed = self.timing.monotonic() - start
        raise ChainUnavailable(
            f"{self.label} unavailable: {what} failed after {made} attempt(s) in {elapsed:.1f}s: {reason}",
            endpoint=self.label,
            reason=reason,
            retry_after=round(self.breaker.cooldown_left(), 3) or None,
        )


def decode_json(content: bytes, label: str) -> Any:
    """Parse a JSON body keeping amounts exact: big integers as ``int``, fractions as ``Decimal``.

    Raises ``MalformedChainData`` naming ``label`` when the body is not JSON.
    """
    try:
        return json.loads(content, parse_float=Decimal)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        snippet = content[:60].decode("utf-8", "replace")
        raise MalformedChainData(
            f"{label} sent a body that is not JSON ({type(exc).__name__}): {snippet!r}", endpoint=label
        ) from None


def _encode(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Reply:
    """A decoded JSON answer and its HTTP status and headers."""

    status: int
    data: Any
    headers: httpx.Headers


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


class Transport:
    """JSON over HTTP to one endpoint, through ``Resilience``.

    The base URL may carry ``user:password@`` (sent as basic auth, never shown). Paths are
    joined to the base URL. ``http`` is shared between clients; when None the transport
    creates its own client and closes it in ``aclose``.
    """

    def __init__(
        self, config: EndpointConfig, http: httpx.AsyncClient | None, name: str, timing: Timing | None = None
    ) -> None:
        """``name`` says what the endpoint is (``"ethereum JSON-RPC"``); the redacted URL is added to it."""
        self.config = config
        self.label = f"{name} {config.redacted}"
        self.resilience = Resilience(config, self.label, timing or Timing())
        parts = urlsplit(config.url)
        netloc = parts.netloc.rpartition("@")[2]
        self._base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self._base_params = dict(parse_qsl(parts.query, keep_blank_values=True))
        self._auth = (parts.username or "", parts.password or "") if parts.username else None
        self._headers = {"accept": "application/json", **config.headers}
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient()

    @property
    def timing(self) -> Timing:
        """The clocks this transport runs on."""
        return self.resilience.timing

    async def _attempt(
        self,
        method: str,
        path: str,
        body: bytes | None,
        params: Mapping[str, Any] | None,
        accept: frozenset[int],
        timeout: float,
    ) -> Reply:
        headers = self._headers if body is None else {**self._headers, "content-type": "application/json"}
        try:
            response = await self._http.request(
                method,
                self._base + path,
                content=body,
                params={**self._base_params, **(params or {})},
                headers=headers,
                auth=self._auth or httpx.USE_CLIENT_DEFAULT,
                timeout=timeout,
            )
        except httpx.TimeoutException as exc:
            raise Retryable(f"{type(exc).__name__} after {timeout:.3g}s") from None
        except httpx.TransportError as exc:
            raise Retryable(type(exc).__name__ + (f" ({exc})" if str(exc) and "://" not in str(exc) else "")) from None
        status = response.status_code
        if status not in accept:
            if status in _RETRY_STATUSES:
                raise Retryable(f"HTTP {status}", _retry_after(response.headers))
            raise ChainUnavailable(
                f"{self.label} refused {method} {path or '/'}: HTTP {status}"
                + (" (check the endpoint's credentials)" if status in (401, 403) else ""),
                endpoint=self.label,
                status=status,
            )
        return Reply(status, decode_json(response.content, self.label), response.headers)

    async def request(
        self,
        method: str,
        path: str = "",
        *,
        payload: Any = None,
        params: Mapping[str, Any] | None = None,
        accept: frozenset[int] = frozenset({200}),
        idempotent: bool = True,
    ) -> Reply:
        """Send one request (JSON ``payload`` if given) and decode the JSON answer.

        ``payload`` may be bytes already encoded as JSON. A status outside ``accept`` is
        retried when it is 5xx or 429, and is a ``ChainUnavailable`` otherwise. Every read
        here is idempotent; pass ``idempotent=False`` for a request that must not be sent twice.
        """
        body = payload if payload is None or isinstance(payload, bytes) else _encode(payload)
        return await self.resilience.run(
            f"{method} {path or '/'}",
            lambda timeout: self._attempt(method, path, body, params, accept, timeout),
            idempotent=idempotent,
        )

    async def get(
        self, path: str, *, params: Mapping[str, Any] | None = None, accept: frozenset[int] = frozenset({200})
    ) -> Reply:
        """GET ``path`` and decode its JSON (see ``request``)."""
        return await self.request("GET", path, params=params, accept=accept)

    async def post(self, path: str, payload: Any, *, accept: frozenset[int] = frozenset({200})) -> Reply:
        """POST a JSON read request (idempotent: JSON-RPC reads, Tron ``/wallet/*`` queries)."""
        return await self.request("POST", path, payload=payload, accept=accept)

    async def aclose(self) -> None:
        """Close the HTTP client if this transport created it."""
        if self._owns_http:
            await self._http.aclose()
