"""Outbound webhook requests: one POST to a URL a tenant chose, without letting that URL
reach what only the service can reach (SSRF).

Threat model. A tenant registers any URL and the service POSTs to it from inside its own
network, again and again, and shows the tenant the status and the start of each answer.
Unguarded, that makes the service a proxy into its network: the cloud metadata service
(instance credentials at 169.254.169.254), admin ports on loopback, databases and other
services on private addresses. The attacker controls the URL, the DNS answers for its
name (which may change between the check and the connect: DNS rebinding) and the server
that answers (which may redirect, hang, or send without end). So:

- Only https, no ``user:password@``, a port of 1-65535, a host that is an IP literal or a
  valid IDNA name, at most 2048 characters. Numeric hosts other than dotted quads
  (``127.1``, ``0x7f.1``, ``2130706433``, which ``inet_aton`` reads as 127.0.0.1) and
  IPv6 zone ids are refused. The request URL is rebuilt from this parse, so no other
  parser's reading of the URL matters.
- Every address the name resolves to is checked, and one refused address refuses the
  URL: private, loopback, link-local, shared (CGNAT), documentation, benchmarking,
  reserved, multicast, unspecified and every other address ``ipaddress`` calls not
  global. An IPv6 address that carries an IPv4 one (mapped ``::ffff:a.b.c.d``,
  compatible ``::a.b.c.d``, SIIT ``::ffff:0:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4
  ``2002::/16``) is judged by that IPv4 address, the one it reaches.
- The connection goes to the address that was checked: the request URL carries the IP,
  while the ``Host`` header, the TLS SNI and the certificate check carry the name. The
  name is not resolved again between check and connect.
- Every request says ``Connection: close``: the client pools connections by IP and port,
  and a pooled connection could otherwise carry a request for another name whose
  certificate it never checked.
- No redirects (a 3xx is a failed attempt); one deadline per attempt covering resolution,
  connect, send and read; a body of at most 256 KiB; at most 4 KiB of an answer kept (the
  start of an error's body, never decompressed), then the connection is closed. The
  transport reads the socket in chunks of up to 64 KiB, so that much may arrive first.
- The client (``new_client``) takes nothing from the environment (``trust_env=False``: no
  proxies from ``HTTPS_PROXY``, no ``.netrc``; ``post`` refuses a client that does) and
  keeps no cookies (a receiver's cookies would go to the next receiver on its IP).

``allow_private`` (``QDAY_WEBHOOK_ALLOW_PRIVATE``, off by default, for development and
tests) allows http and every non-global address except the cloud metadata addresses,
unspecified addresses (``0.0.0.0/8``, ``::``) and multicast, which are always refused.
Errors never quote the URL (its path or query may hold a receiver's token), only the
reason and the address.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import Protocol
from urllib.parse import urlsplit

import httpx
import idna

from core.errors import DomainError

MAX_URL_LENGTH = 2048
MAX_BODY_BYTES = 256 * 1024
#: The most of an answer's body read, for the text of a failed attempt.
MAX_RESPONSE_BYTES = 4096
#: The most of that body quoted in ``PostResult.error``.
ERROR_TEXT_CHARS = 200
DEFAULT_TIMEOUT_SECONDS = 10.0

IPAddress = IPv4Address | IPv6Address

_DEFAULT_PORTS = {"https": 443, "http": 80}
#: Always refused, ``allow_private`` or not: where instance credentials are served.
_METADATA = frozenset(
    ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean
        "fd00:ec2::254",  # AWS over IPv6
        "169.254.170.2",  # AWS ECS task credentials
        "169.254.170.23",  # AWS EKS Pod Identity
        "fd00:ec2::23",  # AWS EKS Pod Identity over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure WireServer (a public address)
    )
)
_THIS_NETWORK = IPv4Network("0.0.0.0/8")  # Linux connects 0.0.0.0 to the local host
#: Refused unless ``allow_private``: (reason, description, networks), the first match wins.
_RANGES: tuple[tuple[str, str, tuple[IPv4Network | IPv6Network, ...]], ...] = (
    (
        "private",
        "private address",
        (
            IPv4Network("10.0.0.0/8"),
            IPv4Network("172.16.0.0/12"),
            IPv4Network("192.168.0.0/16"),
            IPv6Network("fc00::/7"),
            IPv6Network("fec0::/10"),  # site-local, deprecated; ipaddress calls it global
        ),
    ),
    ("shared", "shared (CGNAT) address", (IPv4Network("100.64.0.0/10"),)),
    (
        "documentation",
        "documentation address",
        (
            IPv4Network("192.0.2.0/24"),
            IPv4Network("198.51.100.0/24"),
            IPv4Network("203.0.113.0/24"),
            IPv6Network("2001:db8::/32"),
            IPv6Network("3fff::/20"),  # RFC 9637; ipaddress (3.11) calls it global
        ),
    ),
    ("benchmarking", "benchmarking address", (IPv4Network("198.18.0.0/15"), IPv6Network("2001:2::/48"))),
    # IETF protocol assignments; ipaddress (3.11) calls most of it global
    ("reserved", "reserved address", (IPv4Network("192.0.0.0/24"),)),
)
#: IPv6 prefixes whose last 32 bits are an IPv4 address: SIIT (RFC 7915), NAT64 (RFC 6052).
_EMBEDS_LAST_32_BITS = (IPv6Network("::ffff:0:0:0/96"), IPv6Network("64:ff9b::/96"))
_IPV4_COMPATIBLE = IPv6Network("::/96")  # deprecated; :: and ::1 are themselves
_AUTHORITY = re.compile(r"(?P<host>\[[^\[\]]*\]|[^\[\]:]*)(?::(?P<port>.*))?", re.DOTALL)
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")


class UnsafeDestination(DomainError):
    """A URL the service will not send to. ``details['reason']`` says why: ``length``,
    ``syntax``, ``scheme``, ``userinfo``, ``host``, ``port``, ``unresolved``, or the class
    of a refused ``details['address']`` (``metadata``, ``unspecified``, ``multicast``,
    ``loopback``, ``link_local``, ``private``, ``shared``, ``documentation``,
    ``benchmarking``, ``reserved``, ``not_global``). The message never quotes the URL."""


def _refuse(reason: str, why: str, address: str | None = None) -> UnsafeDestination:
    return UnsafeDestination(f"refused destination: {why}", field="url", reason=reason, address=address)


class Resolver(Protocol):
    """Name resolution, injectable so tests can point a name at any address."""

    async def resolve(self, host: str, port: int) -> list[str]:
        """The IP addresses (text) ``host`` resolves to for TCP to ``port``."""
        ...


class SystemResolver:
    """The operating system's resolver (``getaddrinfo``, run off the event loop)."""

    async def resolve(self, host: str, port: int) -> list[str]:
        """Every IPv4 and IPv6 address of ``host``, in the resolver's order, once each."""
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        families = (socket.AF_INET, socket.AF_INET6)
        return list(dict.fromkeys(str(info[4][0]) for info in infos if info[0] in families))


