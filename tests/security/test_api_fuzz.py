"""schemathesis beyond single requests: stateful scenarios that follow the OpenAPI links of
/v1/openapi.json (create an API key, then rotate or delete it; add a watched address, then
delete it ...), and an at-scale run of every operation for `make fuzz`.

Sizes are bounded: by default ``SCENARIOS`` scenarios of at most ``STEPS`` calls (what
`make test` runs); `make fuzz` sets ``QDAY_FUZZ_EXAMPLES`` to run thousands of cases. The
single-request run of `make test` is tests/api/test_schemathesis.py.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import ignored_auth, use_after_free

from api.app import all_endpoints
from api.openapi import build_openapi
from tests.api.test_schemathesis import CHECKS
from tests.security.support import create_api_key, register_and_login

pytestmark = pytest.mark.slow

#: 0 (unset) for the bounded `make test` sizes; `make fuzz` sets it (hundreds per operation).
SCALE = int(os.environ.get("QDAY_FUZZ_EXAMPLES", "0"))
SCENARIOS = max(12, SCALE // 4)
STEPS = 8 if SCALE == 0 else 20
STATEFUL_CHECKS = [*CHECKS, use_after_free, ignored_auth]


@pytest.fixture(scope="module")
def fuzz_auth(hostile_server) -> dict[str, str]:
    """A live secret key of an account of its own (scenarios may rotate or delete other keys)."""
    session = register_and_login(hostile_server.base_url, "stateful-fuzz@example.com")
    return {"Authorization": f"Bearer {create_api_key(hostile_server.base_url, session)['key']}"}


def _links(document: dict) -> list[tuple[str, str, dict]]:
    return [
        (path, name, link)
        for path, methods in document["paths"].items()
        for op in methods.values()
        for response in op["responses"].values()
        for name, link in response.get("links", {}).items()
    ]


def test_links_name_real_operations_and_their_path_parameters():
    document = build_openapi(all_endpoints(), "test")
    operations = {op["operationId"]: op for methods in document["paths"].values() for op in methods.values()}
    links = _links(document)
    assert len(links) >= 8
    for path, name, link in links:
        target = operations.get(link["operationId"])
        assert target is not None, (path, name)
        declared = {p["name"] for p in target.get("parameters", []) if p["in"] == "path"}  # not limit/cursor
        assert set(link.get("parameters", {})) == declared, (path, name)


def _linked_operations(document: dict) -> list[str]:
    """The operation ids that make or take a link's value: the scenarios' only rules, so that
    each step can build on an earlier one (with every operation, a draw of 12 x 8 steps may
    never pair a creation with its follow-up, and the run's outcome hangs on the seed)."""
    operations = [op for methods in document["paths"].values() for op in methods.values()]
    sources = {op["operationId"] for op in operations if any(r.get("links") for r in op["responses"].values())}
    targets = {link["operationId"] for _, _, link in _links(document)}
    return sorted(sources | targets)


def test_stateful_scenarios_follow_links_without_a_failure(hostile_server, fuzz_auth):
    document = build_openapi(all_endpoints(), "test")
    loaded = schemathesis.openapi.from_url(f"{hostile_server.base_url}/v1/openapi.json")
    schema = loaded.include(operation_id=_linked_operations(document))
    statuses: Counter[tuple[str, str, int]] = Counter()
    steps_per_scenario: list[int] = []

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]  # a class made at run time
        def setup(self):
            steps_per_scenario.append(0)

        def get_call_kwargs(self, case):
            # One credential per call: a generated X-API-Key beside the fixture's Authorization
            # would be REQ_007 (conflicting credentials) and no scenario would get past its first call.
            if case.headers:
                case.headers = {k: v for k, v in case.headers.items() if k.lower() != "x-api-key"}
            return {"headers": fuzz_auth}

        def after_call(self, response, case):
            super().after_call(response, case)
            statuses[(case.method, case.path, response.status_code)] += 1
            steps_per_scenario[-1] += 1

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(
                response, checks=STATEFUL_CHECKS, transport_kwargs=kwargs or None, recorder=self.recorder
            )

    # Derandomized at the `make test` size (the same scenarios every run); random under `make fuzz`.
    Workflow.run(
        settings=settings(
            max_examples=SCENARIOS,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=SCALE == 0,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
    )
    print(f"stateful: {len(steps_per_scenario)} scenarios, {sum(steps_per_scenario)} calls")
    assert SCENARIOS <= len(steps_per_scenario) and max(steps_per_scenario) <= STEPS
    # Only a link can supply the id of a key created in the same scenario: success on these
    # operations proves the links are followed, not just declared.
    followed = (
        statuses[("DELETE", "/v1/auth/api-keys/{key_id}", 204)]
        + statuses[("POST", "/v1/auth/api-keys/{key_id}/rotate", 201)]
    )
    assert followed > 0, sorted(statuses.items())


@pytest.mark.skipif(
    SCALE == 0, reason="at-scale run: `make fuzz` (QDAY_FUZZ_EXAMPLES); make test runs tests/api/test_schemathesis.py"
)
def test_every_operation_at_scale(hostile_server, fuzz_auth):
    """2 x QDAY_FUZZ_EXAMPLES valid and invalid requests per operation, the conformance checks."""
    schema = schemathesis.openapi.from_url(f"{hostile_server.base_url}/v1/openapi.json")
    # Operations without inputs have no invalid form, hence one strategy of both modes each.
    strategies = [
        op.ok().as_strategy(GenerationMode.POSITIVE) | op.ok().as_strategy(GenerationMode.NEGATIVE)
        for op in schema.get_all_operations()
    ]
    calls = 0
    for strategy in strategies:

        @given(case=strategy)
        @settings(max_examples=2 * SCALE, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def send(case) -> None:
            nonlocal calls
            calls += 1
            case.call_and_validate(headers=fuzz_auth, checks=CHECKS)

        send()
    print(f"at scale: {calls} requests over {len(strategies)} operations")
    assert calls >= SCALE * len(strategies)
