"""POST /v1/sign/hybrid and POST /v1/verify: the spec's four steps, strict mode,
replay, tenant and environment isolation."""

from __future__ import annotations

import os

import pytest

import pqc
from chains.codecs.base58 import b58check_encode
from chains.codecs.bech32 import WitnessProgram, encode_segwit
from pqc.hashes import hash160
from tests.api.test_envelope import assert_error, assert_meta
from tests.signing import (
    PqSigner,
    bip137_signature,
    digest_signature,
    evm_address,
    hybrid_body,
    public_key,
    registered_signer,
)
from tests.support import make_tenant

HYBRID = "/v1/sign/hybrid"
VERIFY = "/v1/verify"


@pytest.fixture
async def signer_setup(client, tenant):
    return tenant, await registered_signer(client, tenant), os.urandom(32)


async def test_attestation_is_created_and_verifiable_by_id(client, signer_setup):
    tenant, pq, ecdsa_key = signer_setup
    message = b"I control both keys"
    body = hybrid_body(message, ecdsa_key, pq, metadata={"ticket": 42, "tags": ["migration"]})
    r = await client.post(HYBRID, json=body, headers=tenant.auth("secret_live"))
    assert r.status_code == 201, r.text
    data = assert_meta(r)["data"]
    assert data["id"].startswith("att_") and data["status"] == "verified"
    assert data["message"] == message.hex() and data["pqcPublicKey"] == pq.public_hex
    assert data["chain"] == "ethereum" and data["algorithm"] == "ml-dsa-65" and data["ecdsaScheme"] == "eip191"
    assert data["metadata"] == {"ticket": 42, "tags": ["migration"]}
    assert "ecdsaSignature" not in data and "pqcSignature" not in data
    v = assert_meta(await client.post(VERIFY, json={"attestationId": data["id"]}, headers=tenant.auth("secret_live")))
    assert v["data"]["valid"] and v["data"]["ecdsaValid"] and v["data"]["pqcValid"]
    assert v["data"]["attestationId"] == data["id"] and v["data"]["chain"] == "ethereum"


@pytest.mark.parametrize("claim", ["compressed", "uncompressed", "raw64", "evm_address", "evm_address_lower"])
async def test_ecdsa_signer_may_be_named_by_key_or_evm_address(client, signer_setup, claim):
    tenant, pq, ecdsa_key = signer_setup
    named = {
        "compressed": public_key(ecdsa_key).hex(),
        "uncompressed": public_key(ecdsa_key, compressed=False).hex(),
        "raw64": public_key(ecdsa_key, compressed=False)[1:].hex(),
        "evm_address": evm_address(ecdsa_key),
        "evm_address_lower": evm_address(ecdsa_key).lower(),
    }[claim]
    body = hybrid_body(b"named signer", ecdsa_key, pq, ecdsaPublicKey=named)
    r = await client.post(HYBRID, json=body, headers=tenant.auth("secret_live"))
    assert r.status_code == 201, r.text
    assert r.json()["data"]["ecdsaPublicKey"] == named


@pytest.mark.parametrize("address_type", ["p2pkh", "p2wpkh"])
async def test_bitcoin_signmessage_with_address(client, signer_setup, address_type):
    tenant, pq, ecdsa_key = signer_setup
    message = b"bitcoin migration proof"
    key_hash = hash160(public_key(ecdsa_key))
    address = (
        b58check_encode(b"\x00" + key_hash)
        if address_type == "p2pkh"
        else encode_segwit("bc", WitnessProgram(0, key_hash))
    )
    body = {
        **hybrid_body(message, ecdsa_key, pq, chain="bitcoin", ecdsaPublicKey=address),
        "ecdsaSignature": bip137_signature(ecdsa_key, message).hex(),
    }
    r = await client.post(HYBRID, json=body, headers=tenant.auth("secret_live"))
    assert r.status_code == 201, r.text
    assert r.json()["data"]["ecdsaScheme"] == "bip137"