@dataclass(frozen=True, slots=True)
class Destination:
    """A checked URL: ``host`` is the name as sent (ASCII, IDNA-encoded) or an IP literal
    (no brackets), ``address`` the checked IP the connection goes to."""

    scheme: str
    host: str
    port: int
    path_and_query: str
    address: str

    @property
    def host_header(self) -> str:
        """The ``Host`` header: the name, with the port when it is not the default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == _DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def request_url(self) -> str:
        """The URL requested: the checked address in place of the name (pinned)."""
        address = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.scheme}://{address}:{self.port}{self.path_and_query}"


@dataclass(frozen=True, slots=True)
class _Parsed:
    scheme: str
    host: str
    port: int
    path_and_query: str
    literal: IPAddress | None


@dataclass(frozen=True, slots=True)
class PostResult:
    """One attempt: the answer's status (None when none came), the time it took, and
    None for a 2xx or else a short, readable reason."""

    status: int | None
    latency_ms: float
    error: str | None


def _embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 one carries (and reaches through a translator), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in net for net in _EMBEDS_LAST_32_BITS) or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _verdict(address: IPAddress, allow_private: bool) -> tuple[str, str] | None:
    """(reason, description) when ``address`` is refused; None when it may be used."""
    if address in _METADATA:
        return "metadata", "cloud metadata address"
    if address.is_unspecified or address in _THIS_NETWORK:
        return "unspecified", "unspecified address"
    if address.is_multicast:
        return "multicast", "multicast address"
    if allow_private:
        return None
    if address.is_loopback:
        return "loopback", "loopback address"
    if address.is_link_local:
        return "link_local", "link-local address"
    for reason, description, networks in _RANGES:
        if any(address in net for net in networks):
            return reason, description
    if address.is_reserved:
        return "reserved", "reserved address"
    if not address.is_global:
        return "not_global", "non-global address"
    return None


def _check_address(address: IPAddress, allow_private: bool) -> None:
    """Raise ``UnsafeDestination`` when ``address`` (or the IPv4 it carries) is refused."""
    judged: IPAddress = address
    if isinstance(address, IPv6Address):
        judged = _embedded_ipv4(address) or address
    verdict = _verdict(judged, allow_private)
    if verdict is not None:
        reason, description = verdict
        carried = "" if judged is address else f" (in {address})"
        raise _refuse(reason, f"{description} {judged}{carried}", str(address))


def _host(text: str) -> tuple[str, IPAddress | None]:
    """The host as sent (IDNA A-labels, lower case) and its address when it is a literal."""
    if text.startswith("["):
        try:
            literal = IPv6Address(text[1:-1])
        except ValueError:
            raise _refuse("host", "bracketed host is not an IPv6 address") from None
        if literal.scope_id is not None:
            raise _refuse("host", "IPv6 zone ids are not allowed")
        return str(literal), literal
    try:
        host = idna.encode(text, uts46=True).decode("ascii")
    except UnicodeError:  # idna.IDNAError and its subclasses
        raise _refuse("host", "host is not a valid IDNA name") from None
    try:
        literal4 = IPv4Address(host)  # also what UTS 46 maps full-width digits to
    except ValueError:
        if _NUMERIC_LABEL.fullmatch(host.rstrip(".").rsplit(".", 1)[-1]):
            raise _refuse("host", "a numeric host must be a dotted-quad IPv4 address") from None
        return host, None
    return str(literal4), literal4


def _parse(url: str, allow_private: bool) -> _Parsed:
    """The parts of ``url`` the request is rebuilt from; ``UnsafeDestination`` if malformed."""
    if len(url) > MAX_URL_LENGTH:
        raise _refuse("length", f"URL is longer than {MAX_URL_LENGTH} characters")
    if any(c.isspace() or not c.isprintable() for c in url):  # urlsplit would drop some silently
        raise _refuse("syntax", "URL contains spaces or control characters")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise _refuse("syntax", "URL is malformed") from None
    if parts.scheme not in (("https", "http") if allow_private else ("https",)):
        raise _refuse("scheme", "only https URLs are allowed" if not allow_private else "only http(s) URLs are allowed")
    if "@" in parts.netloc:
        raise _refuse("userinfo", "URL carries a user name or password")
    authority = _AUTHORITY.fullmatch(parts.netloc)
    if authority is None or not authority["host"]:
        raise _refuse("host", "URL has no host")
    port_text: str | None = authority["port"]
    port = _DEFAULT_PORTS[parts.scheme]
    if port_text is not None:
        if not (port_text.isascii() and port_text.isdigit() and 1 <= int(port_text) <= 65535):
            raise _refuse("port", "port must be a number from 1 to 65535")
        port = int(port_text)
    host, literal = _host(authority["host"])
    path_and_query = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Parsed(parts.scheme, host, port, path_and_query, literal)


def check_url_syntax(url: str, *, allow_private: bool) -> None:
    """Refuse (``UnsafeDestination``) what is wrong with ``url`` without resolving it:
    scheme, user info, host, port, length, a refused IP literal. Cheap; for input checks."""
    parsed = _parse(url, allow_private)
    if parsed.literal is not None:
        _check_address(parsed.literal, allow_private)


async def _resolve(resolver: Resolver, host: str, port: int) -> list[IPAddress]:
    try:
        # An IPv6 zone (``fe80::1%eth0``) is dropped: the address is checked, and used, without it.
        addresses = [ip_address(a.split("%", 1)[0]) for a in await resolver.resolve(host, port)]
    except (OSError, ValueError):  # socket.gaierror; a resolver's answer that is no IP
        addresses = []
    if not addresses:
        raise _refuse("unresolved", "host does not resolve")
    return addresses


async def check_destination(url: str, *, allow_private: bool, resolver: Resolver | None = None) -> Destination:
    """``url`` parsed, resolved and checked, with the address to connect to: the first one
    resolved, and only if none is refused (``UnsafeDestination`` otherwise). Done when a
    webhook is made and again before every attempt, since names change what they resolve to."""
    parsed = _parse(url, allow_private)
    if parsed.literal is not None:
        addresses: list[IPAddress] = [parsed.literal]
    else:
        addresses = await _resolve(resolver or SystemResolver(), parsed.host, parsed.port)
    for address in addresses:
        _check_address(address, allow_private)
    return Destination(parsed.scheme, parsed.host, parsed.port, parsed.path_and_query, str(addresses[0]))


def new_client(*, verify: ssl.SSLContext | bool = True, max_connections: int = 50) -> httpx.AsyncClient:
    """The client ``post`` is meant for: no redirects, nothing from the environment (no
    proxies, no ``.netrc``), no cookies kept, no kept-alive connections, HTTP/1.1."""
    return httpx.AsyncClient(
        verify=verify,
        follow_redirects=False,
        trust_env=False,
        cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=0),
    )


def _request(destination: Destination, body: bytes, headers: Mapping[str, str], timeout: float) -> httpx.Request:
    """The POST to the pinned address, with the name in ``Host`` and in the TLS handshake.
    Built as a bare ``httpx.Request``: no client defaults, no cookies, no base URL."""
    sent = httpx.Headers(headers)
    for name in ("Content-Length", "Transfer-Encoding"):  # httpx sets the length of ``body``
        sent.pop(name, None)
    sent["Host"] = destination.host_header
    sent["Connection"] = "close"
    sent["Accept-Encoding"] = "identity"
    extensions = {"sni_hostname": destination.host, "timeout": httpx.Timeout(timeout).as_dict()}
    return httpx.Request("POST", destination.request_url, headers=sent, content=body, extensions=extensions)


def _clean(text: str) -> str:
    """``text`` on one line, without control characters (it is logged and shown)."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


