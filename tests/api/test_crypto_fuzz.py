"""Hostile input to the key, attestation and verification endpoints: any
combination of strings, hex of any length and wrong types gives a 4xx with the
envelope, never a 5xx."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.models import Plan
from tests.support import client_for, make_tenant

hexish = st.one_of(
    st.binary(max_size=80).map(bytes.hex),
    st.binary(max_size=80).map(lambda b: "0x" + b.hex()),
    st.sampled_from(["", "0x", "0", "zz", " 00", "00 ", "0X00", "ÿ", "1" * 131]),
    st.text(max_size=40),
)
values = st.one_of(hexish, st.integers(), st.none(), st.booleans(), st.lists(st.integers(), max_size=2))
HYBRID_FIELDS = [
    "message",
    "ecdsaSignature",
    "ecdsaPublicKey",
    "pqcSignature",
    "pqcPublicKey",
    "algorithm",
    "chain",
    "ecdsaScheme",
    "context",
    "strict",
    "metadata",
]
VERIFY_FIELDS = [
    "attestationId",
    "message",
    "ecdsaSignature",
    "ecdsaPublicKey",
    "pqcSignature",
    "pqcPublicKey",
    "algorithm",
    "public_key",
    "signature",
    "context",
    "chain",
]
algorithms = st.sampled_from(["ml-dsa-44", "ml-dsa-65", "slh-dsa-128s", "ML-DSA-87", "dilithium", ""])


def _bodies(fields):
    return st.dictionaries(st.sampled_from(fields), values, max_size=len(fields)).flatmap(
        lambda d: algorithms.map(lambda a: {**d, "algorithm": a} if "algorithm" in d else d)
    )


_state: dict[str, dict[str, str]] = {}


async def _auth(app) -> dict[str, str]:
    if "auth" not in _state:
        async with client_for(app) as client:
            tenant = await make_tenant(client)
        await app.ctx.store.set_plan(tenant.email, Plan.ENTERPRISE)
        _state["auth"] = tenant.auth("secret_live")
    return _state["auth"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(
        [
            "/v1/sign/hybrid",
            "/v1/verify",
            "/v1/attestations/challenge",
            "/v1/keys/register",
            "/v1/keys/register/challenge",
        ]
    ),
    body=st.data(),
)
async def test_crypto_endpoints_never_answer_5xx(app, path, body):
    fields = VERIFY_FIELDS if path == "/v1/verify" else HYBRID_FIELDS + ["publicKey", "challenge", "signature"]
    payload = body.draw(_bodies(fields))
    async with client_for(app) as client:
        r = await client.post(path, json=payload, headers=await _auth(app))
    assert 400 <= r.status_code < 500, r.text
    assert r.json()["error"]["code"]