async def test_digest_scheme_and_context(client, signer_setup):
    tenant, pq, ecdsa_key = signer_setup
    digest = os.urandom(32)
    context = b"qday test context"
    body = {
        **hybrid_body(digest, ecdsa_key, pq, ecdsaScheme="digest", context=context.hex()),
        "ecdsaSignature": digest_signature(ecdsa_key, digest).hex(),
        "pqcSignature": pq.sign(digest, context).hex(),
    }
    r = await client.post(HYBRID, json=body, headers=tenant.auth("secret_live"))
    assert r.status_code == 201, r.text
    assert r.json()["data"]["context"] == context.hex()
    # The same ML-DSA signature does not verify without its context.
    r = await client.post(HYBRID, json={**body, "context": ""}, headers=tenant.auth("secret_live"))
    assert_error(r, 422, "PQC_004")


async def test_bad_signatures_are_pqc_004_and_nothing_is_stored(client, app, signer_setup):
    tenant, pq, ecdsa_key = signer_setup
    message = b"tampered"
    good = hybrid_body(message, ecdsa_key, pq)
    other_ecdsa = hybrid_body(message, os.urandom(32), pq)["ecdsaSignature"]
    cases = {
        "ecdsa by another key": ({**good, "ecdsaSignature": other_ecdsa}, False, True),
        "pqc over another message": ({**good, "pqcSignature": pq.sign(b"other").hex()}, True, False),
        "both wrong": ({**good, "ecdsaSignature": other_ecdsa, "pqcSignature": pq.sign(b"x").hex()}, False, False),
    }
    (before,) = await app.ctx.database.fetch_one("SELECT count(*) FROM attestations")
    for body, ecdsa_ok, pqc_ok in cases.values():
        error = assert_error(await client.post(HYBRID, json=body, headers=tenant.auth("secret_live")), 422, "PQC_004")
        assert error["details"] == {"ecdsaValid": ecdsa_ok, "pqcValid": pqc_ok}
    assert await app.ctx.database.fetch_one("SELECT count(*) FROM attestations") == (before,)


async def test_high_s_and_malformed_ecdsa_signatures_are_refused(client, signer_setup):
    tenant, pq, ecdsa_key = signer_setup
    body = hybrid_body(b"malleable", ecdsa_key, pq)
    sig = bytes.fromhex(body["ecdsaSignature"])
    n = pqc.secp256k1.CURVE_ORDER
    s = int.from_bytes(sig[32:64], "big")
    high_s = sig[:32] + (n - s).to_bytes(32, "big") + bytes((27 + ((sig[64] - 27) ^ 1),))
    assert_error(
        await client.post(HYBRID, json={**body, "ecdsaSignature": high_s.hex()}, headers=tenant.auth("secret_live")),
        422,
        "PQC_004",
    )
    for malformed in (sig[:64].hex(), (sig[:64] + b"\x05").hex(), (b"\x00" * 32 + sig[32:]).hex(), "0x"):
        assert_error(
            await client.post(HYBRID, json={**body, "ecdsaSignature": malformed}, headers=tenant.auth("secret_live")),
            400,
            "PQC_002",
        )


async def test_unregistered_or_foreign_pq_key_is_pqc_003(client, signer_setup):
    tenant, _, ecdsa_key = signer_setup
    stranger = PqSigner.new("ml-dsa-65")
    error = assert_error(
        await client.post(HYBRID, json=hybrid_body(b"m", ecdsa_key, stranger), headers=tenant.auth("secret_live")),
        400,
        "PQC_003",
    )
    assert error["details"]["field"] == "pqcPublicKey"
    other = await make_tenant(client)
    others_key = await registered_signer(client, other)
    assert_error(
        await client.post(HYBRID, json=hybrid_body(b"m", ecdsa_key, others_key), headers=tenant.auth("secret_live")),
        400,
        "PQC_003",
    )