async def _failure(response: httpx.Response) -> str | None:
    """None for a 2xx; otherwise the reason, with the start of an error's body."""
    status = response.status_code
    if 200 <= status < 300:
        return None
    if 300 <= status < 400:
        return f"redirect refused (HTTP {status})"
    start = bytearray()
    async for chunk in response.aiter_raw():  # raw: an answer is never decompressed
        start += chunk[: MAX_RESPONSE_BYTES - len(start)]
        if len(start) >= MAX_RESPONSE_BYTES:
            break
    text = _clean(start.decode("utf-8", "replace"))[:ERROR_TEXT_CHARS]
    return f"HTTP {status}: {text}" if text else f"HTTP {status}"


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it, exception groups opened, each once."""
    pending, seen = [exc], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)


def _describe(exc: BaseException) -> str:
    """A short reason for a failed connection or exchange."""
    for cause in _causes(exc):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, ssl.SSLCertVerificationError):
            return _clean(f"TLS certificate verification failed: {cause.verify_message}")[:ERROR_TEXT_CHARS]
        if isinstance(cause, ssl.SSLError):
            return _clean(f"TLS error: {cause.reason or cause}")[:ERROR_TEXT_CHARS]
    if isinstance(exc, httpx.ConnectError):
        label = "connection failed"
    elif isinstance(exc, httpx.RemoteProtocolError):
        label = "bad answer"
    else:
        label = "network error"
    detail = _clean(str(exc))
    return f"{label}: {detail}"[:ERROR_TEXT_CHARS] if detail else label


async def post(
    client: httpx.AsyncClient,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    allow_private: bool,
    resolver: Resolver | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> PostResult:
    """POST ``body`` to ``url`` once, checked and pinned as the module says, within
    ``timeout`` seconds in all. Never raises for a refused destination, a network or an
    HTTP failure: the result says what happened. ``client`` should come from
    ``new_client``; one that trusts the environment (proxies) is a ``ValueError``."""
    if client.trust_env:
        raise ValueError("the outbound client must be made with trust_env=False (see services.outbound.new_client)")
    started = time.perf_counter()
    status: int | None = None
    error: str | None
    if len(body) > MAX_BODY_BYTES:
        error = f"request body too large ({len(body)} bytes; at most {MAX_BODY_BYTES})"
    else:
        try:
            async with asyncio.timeout(timeout):
                destination = await check_destination(url, allow_private=allow_private, resolver=resolver)
                request = _request(destination, body, headers, timeout)
                response = await client.send(request, stream=True, follow_redirects=False)
                try:
                    status = response.status_code
                    error = await _failure(response)
                finally:
                    await response.aclose()
        except UnsafeDestination as exc:
            error = exc.message
        except (TimeoutError, httpx.TimeoutException):
            error = f"timeout after {timeout:g} s"
        except (httpx.HTTPError, OSError) as exc:
            error = _describe(exc)
    return PostResult(status, (time.perf_counter() - started) * 1000, error)
