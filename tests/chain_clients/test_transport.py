"""Resilience of the shared transport: retries, backoff, deadlines, breaker, redaction, JSON-RPC."""

from __future__ import annotations

import time
from decimal import Decimal

import httpx
import pytest

from api.errors import code_of
from chains.clients.breaker import BreakerState, CircuitOpen
from chains.clients.jsonrpc import Call, JsonRpc, MethodNotFound, RpcError
from chains.clients.transport import Transport, decode_json
from chains.endpoints import BreakerSettings, EndpointConfig, RetrySettings
from chains.errors import ChainUnavailable, MalformedChainData
from tests.anvil import free_port
from tests.chain_clients.loopback import Fault, Loopback, RpcFailure
from tests.chain_clients.support import FakeClock

OK = {"ok": True}


def endpoint(
    url: str,
    *,
    attempts: int = 3,
    timeout: float = 2.0,
    budget: float = 30.0,
    failures: int = 5,
    cooldown: float = 30.0,
) -> EndpointConfig:
    return EndpointConfig(
        url,
        timeout=timeout,
        retry=RetrySettings(attempts, 0.1, 1.0, budget),
        breaker=BreakerSettings(failures, cooldown),
    )


def transport(url: str, http: httpx.AsyncClient, clock: FakeClock, **settings: float) -> Transport:
    return Transport(endpoint(url, **settings), http, "test endpoint", clock.timing())  # type: ignore[arg-type]  # keyword settings of the test


async def test_5xx_then_success_is_retried_with_full_jitter_backoff(loopback: Loopback, http, clock) -> None:
    loopback.route("GET", "/x", OK)
    loopback.fail(Fault(status=503, times=2))
    reply = await transport(loopback.url, http, clock).get("/x")
    assert reply.data == OK
    assert loopback.count("/x") == 3
    # jitter 0.5 x min(max_delay 1.0, base 0.1 x 2**n)
    assert clock.sleeps == [pytest.approx(0.05), pytest.approx(0.1)]


async def test_429_honours_retry_after(loopback: Loopback, http, clock) -> None:
    loopback.route("GET", "/x", OK)
    loopback.fail(Fault(status=429, headers={"Retry-After": "2"}))
    assert (await transport(loopback.url, http, clock).get("/x")).data == OK
    assert clock.sleeps == [2.0]


async def test_retry_after_beyond_the_budget_gives_up_at_once(loopback: Loopback, http, clock) -> None:
    loopback.route("GET", "/x", OK)
    loopback.fail(Fault(status=429, headers={"Retry-After": "120"}, times=5))
    with pytest.raises(ChainUnavailable, match="HTTP 429"):
        await transport(loopback.url, http, clock, budget=10).get("/x")
    assert loopback.count() == 1 and clock.sleeps == []


async def test_client_errors_are_not_retried(loopback: Loopback, http, clock) -> None:
    with pytest.raises(ChainUnavailable, match="HTTP 404") as caught:
        await transport(loopback.url, http, clock).get("/missing")
    assert loopback.count() == 1
    assert code_of(caught.value) == "SCAN_004"


async def test_all_attempts_failing_names_endpoint_attempts_and_reason(loopback: Loopback, http, clock) -> None:
    loopback.fail(Fault(status=502, times=10))
    with pytest.raises(ChainUnavailable) as caught:
        await transport(loopback.url, http, clock).get("/x")
    message = str(caught.value)
    assert "test endpoint http://127.0.0.1" in message and "3 attempt(s)" in message and "HTTP 502" in message
    assert loopback.count() == 3


async def test_slow_answer_past_the_deadline_times_out_and_is_retried(loopback: Loopback, http, clock) -> None:
    loopback.route("GET", "/x", OK)
    loopback.fail(Fault(delay=1.0))
    started = time.monotonic()
    reply = await transport(loopback.url, http, clock, timeout=0.2).get("/x")
    assert reply.data == OK and loopback.count() == 2
    assert time.monotonic() - started < 1.0


async def test_slow_answers_exhaust_attempts_within_bounded_time(loopback: Loopback, http, clock) -> None:
    loopback.fail(Fault(delay=1.0, times=5))
    started = time.monotonic()
    with pytest.raises(ChainUnavailable, match=r"Timeout|no answer"):
        await transport(loopback.url, http, clock, timeout=0.15, attempts=2).get("/x")
    assert time.monotonic() - started < 1.0


async def test_connection_refused_is_retried_then_unavailable(http, clock) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ChainUnavailable, match="ConnectError"):
        await transport(dead, http, clock).get("/x")
    assert len(clock.sleeps) == 2


async def test_connection_reset_is_retried(loopback: Loopback, http, clock) -> None:
    loopback.route("GET", "/x", OK)
    loopback.fail(Fault(reset=True))
    assert (await transport(loopback.url, http, clock).get("/x")).data == OK
    assert loopback.count() == 2


async def test_malformed_json_is_malformed_chain_data_and_not_retried(loopback: Loopback, http, clock) -> None:
    loopback.route("GET", "/x", b"<html>502 Bad Gateway</html>")
    with pytest.raises(MalformedChainData, match="not JSON") as caught:
        await transport(loopback.url, http, clock).get("/x")
    assert code_of(caught.value) == "SCAN_004" and loopback.count() == 1


async def test_budget_caps_the_number_of_retries(loopback: Loopback, http, clock) -> None:
    loopback.fail(Fault(status=500, times=100))
    with pytest.raises(ChainUnavailable):
        await Transport(
            EndpointConfig(loopback.url, retry=RetrySettings(attempts=50, base_delay=1.0, max_delay=1.0, budget=2.2)),
            http,
            "x",
            clock.timing(jitter=1.0),
        ).get("/x")
    assert clock.sleeps == [1.0, 1.0] and loopback.count() == 3