async def test_attestations_are_invisible_across_tenants_and_environments(client):
    tenant = await make_tenant(client, ("secret_live", "secret_test"))
    pq = await registered_signer(client, tenant, key="secret_test")
    ecdsa_key = os.urandom(32)
    # A key registered in test is unknown in live.
    assert_error(
        await client.post(HYBRID, json=hybrid_body(b"m", ecdsa_key, pq), headers=tenant.auth("secret_live")),
        400,
        "PQC_003",
    )
    r = await client.post(HYBRID, json=hybrid_body(b"m", ecdsa_key, pq), headers=tenant.auth("secret_test"))
    att_id = r.json()["data"]["id"]
    assert_error(
        await client.post(VERIFY, json={"attestationId": att_id}, headers=tenant.auth("secret_live")), 404, "REQ_005"
    )
    other = await make_tenant(client, ("secret_test",))
    assert_error(
        await client.post(VERIFY, json={"attestationId": att_id}, headers=other.auth("secret_test")), 404, "REQ_005"
    )


async def test_slh_dsa_is_not_a_hybrid_algorithm(client, signer_setup):
    tenant, pq, ecdsa_key = signer_setup
    body = {**hybrid_body(b"m", ecdsa_key, pq), "algorithm": "slh-dsa-128s"}
    assert_error(await client.post(HYBRID, json=body, headers=tenant.auth("secret_live")), 400, "PQC_001")


async def test_chain_without_default_scheme_must_name_one(client, signer_setup):
    tenant, pq, ecdsa_key = signer_setup
    error = assert_error(
        await client.post(
            HYBRID, json=hybrid_body(b"m", ecdsa_key, pq, chain="solana"), headers=tenant.auth("secret_live")
        ),
        400,
        "REQ_001",
    )
    assert error["details"]["field"] == "ecdsaScheme"
    r = await client.post(
        HYBRID,
        json=hybrid_body(b"m", ecdsa_key, pq, chain="solana", ecdsaScheme="eip191"),
        headers=tenant.auth("secret_live"),
    )
    assert r.status_code == 201


async def test_strict_mode_accepts_each_issued_statement_once(client, clock, signer_setup):
    tenant, pq, ecdsa_key = signer_setup
    claim = evm_address(ecdsa_key)
    r = await client.post(
        "/v1/attestations/challenge",
        json={"ecdsaPublicKey": claim, "pqcPublicKey": pq.public_hex, "algorithm": pq.algorithm},
        headers=tenant.auth("secret_live"),
    )
    assert r.status_code == 201, r.text
    statement = r.json()["data"]
    text = statement["statement"]
    assert text.startswith("qday hybrid attestation v1\ndomain: qday.local\nchain: ethereum\n")
    assert f"pqc: ml-dsa-65:{pqc.public_key_fingerprint(pq.keypair.public_key)}" in text
    message = bytes.fromhex(statement["message"])
    assert message == text.encode()
    body = hybrid_body(message, ecdsa_key, pq, ecdsaPublicKey=claim, strict=True)
    first = await client.post(HYBRID, json=body, headers=tenant.auth("secret_live"))
    assert first.status_code == 201, first.text
    assert first.json()["data"]["strict"] is True
    assert_error(await client.post(HYBRID, json=body, headers=tenant.auth("secret_live")), 409, "ATT_002")
    # A copied public signature over an arbitrary message is refused in strict mode.
    assert_error(
        await client.post(
            HYBRID, json=hybrid_body(b"anything", ecdsa_key, pq, strict=True), headers=tenant.auth("secret_live")
        ),
        400,
        "ATT_001",
    )


