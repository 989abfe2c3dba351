"""POST /v1/keys/generate, key registration with proof of possession, GET /v1/keys."""

from __future__ import annotations

import base64
import struct

import pytest
from cryptography.hazmat.primitives.asymmetric import mldsa

import pqc
from storage.models import Plan
from tests.api.test_envelope import assert_error, assert_meta
from tests.signing import PqSigner
from tests.support import make_tenant, stored_bytes

GENERATE = "/v1/keys/generate"
ALGORITHMS = ["ml-dsa-44", "ml-dsa-65", "ml-dsa-87", "slh-dsa-128s"]
CHAINS = ["ethereum", "bitcoin", "solana", "polygon", "avalanche"]


def _decode(value: str, fmt: str) -> bytes:
    return bytes.fromhex(value) if fmt == "hex" else base64.b64decode(value, validate=True)


@pytest.mark.parametrize("fmt", ["hex", "base64"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_generated_keys_sign_and_verify(client, app, algorithm, fmt):
    tenant = await make_tenant(client)
    await app.ctx.store.set_plan(tenant.email, Plan.PRO)
    for chain in CHAINS:
        r = await client.post(
            GENERATE, json={"algorithm": algorithm, "chain": chain, "format": fmt}, headers=tenant.auth("secret_live")
        )
        assert r.status_code == 201, r.text
        data = assert_meta(r)["data"]
        assert data["id"].startswith("key_") and data["chain"] == chain and data["format"] == fmt
        spec = pqc.SPECS[pqc.parse_algorithm(algorithm)]
        public, private, seed = (_decode(data[k], fmt) for k in ("publicKey", "privateKey", "seed"))
        assert (len(public), len(private), len(seed)) == (spec.public_key_size, spec.private_key_size, spec.seed_size)
        assert data["algorithm"] == pqc.parse_algorithm(algorithm).value
        if chain == "ethereum":  # one signature per algorithm and format keeps SLH-DSA affordable
            signature = pqc.sign(algorithm, private, b"hello")
            pqc.verify(algorithm, public, b"hello", signature)
            assert pqc.generate_keypair(algorithm, seed).public_key == public


@pytest.mark.parametrize("algorithm", ["ml-dsa-44", "ml-dsa-65", "ml-dsa-87"])
async def test_seed_form_private_keys_are_the_rfc_9881_seed(client, tenant, algorithm):
    r = await client.post(
        GENERATE,
        json={"algorithm": algorithm, "chain": "ethereum", "privateKeyForm": "seed"},
        headers=tenant.auth("secret_live"),
    )
    assert r.status_code == 201, r.text
    data = r.json()["data"]
    public, private = bytes.fromhex(data["publicKey"]), bytes.fromhex(data["privateKey"])
    assert private == bytes.fromhex(data["seed"]) and len(private) == 32
    # another implementation that takes the seed form (pyca/cryptography) signs; the service verifies
    level = algorithm.removeprefix("ml-dsa-")
    key = getattr(mldsa, f"MLDSA{level}PrivateKey").from_seed_bytes(private)
    assert key.public_key().public_bytes_raw() == public
    pqc.verify(algorithm, public, b"hello", key.sign(b"hello"))
    # and the seed re-creates the expanded form of the same key pair
    expanded = pqc.generate_keypair(algorithm, private)
    assert expanded.public_key == public
    pqc.verify(algorithm, public, b"hello", pqc.sign(algorithm, expanded.private_key, b"hello"))


async def test_seed_form_is_refused_for_slh_dsa(client, tenant):
    r = await client.post(
        GENERATE,
        json={"algorithm": "slh-dsa-128s", "chain": "ethereum", "privateKeyForm": "seed"},
        headers=tenant.auth("secret_live"),
    )
    assert_error(r, 400, "REQ_001")
    assert r.json()["error"]["details"]["field"] == "privateKeyForm"


async def test_raw_format_layout(client, tenant):
    r = await client.post(
        GENERATE,
        json={"algorithm": "ml-dsa-44", "chain": "bitcoin", "format": "raw"},
        headers=tenant.auth("secret_live"),
    )
    assert r.status_code == 201
    assert r.headers["content-type"] == "application/octet-stream"
    body = r.content
    assert body[:8] == b"QDAYKEY1"
    name_len = body[8]
    assert body[9 : 9 + name_len] == b"ml-dsa-44"
    offset, parts = 9 + name_len, []
    for _ in range(3):
        (length,) = struct.unpack(">H", body[offset : offset + 2])
        parts.append(body[offset + 2 : offset + 2 + length])
        offset += 2 + length
    assert offset == len(body)
    public, private, seed = parts
    assert pqc.generate_keypair("ml-dsa-44", seed).public_key == public
    assert r.headers["x-key-id"].startswith("key_")
    assert r.headers["x-key-fingerprint"] == pqc.public_key_fingerprint(public)
    assert r.headers["x-request-id"].startswith("req_")


async def test_generated_public_keys_are_registered_private_keys_are_not_kept(client, app, tenant):
    r = await client.post(
        GENERATE, json={"algorithm": "ml-dsa-65", "chain": "ethereum"}, headers=tenant.auth("secret_live")
    )
    data = r.json()["data"]
    listed = (await client.get("/v1/keys", headers=tenant.auth("secret_live"))).json()["data"]
    assert [k["publicKey"] for k in listed] == [data["publicKey"]]
    assert listed[0]["origin"] == "generated" and listed[0]["fingerprint"] == data["fingerprint"]
    db_bytes = await stored_bytes(app)
    assert data["publicKey"] and bytes.fromhex(data["publicKey"]) in db_bytes  # the search does see what is stored
    assert bytes.fromhex(data["privateKey"])[-64:] not in db_bytes
    assert bytes.fromhex(data["seed"]) not in db_bytes


async def test_unsupported_algorithm_and_chain(client, tenant):
    headers = tenant.auth("secret_live")
    error = assert_error(
        await client.post(GENERATE, json={"algorithm": "rsa-2048", "chain": "ethereum"}, headers=headers),
        400,
        "PQC_001",
    )
    assert "ml-dsa-65" in error["details"]["supported"]
    error = assert_error(
        await client.post(GENERATE, json={"algorithm": "ml-dsa-44", "chain": "dogecoin"}, headers=headers),
        400,
        "GEN_001",
    )
    assert error["details"]["field"] == "chain"
    assert_error(
        await client.post(
            GENERATE, json={"algorithm": "ml-dsa-44", "chain": "ethereum", "format": "pem"}, headers=headers
        ),
        400,
        "REQ_001",
    )


async def test_generation_failure_is_gen_002_and_stores_nothing(client, tenant, monkeypatch):
    def broken(*_args, **_kwargs):
        raise MemoryError("simulated")

    monkeypatch.setattr(pqc, "generate_keypair", broken)
    assert_error(
        await client.post(
            GENERATE, json={"algorithm": "ml-dsa-44", "chain": "ethereum"}, headers=tenant.auth("secret_live")
        ),
        500,
        "GEN_002",
    )
    assert (await client.get("/v1/keys", headers=tenant.auth("secret_live"))).json()["data"] == []


async def test_publishable_key_cannot_generate(client):
    tenant = await make_tenant(client, ("publishable_live",))
    assert_error(
        await client.post(
            GENERATE, json={"algorithm": "ml-dsa-44", "chain": "ethereum"}, headers=tenant.auth("publishable_live")
        ),
        403,
        "AUTH_003",
    )


async def test_keys_are_separate_per_environment(client):
    tenant = await make_tenant(client, ("secret_live", "secret_test"))
    await client.post(
        GENERATE, json={"algorithm": "ml-dsa-44", "chain": "ethereum"}, headers=tenant.auth("secret_test")
    )
    assert (await client.get("/v1/keys", headers=tenant.auth("secret_live"))).json()["data"] == []
    assert len((await client.get("/v1/keys", headers=tenant.auth("secret_test"))).json()["data"]) == 1


async def _challenge(client, tenant, signer: PqSigner) -> dict:
    r = await client.post(
        "/v1/keys/register/challenge",
        json={"algorithm": signer.algorithm, "publicKey": signer.public_hex},
        headers=tenant.auth("secret_live"),
    )
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def test_register_own_key_with_proof_of_possession(client, tenant):
    signer = PqSigner.new("ml-dsa-44")
    challenge = await _challenge(client, tenant, signer)
    signature = signer.sign(challenge["challenge"].encode(), bytes.fromhex(challenge["context"]))
    body = {
        "algorithm": "ml-dsa-44",
        "chain": "ethereum",
        "publicKey": "0x" + signer.public_hex,
        "challenge": challenge["challenge"],
        "signature": signature.hex(),
    }
    r = await client.post("/v1/keys/register", json=body, headers=tenant.auth("secret_live"))
    assert r.status_code == 201, r.text
    data = r.json()["data"]
    assert data["origin"] == "registered" and data["publicKey"] == signer.public_hex
    again = await client.post("/v1/keys/register", json=body, headers=tenant.auth("secret_live"))
    assert again.json()["data"]["id"] == data["id"]


async def test_registration_refuses_wrong_signature_and_foreign_challenges(client, clock):
    alice = await make_tenant(client)
    bob = await make_tenant(client)
    signer = PqSigner.new("ml-dsa-44")
    challenge = await _challenge(client, alice, signer)
    good = signer.sign(challenge["challenge"].encode(), bytes.fromhex(challenge["context"]))
    body = {
        "algorithm": "ml-dsa-44",
        "chain": "ethereum",
        "publicKey": signer.public_hex,
        "challenge": challenge["challenge"],
    }
    # Signature without the context, over the wrong text, or by another key: PQC_004.
    for bad in (
        signer.sign(challenge["challenge"].encode()),
        signer.sign(b"other"),
        PqSigner.new("ml-dsa-44").sign(challenge["challenge"].encode(), bytes.fromhex(challenge["context"])),
    ):
        assert_error(
            await client.post(
                "/v1/keys/register", json={**body, "signature": bad.hex()}, headers=alice.auth("secret_live")
            ),
            422,
            "PQC_004",
        )
    # Bob cannot use Alice's challenge; a tampered challenge fails; an expired one fails.
    assert_error(
        await client.post("/v1/keys/register", json={**body, "signature": good.hex()}, headers=bob.auth("secret_live")),
        400,
        "PQC_005",
    )
    tampered = challenge["challenge"].replace("ml-dsa-44", "ml-dsa-65", 1)
    assert_error(
        await client.post(
            "/v1/keys/register",
            json={**body, "challenge": tampered, "signature": good.hex()},
            headers=alice.auth("secret_live"),
        ),
        400,
        "PQC_005",
    )
    clock.advance(601)
    error = assert_error(
        await client.post(
            "/v1/keys/register", json={**body, "signature": good.hex()}, headers=alice.auth("secret_live")
        ),
        400,
        "PQC_005",
    )
    assert error["details"]["reason"] == "expired"


async def test_registration_challenge_rejects_malformed_keys(client, tenant):
    error = assert_error(
        await client.post(
            "/v1/keys/register/challenge",
            json={"algorithm": "ml-dsa-44", "publicKey": "abcd"},
            headers=tenant.auth("secret_live"),
        ),
        400,
        "PQC_002",
    )
    assert error["details"]["field"] == "publicKey"
    assert_error(
        await client.post(
            "/v1/keys/register/challenge",
            json={"algorithm": "ml-dsa-44", "publicKey": "zz"},
            headers=tenant.auth("secret_live"),
        ),
        400,
        "PQC_002",
    )