async def test_non_idempotent_request_is_not_retried(loopback: Loopback, http, clock) -> None:
    loopback.fail(Fault(status=503))
    with pytest.raises(ChainUnavailable):
        await transport(loopback.url, http, clock).request("POST", "/send", payload={}, idempotent=False)
    assert loopback.count() == 1


async def test_breaker_opens_refuses_without_sending_then_half_opens_and_recovers(
    loopback: Loopback, http, clock
) -> None:
    loopback.route("GET", "/x", OK)
    t = transport(loopback.url, http, clock, attempts=1, failures=2, cooldown=30)
    loopback.fail(Fault(status=503, times=2))
    for _ in range(2):
        with pytest.raises(ChainUnavailable):
            await t.get("/x")
    assert t.resilience.breaker.state is BreakerState.OPEN
    with pytest.raises(CircuitOpen, match="circuit open, next attempt in 30s"):
        await t.get("/x")
    assert loopback.count() == 2  # refused without a request
    clock.advance(30)
    assert t.resilience.breaker.state is BreakerState.HALF_OPEN
    assert (await t.get("/x")).data == OK  # the probe
    assert t.resilience.breaker.state is BreakerState.CLOSED


async def test_failed_half_open_probe_reopens_for_a_new_cooldown(loopback: Loopback, http, clock) -> None:
    t = transport(loopback.url, http, clock, attempts=1, failures=1, cooldown=10)
    loopback.fail(Fault(status=500, times=2))
    with pytest.raises(ChainUnavailable):
        await t.get("/x")
    clock.advance(10)
    with pytest.raises(ChainUnavailable, match="HTTP 500"):
        await t.get("/x")  # the probe fails
    with pytest.raises(CircuitOpen):
        await t.get("/x")
    assert loopback.count() == 2


async def test_one_endpoints_outage_does_not_affect_another(loopback: Loopback, http, clock) -> None:
    loopback.route("GET", "/x", OK)
    dead = transport(f"http://127.0.0.1:{free_port()}", http, clock, attempts=1, failures=1)
    alive = transport(loopback.url, http, clock, attempts=1, failures=1)
    for _ in range(2):
        with pytest.raises(ChainUnavailable):
            await dead.get("/x")
    assert dead.resilience.breaker.state is BreakerState.OPEN
    assert (await alive.get("/x")).data == OK
    assert alive.resilience.breaker.state is BreakerState.CLOSED


async def test_credentials_reach_the_server_but_never_the_message(loopback: Loopback, http, clock) -> None:
    host = loopback.url.removeprefix("http://")
    url = f"http://alice:s3cret-pass@{host}/v3/9f8e7d6c5b4a39281706f5e4d3c2b1a0?apikey=TOPSECRET123"
    loopback.fail(Fault(status=401, times=3))
    with pytest.raises(ChainUnavailable) as caught:
        await Transport(EndpointConfig(url), http, "paid RPC", clock.timing()).post("", {"q": 1})
    message = str(caught.value) + repr(caught.value.details)
    for secret in ("s3cret", "alice", "9f8e7d6c5b4a", "TOPSECRET"):
        assert secret not in message
    assert "/v3/***" in message and "check the endpoint's credentials" in message
    seen = loopback.requests[0]
    assert seen.path.endswith("9f8e7d6c5b4a39281706f5e4d3c2b1a0")
    assert seen.query == {"apikey": "TOPSECRET123"}
    assert seen.headers["Authorization"].startswith("Basic ")


def test_json_numbers_stay_exact() -> None:
    data = decode_json(b'{"btc": 20999999.99999999, "rent": 18446744073709551615}', "x")
    assert data == {"btc": Decimal("20999999.99999999"), "rent": 18446744073709551615}


async def test_jsonrpc_errors_map_to_classes_and_batch_slots(loopback: Loopback, http, clock) -> None:
    def fail(params: list) -> None:
        raise RpcFailure(-32000, "header not found")

    loopback.rpc_methods({"echo": lambda params: params, "fail": fail})
    rpc = JsonRpc(transport(loopback.url, http, clock), max_batch=2)
    assert await rpc.call("echo", [1, "a"]) == [1, "a"]
    with pytest.raises(MethodNotFound, match="-32601"):
        await rpc.call("nope")
    results = await rpc.batch([Call("echo", [1]), Call("fail", []), Call("echo", [3]), Call("nope", [])])
    assert results[0] == [1] and results[2] == [3]
    assert type(results[1]) is RpcError and results[1].rpc_code == -32000
    assert isinstance(results[3], MethodNotFound)
    assert loopback.count() == 2 + 2  # two single calls, then four calls in POSTs of two


async def test_jsonrpc_batch_answer_missing_an_id_is_malformed(loopback: Loopback, http, clock) -> None:
    loopback.handle("POST", "/", lambda body, q: (200, [{"jsonrpc": "2.0", "id": body[0]["id"], "result": 1}]))
    with pytest.raises(MalformedChainData, match="no answer for call 1"):
        await JsonRpc(transport(loopback.url, http, clock)).batch([Call("a", []), Call("b", [])])


async def test_jsonrpc_batch_refused_as_a_whole_raises(loopback: Loopback, http, clock) -> None:
    loopback.route("POST", "/", {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "batch too large"}})
    with pytest.raises(RpcError, match="batch too large"):
        await JsonRpc(transport(loopback.url, http, clock)).batch([Call("a", [])])
