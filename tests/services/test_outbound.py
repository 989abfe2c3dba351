"""``services.outbound``: the SSRF checks on webhook URLs, and ``post`` against real
HTTP and TLS servers on 127.0.0.1 (a raw asyncio server written here, so the test sees
exactly which connections and requests arrive).

Names are pointed at addresses by an injected resolver; ``localhost`` goes through the
system's. A TLS server with a self-signed certificate for ``receiver.test`` shows the
connection goes to the pinned IP while SNI and the certificate check use the name.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from services.outbound import (
    MAX_BODY_BYTES,
    MAX_URL_LENGTH,
    UnsafeDestination,
    check_destination,
    check_url_syntax,
    new_client,
    post,
)

# (address, reason) refused when allow_private is False
REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("fec0::1", "private"),
    ("169.254.1.1", "link_local"),
    ("fe80::1", "link_local"),
    ("100.64.0.1", "shared"),
    ("100.127.255.254", "shared"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.1", "benchmarking"),
    ("2001:2::1", "benchmarking"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("192.0.0.8", "reserved"),
    ("192.0.0.170", "reserved"),
    ("198.19.0.1", "benchmarking"),
    ("2001::1", "not_global"),  # Teredo
    ("2001:10::1", "not_global"),  # ORCHID
    ("100::1", "reserved"),  # discard-only
    ("64:ff9b:1::a00:1", "reserved"),  # local-use NAT64
    # IPv6 forms that carry a refused IPv4 address: judged by it
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:10.0.0.1", "private"),
    ("::127.0.0.1", "loopback"),  # IPv4-compatible
    ("::ffff:0:192.168.0.1", "private"),  # SIIT
    ("64:ff9b::10.1.2.3", "private"),  # NAT64
    ("64:ff9b::127.0.0.1", "loopback"),
    ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
    ("2002:c0a8:101::", "private"),  # 6to4 of 192.168.1.1
    ("2002:6440:1::", "shared"),  # 6to4 of 100.64.0.1
]
# refused whatever allow_private says
ALWAYS_REFUSED = [
    ("169.254.169.254", "metadata"),
    ("fd00:ec2::254", "metadata"),
    ("100.100.100.200", "metadata"),
    ("169.254.170.2", "metadata"),
    ("168.63.129.16", "metadata"),
    ("::ffff:169.254.169.254", "metadata"),
    ("64:ff9b::169.254.169.254", "metadata"),
    ("2002:a9fe:a9fe::", "metadata"),
    ("::ffff:0:100.100.100.200", "metadata"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("::", "unspecified"),
    ("::ffff:0.0.0.0", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("ff02::1", "multicast"),
    ("ff0e::1", "multicast"),
    ("::ffff:224.0.0.251", "multicast"),
]
# allowed with allow_private=True
PRIVATE_ALLOWED = [
    "127.0.0.1",
    "::1",
    "10.0.0.1",
    "192.168.1.1",
    "fd12::1",
    "169.254.1.1",
    "100.64.0.1",
    "::ffff:127.0.0.1",
    "64:ff9b::a00:1",
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"]


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


class MapResolver:
    """Names to addresses from a dict; counts the look-ups."""

    def __init__(self, names: dict[str, list[str]]) -> None:
        self.names = names
        self.calls: list[tuple[str, int]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return list(self.names.get(host, []))


def _refusal(excinfo: pytest.ExceptionInfo[UnsafeDestination]) -> tuple[object, object]:
    return excinfo.value.details.get("reason"), excinfo.value.details.get("address")


# -- the address checks ----------------------------------------------------------------


@pytest.mark.parametrize(("address", "reason"), REFUSED + ALWAYS_REFUSED)
async def test_refused_addresses_as_literals_and_as_resolved_names(address: str, reason: str) -> None:
    with pytest.raises(UnsafeDestination) as literal:
        check_url_syntax(f"https://{_url_host(address)}/hook", allow_private=False)
    assert _refusal(literal) == (reason, str(literal.value.details["address"]))
    assert literal.value.message.startswith("refused destination: ")
    with pytest.raises(UnsafeDestination) as resolved:
        await check_destination(
            "https://receiver.test/hook", allow_private=False, resolver=MapResolver({"receiver.test": [address]})
        )
    assert _refusal(resolved)[0] == reason


@pytest.mark.parametrize(("address", "reason"), ALWAYS_REFUSED)
async def test_metadata_unspecified_and_multicast_are_refused_even_when_private_is_allowed(
    address: str, reason: str
) -> None:
    with pytest.raises(UnsafeDestination) as literal:
        check_url_syntax(f"http://{_url_host(address)}/hook", allow_private=True)
    assert _refusal(literal)[0] == reason
    with pytest.raises(UnsafeDestination) as resolved:
        await check_destination(
            "http://receiver.test/", allow_private=True, resolver=MapResolver({"receiver.test": [address]})
        )
    assert _refusal(resolved)[0] == reason


@pytest.mark.parametrize("address", PRIVATE_ALLOWED)
async def test_private_and_loopback_pass_when_private_is_allowed(address: str) -> None:
    check_url_syntax(f"http://{_url_host(address)}:8080/", allow_private=True)
    resolver = MapResolver({"receiver.test": [address]})
    destination = await check_destination("http://receiver.test:8080/", allow_private=True, resolver=resolver)
    assert ip_address(destination.address) == ip_address(address)


@pytest.mark.parametrize("address", PUBLIC)
async def test_public_addresses_pass(address: str) -> None:
    check_url_syntax(f"https://{_url_host(address)}/", allow_private=False)
    resolver = MapResolver({"receiver.test": [address]})
    destination = await check_destination("https://receiver.test/", allow_private=False, resolver=resolver)
    assert ip_address(destination.address) == ip_address(address)


async def test_one_refused_address_among_several_refuses_the_name() -> None:
    resolver = MapResolver({"receiver.test": ["8.8.8.8", "2606:4700:4700::1111", "10.0.0.1"]})
    with pytest.raises(UnsafeDestination) as excinfo:
        await check_destination("https://receiver.test/", allow_private=False, resolver=resolver)
    assert _refusal(excinfo) == ("private", "10.0.0.1")


async def test_localhost_through_the_system_resolver() -> None:
    with pytest.raises(UnsafeDestination) as excinfo:
        await check_destination("https://localhost/", allow_private=False)
    assert _refusal(excinfo)[0] == "loopback"
    destination = await check_destination("http://localhost:9/", allow_private=True)
    assert destination.address in ("127.0.0.1", "::1") and destination.host == "localhost"


async def test_a_name_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(UnsafeDestination) as excinfo:
        await check_destination("https://nowhere.test/", allow_private=False, resolver=MapResolver({}))
    assert _refusal(excinfo)[0] == "unresolved"
    bad = MapResolver({"receiver.test": ["not-an-ip"]})
    with pytest.raises(UnsafeDestination):
        await check_destination("https://receiver.test/", allow_private=False, resolver=bad)


# -- URL syntax --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://example.com/", "scheme"),
        ("ftp://example.com/", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("example.com/hook", "scheme"),
        ("https://user:pass@example.com/", "userinfo"),
        ("https://user@example.com/", "userinfo"),
        ("https://@example.com/", "userinfo"),
        ("https://example.com\\@10.0.0.1/", "userinfo"),
        ("https:///hook", "host"),
        ("https://:443/hook", "host"),
        ("https://example.com:0/", "port"),
        ("https://example.com:65536/", "port"),
        ("https://example.com:99999/", "port"),
        ("https://example.com:/", "port"),
        ("https://example.com:8o/", "port"),
        ("https://example.com:+443/", "port"),
        ("https://exa_mple.com/", "host"),
        ("https://-bad.example.com/", "host"),
        ("https://a..b.example/", "host"),
        ("https://xn--zz.example/", "host"),
        ("https://example.com\\evil.test/", "host"),
        ("https://127.1/", "host"),
        ("https://2130706433/", "host"),
        ("https://0x7f.0.0.1/", "host"),
        ("https://127.000.000.001/", "host"),
        ("https://1.2.3.4./", "host"),
        ("https://[example.com]/", "syntax"),
        ("https://[fe80::1%25eth0]/", "host"),
        ("https://exa\nmple.com/", "syntax"),
        ("https://example.com/\t", "syntax"),
        (" https://example.com/", "syntax"),
        ("https://example.com/a b", "syntax"),
        ("https://example.com/" + "a" * MAX_URL_LENGTH, "length"),
        ("https://１２７.０.０.１/", "loopback"),  # UTS 46 maps full-width digits to 127.0.0.1
    ],
)
def test_malformed_urls_are_refused_without_resolving(url: str, reason: str) -> None:
    with pytest.raises(UnsafeDestination) as excinfo:
        check_url_syntax(url, allow_private=False)
    assert _refusal(excinfo)[0] == reason
    assert excinfo.value.details["field"] == "url"


def test_plain_http_only_when_private_is_allowed() -> None:
    with pytest.raises(UnsafeDestination) as excinfo:
        check_url_syntax("http://example.com/hook", allow_private=False)
    assert _refusal(excinfo)[0] == "scheme"
    check_url_syntax("http://example.com/hook", allow_private=True)
    with pytest.raises(UnsafeDestination):
        check_url_syntax("https://user:pass@127.0.0.1/", allow_private=True)


def test_urls_up_to_the_length_limit_pass() -> None:
    url = "https://example.com/"
    check_url_syntax(url + "a" * (MAX_URL_LENGTH - len(url)), allow_private=False)


def test_refusals_never_quote_the_url() -> None:
    for url in ("https://alice:hunter2@example.com/", "https://10.0.0.1/hook?token=hunter2", "https://h.test:hunter2/"):
        with pytest.raises(UnsafeDestination) as excinfo:
            check_url_syntax(url, allow_private=False)
        assert "hunter2" not in str(excinfo.value) and "hunter2" not in repr(excinfo.value.details)


async def test_destination_parts() -> None:
    resolver = MapResolver({"xn--r8jz45g.jp": ["2606:4700:4700::1111"], "receiver.test": ["8.8.8.8"]})
    destination = await check_destination(
        "HTTPS://例え.JP/a/b?x=1&y=%20#fragment", allow_private=False, resolver=resolver
    )
    assert (destination.scheme, destination.host, destination.port) == ("https", "xn--r8jz45g.jp", 443)
    assert destination.path_and_query == "/a/b?x=1&y=%20"
    assert destination.host_header == "xn--r8jz45g.jp"
    assert destination.request_url == "https://[2606:4700:4700::1111]:443/a/b?x=1&y=%20"
    assert resolver.calls == [("xn--r8jz45g.jp", 443)]
    other = await check_destination("https://receiver.test:8443", allow_private=False, resolver=resolver)
    assert (other.host_header, other.request_url) == ("receiver.test:8443", "https://8.8.8.8:8443/")
    literal = await check_destination("https://[2606:4700:4700::1111]:8443/x", allow_private=False, resolver=resolver)
    assert literal.host_header == "[2606:4700:4700::1111]:8443" and len(resolver.calls) == 2


# -- post against real servers on 127.0.0.1 -------------------------------------------------

BIG = 10 * 1024 * 1024
FAIL_BODY = b"database on fire\r\n\x1b[31m" + b"x" * 1000


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """A raw HTTP/1.1 server on 127.0.0.1 answering by path; counts connections,
    records requests (and the TLS server names asked for)."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[Seen] = []
        self.server_names: list[str | None] = []
        self.release = asyncio.Event()
        self.big_done = asyncio.Event()
        self.big_sent = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self, tls: ssl.SSLContext | None = None) -> None:
        if tls is not None:
            tls.sni_callback = self._sni
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=tls)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.release.set()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _sni(self, _conn: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        self.server_names.append(name)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            request_line, *lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            headers = dict((n.strip().lower(), v.strip()) for n, v in (line.split(":", 1) for line in lines if line))
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            path = request_line.split(" ")[1]
            self.requests.append(Seen(path, headers, body))
            await self._answer(path, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def _answer(self, path: str, writer: asyncio.StreamWriter) -> None:
        if path == "/hang":
            await self.release.wait()
            return
        if path == "/big":
            # A small send buffer (no autotuning): what the kernels can hold is far below BIG.
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
            writer.write(f"HTTP/1.1 500 Internal Server Error\r\nContent-Length: {BIG}\r\n\r\n".encode())
            try:
                while self.big_sent < BIG:
                    writer.write(b"e" * 65536)
                    await writer.drain()
                    self.big_sent += 65536
            finally:
                self.big_done.set()
            return
        status, extra, body = {
            "/ok": ("200 OK", "", b"fine"),
            "/created": ("201 Created", "", b""),
            "/fail": ("500 Internal Server Error", "", FAIL_BODY),
            "/empty-fail": ("503 Service Unavailable", "", b""),
            "/redirect": ("302 Found", f"Location: http://127.0.0.1:{self.port}/target\r\n", b""),
            "/target": ("200 OK", "", b"reached"),
            "/cookie": ("200 OK", "Set-Cookie: session=abc; Path=/\r\n", b""),
        }.get(path.split("?")[0], ("404 Not Found", "", b"no"))
        head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    server = Receiver()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with new_client() as http:
        yield http


HEADERS = {"Content-Type": "application/json", "Qday-Event-Id": "evt_1"}


async def test_a_2xx_is_a_success_with_its_latency(receiver: Receiver, client: httpx.AsyncClient) -> None:
    result = await post(client, f"http://127.0.0.1:{receiver.port}/ok", b'{"a":1}', HEADERS, allow_private=True)
    assert (result.status, result.error) == (200, None) and result.latency_ms > 0
    created = await post(client, f"http://127.0.0.1:{receiver.port}/created", b"{}", HEADERS, allow_private=True)
    assert (created.status, created.error) == (201, None)
    seen = receiver.requests[0]
    assert (seen.path, seen.body, seen.headers["qday-event-id"]) == ("/ok", b'{"a":1}', "evt_1")
    assert seen.headers["host"] == f"127.0.0.1:{receiver.port}" and seen.headers["connection"] == "close"
    assert "cookie" not in seen.headers and receiver.connections == 2


async def test_an_error_status_comes_with_the_start_of_the_body(receiver: Receiver, client: httpx.AsyncClient) -> None:
    result = await post(client, f"http://127.0.0.1:{receiver.port}/fail", b"{}", HEADERS, allow_private=True)
    assert result.status == 500 and result.error is not None
    assert result.error == "HTTP 500: " + " ".join(FAIL_BODY.decode().replace("\x1b", " ").split())[:200]
    empty = await post(client, f"http://127.0.0.1:{receiver.port}/empty-fail", b"{}", HEADERS, allow_private=True)
    assert (empty.status, empty.error) == (503, "HTTP 503")


async def test_a_redirect_is_a_failure_and_is_not_followed(receiver: Receiver) -> None:
    async with httpx.AsyncClient(follow_redirects=True, trust_env=False) as following:  # post still refuses
        result = await post(following, f"http://127.0.0.1:{receiver.port}/redirect", b"{}", {}, allow_private=True)
    assert (result.status, result.error) == (302, "redirect refused (HTTP 302)")
    assert [r.path for r in receiver.requests] == ["/redirect"] and receiver.connections == 1


async def test_a_server_that_never_answers_is_a_timeout(receiver: Receiver, client: httpx.AsyncClient) -> None:
    url = f"http://127.0.0.1:{receiver.port}/hang"
    result = await asyncio.wait_for(post(client, url, b"{}", HEADERS, allow_private=True, timeout=0.5), 10)
    assert (result.status, result.error) == (None, "timeout after 0.5 s")
    assert [r.path for r in receiver.requests] == ["/hang"]


async def test_a_huge_answer_is_cut_short(receiver: Receiver, client: httpx.AsyncClient) -> None:
    url = f"http://127.0.0.1:{receiver.port}/big"
    result = await asyncio.wait_for(post(client, url, b"{}", HEADERS, allow_private=True), 10)
    assert result.status == 500 and result.error == "HTTP 500: " + "e" * 200
    await asyncio.wait_for(receiver.big_done.wait(), 10)
    assert receiver.big_sent < BIG // 2  # the connection was closed long before the server could send it all


async def test_an_oversized_body_is_refused_before_any_connection(
    receiver: Receiver, client: httpx.AsyncClient
) -> None:
    url = f"http://127.0.0.1:{receiver.port}/ok"
    result = await post(client, url, b"x" * (MAX_BODY_BYTES + 1), HEADERS, allow_private=True)
    assert result.status is None and result.error is not None and "too large" in result.error
    assert receiver.connections == 0
    exact = await post(client, url, b"x" * MAX_BODY_BYTES, HEADERS, allow_private=True)
    assert (exact.status, exact.error) == (200, None) and len(receiver.requests[0].body) == MAX_BODY_BYTES


async def test_a_refused_destination_is_a_result_and_no_connection(
    receiver: Receiver, client: httpx.AsyncClient
) -> None:
    result = await post(client, f"http://127.0.0.1:{receiver.port}/ok", b"{}", HEADERS, allow_private=False)
    assert (result.status, result.error) == (None, "refused destination: only https URLs are allowed")
    result = await post(client, f"https://127.0.0.1:{receiver.port}/ok", b"{}", HEADERS, allow_private=False)
    assert (result.status, result.error) == (None, "refused destination: loopback address 127.0.0.1")
    resolver = MapResolver({"receiver.test": ["10.0.0.1"]})
    result = await post(client, "https://receiver.test/", b"{}", HEADERS, allow_private=False, resolver=resolver)
    assert result.error == "refused destination: private address 10.0.0.1"
    mapped = await post(client, "https://[::ffff:a9fe:a9fe]/", b"{}", HEADERS, allow_private=True)
    assert mapped.error == "refused destination: cloud metadata address 169.254.169.254 (in ::ffff:a9fe:a9fe)"
    assert receiver.connections == 0


async def test_a_closed_port_is_connection_refused(client: httpx.AsyncClient) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = await post(client, f"http://127.0.0.1:{port}/", b"{}", HEADERS, allow_private=True)
    assert (result.status, result.error) == (None, "connection refused")


async def test_the_connection_goes_to_the_checked_address_with_the_name_in_host(
    receiver: Receiver, client: httpx.AsyncClient
) -> None:
    resolver = MapResolver({"receiver.test": ["127.0.0.1"]})
    headers = {**HEADERS, "host": "evil.test", "Content-Length": "1", "Transfer-Encoding": "chunked"}
    url = f"http://receiver.test:{receiver.port}/ok?x=1"
    result = await post(client, url, b"{}", headers, allow_private=True, resolver=resolver)
    assert (result.status, result.error) == (200, None)
    seen = receiver.requests[0]
    assert seen.path == "/ok?x=1" and seen.headers["host"] == f"receiver.test:{receiver.port}"
    assert seen.headers["content-length"] == "2" and "transfer-encoding" not in seen.headers
    assert resolver.calls == [("receiver.test", receiver.port)]  # resolved once: checked, then used


async def test_a_client_that_trusts_the_environment_is_refused() -> None:
    async with httpx.AsyncClient() as trusting:
        with pytest.raises(ValueError, match="trust_env"):
            await post(trusting, "https://example.com/", b"{}", {}, allow_private=False)


async def test_the_outbound_client_keeps_no_cookies(receiver: Receiver, client: httpx.AsyncClient) -> None:
    url = f"http://127.0.0.1:{receiver.port}/cookie"
    async with httpx.AsyncClient(trust_env=False) as plain:
        await post(plain, url, b"{}", HEADERS, allow_private=True)
        assert len(plain.cookies) == 1  # what a default client would keep from a receiver
    for _ in range(2):
        assert (await post(client, url, b"{}", HEADERS, allow_private=True)).error is None
    assert len(client.cookies) == 0 and all("cookie" not in r.headers for r in receiver.requests)


# -- TLS: pinned to the IP, verified against the name ---------------------------------------


def _self_signed(name: str, directory: Path) -> tuple[ssl.SSLContext, str]:
    """A server context with a fresh self-signed certificate for ``name``, and its PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = certificate.public_bytes(serialization.Encoding.PEM).decode()
    cert_file, key_file = directory / f"{name}.crt", directory / f"{name}.key"
    cert_file.write_text(pem)
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    return server, pem


@pytest.mark.parametrize(("served", "ok"), [("receiver.test", True), ("other.test", False)])
async def test_tls_is_verified_against_the_name_while_connecting_to_the_pinned_ip(
    tmp_path: Path, served: str, ok: bool
) -> None:
    server_tls, served_pem = _self_signed(served, tmp_path)
    _, receiver_pem = _self_signed("receiver.test", tmp_path)  # trusted too: only the name can fail
    trust = ssl.create_default_context(cadata=served_pem + receiver_pem)
    server = Receiver()
    await server.start(server_tls)
    try:
        resolver = MapResolver({"receiver.test": ["127.0.0.1"]})
        async with new_client(verify=trust) as client:
            url = f"https://receiver.test:{server.port}/ok"
            result = await post(client, url, b"{}", HEADERS, allow_private=True, resolver=resolver)
    finally:
        await server.stop()
    assert server.server_names == ["receiver.test"]  # SNI carries the name, not the IP
    if ok:
        assert (result.status, result.error) == (200, None)
        assert server.requests[0].headers["host"] == f"receiver.test:{server.port}"
    else:
        assert result.status is None and result.error is not None
        assert result.error.startswith("TLS certificate verification failed: Hostname mismatch")
        assert server.requests == []