async def test_strict_statement_cannot_be_mixed_with_other_keys_or_expire(client, clock, signer_setup):
    tenant, pq, ecdsa_key = signer_setup
    other_pq = await registered_signer(client, tenant)
    request = {"ecdsaPublicKey": evm_address(ecdsa_key), "pqcPublicKey": pq.public_hex, "algorithm": pq.algorithm}
    statement = (
        await client.post("/v1/attestations/challenge", json=request, headers=tenant.auth("secret_live"))
    ).json()["data"]
    message = bytes.fromhex(statement["message"])
    mixed = hybrid_body(message, ecdsa_key, other_pq, ecdsaPublicKey=evm_address(ecdsa_key), strict=True)
    assert_error(await client.post(HYBRID, json=mixed, headers=tenant.auth("secret_live")), 400, "ATT_001")
    clock.advance(601)
    late = hybrid_body(message, ecdsa_key, pq, ecdsaPublicKey=evm_address(ecdsa_key), strict=True)
    error = assert_error(await client.post(HYBRID, json=late, headers=tenant.auth("secret_live")), 409, "ATT_002")
    assert error["details"]["reason"] == "expired"


async def test_verify_raw_components_reports_each_half(client, signer_setup):
    tenant, pq, ecdsa_key = signer_setup
    message = b"raw verification"
    body = hybrid_body(message, ecdsa_key, pq)
    v = (await client.post(VERIFY, json=body, headers=tenant.auth("secret_live"))).json()["data"]
    assert (v["valid"], v["ecdsaValid"], v["pqcValid"], v["attestationId"]) == (True, True, True, None)
    bad = {**body, "pqcSignature": pq.sign(b"other").hex()}
    v = (await client.post(VERIFY, json=bad, headers=tenant.auth("secret_live"))).json()["data"]
    assert (v["valid"], v["ecdsaValid"], v["pqcValid"]) == (False, True, False)
    stranger = PqSigner.new()  # raw verification does not require registration
    v = (
        await client.post(VERIFY, json=hybrid_body(message, ecdsa_key, stranger), headers=tenant.auth("secret_live"))
    ).json()["data"]
    assert v["valid"]


@pytest.mark.parametrize("algorithm", ["ml-dsa-44", "ml-dsa-87", "slh-dsa-128s"])
async def test_verify_single_signature_form(client, tenant, algorithm):
    signer = PqSigner.new(algorithm)
    message = b"managed custody verification"
    body = {
        "public_key": signer.public_hex,
        "message": message.hex(),
        "signature": signer.sign(message).hex(),
        "algorithm": algorithm,
    }
    v = (await client.post(VERIFY, json=body, headers=tenant.auth("secret_live"))).json()["data"]
    assert v["valid"] and v["pqcValid"] and v["ecdsaValid"] is None
    v = (await client.post(VERIFY, json={**body, "message": "00"}, headers=tenant.auth("secret_live"))).json()["data"]
    assert not v["valid"]


async def test_verify_rejects_mixed_or_partial_forms(client, tenant):
    headers = tenant.auth("secret_live")
    for body in (
        {},
        {"attestationId": "att_x", "message": "00"},
        {"message": "00", "algorithm": "ml-dsa-44"},
        {"public_key": "00", "message": "00", "signature": "00", "algorithm": "ml-dsa-44", "chain": "x"},
    ):
        assert_error(await client.post(VERIFY, json=body, headers=headers), 400, "REQ_001")
    error = assert_error(
        await client.post(
            VERIFY,
            json={"public_key": "00", "message": "00", "signature": "00", "algorithm": "ml-dsa-44"},
            headers=headers,
        ),
        400,
        "PQC_002",
    )
    assert error["details"]["field"] in ("public_key", "signature")


async def test_hex_fields_name_themselves(client, signer_setup):
    tenant, pq, ecdsa_key = signer_setup
    body = hybrid_body(b"m", ecdsa_key, pq)
    for field in ("message", "ecdsaSignature", "pqcSignature", "pqcPublicKey"):
        error = assert_error(
            await client.post(HYBRID, json={**body, field: "0xzz"}, headers=tenant.auth("secret_live")), 400, "PQC_002"
        )
        assert error["details"]["field"] == field
