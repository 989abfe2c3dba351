"""Property-based conformance: schemathesis generates requests from
/v1/openapi.json against a real server; no 5xx, and every response matches
the documented status codes, headers and schemas."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    """A server with rate limits scaled up so generated traffic reaches the handlers."""
    proc = ServerProcess(tmp_path_factory.mktemp("fuzz-server"), env={"QDAY_RATE_LIMIT_MULTIPLIER": "1000"})
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def fuzz_auth(fuzz_server) -> dict[str, str]:
    """A live secret key for the generated requests."""
    with httpx.Client(base_url=fuzz_server.base_url, timeout=30) as c:
        c.post("/v1/auth/register", json={"email": "fuzz@example.com", "password": "p" * 16})
        session = c.post("/v1/auth/login", json={"email": "fuzz@example.com", "password": "p" * 16}).json()["data"][
            "token"
        ]
        key = c.post(
            "/v1/auth/api-keys",
            json={"name": "fuzz", "type": "secret", "environment": "live"},
            headers={"Authorization": f"Bearer {session}"},
        ).json()["data"]["key"]
    return {"Authorization": f"Bearer {key}"}


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def test_api_conforms_to_its_openapi_document(fuzz_server, fuzz_auth):
    """Every operation, with generated valid and invalid inputs. Path ids are random,
    so DELETE and rotate never touch the fuzzing key itself."""
    api = schemathesis.openapi.from_url(f"{fuzz_server.base_url}/v1/openapi.json")
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 8
    calls = 0
    for operation in operations:
        strategy = operation.as_strategy(GenerationMode.POSITIVE) | operation.as_strategy(GenerationMode.NEGATIVE)

        @given(case=strategy)
        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def exercise(case):
            nonlocal calls
            calls += 1
            case.call_and_validate(headers=fuzz_auth, checks=CHECKS)

        exercise()
    assert calls >= 8 * 10
