"""The SDK against a real server over HTTP: typed results for every endpoint
family, typed errors carrying the spec's code, interoperability of local keys
with the server's verification (both ways), and no key in any log line."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest

import pqc
from cli.main import main as qday_main
from qday_client import (
    AccountError,
    AttestationError,
    AuthError,
    CryptoError,
    CustodyError,
    EcdsaSigner,
    QdayClient,
    RequestError,
    ScanError,
    attest,
    keyfile,
    models,
    register_key,
    verify_webhook,
)
from qday_client.errors import WebhookVerificationError
from tests.client.support import PASSWORD, new_account
from tests.custody.support import requires_softhsm
from tests.webhook_receiver import WebhookReceiver


@pytest.fixture
async def client(server):
    account = await new_account(server.base_url)
    async with QdayClient(account.key, server.base_url) as c:
        c.account = account
        yield c


async def test_local_key_registered_with_proof_of_possession_backs_a_strict_attestation(client, caplog):
    caplog.set_level(logging.DEBUG)
    keypair = keyfile.generate("ml-dsa-65")
    signer = EcdsaSigner(os.urandom(32))
    registered = await register_key(client, keypair, "ethereum")
    assert isinstance(registered, models.PqKey) and registered.origin == "registered"
    assert registered.fingerprint == pqc.public_key_fingerprint(keypair.public_key)
    assert [k.id for k in await client.list_keys()] == [registered.id]

    attestation = await attest(client, signer, keypair, metadata={"wallet": "cold-1"})
    assert attestation.strict and attestation.status == "verified" and attestation.ecdsa_scheme == "eip191"
    assert bytes.fromhex(attestation.message).decode().startswith("qday hybrid attestation v1")
    verification = await client.verify_attestation(attestation.id)
    assert (verification.valid, verification.ecdsa_valid, verification.pqc_valid) == (True, True, True)

    with pytest.raises(AttestationError) as replay:  # the statement is single-use
        await client.sign_hybrid(
            message=attestation.message,
            ecdsa_signature=signer.sign(bytes.fromhex(attestation.message), "eip191").hex(),
            ecdsa_public_key=signer.public_key().hex(),
            pqc_signature=keyfile.sign(keypair, bytes.fromhex(attestation.message)).hex(),
            pqc_public_key=keypair.public_key.hex(),
            algorithm="ml-dsa-65",
            strict=True,
        )
    assert (replay.value.code, replay.value.status) == ("ATT_002", 409)
    assert replay.value.request_id.startswith("req_")

    secrets = [client.account.key, keypair.seed.hex(), keypair.private_key.hex()[:64]]
    assert caplog.records and not any(s in caplog.text for s in secrets)


async def test_server_generated_key_signs_locally_and_local_signatures_verify_on_the_server(client):
    generated = await client.generate_key("ml-dsa-44", "ethereum")
    assert isinstance(generated, models.GeneratedKey) and generated.private_key not in repr(generated)
    keypair = keyfile.from_generated(generated)
    signer = EcdsaSigner(os.urandom(32))
    attestation = await attest(client, signer, keypair, chain="bitcoin", message=b"migrate to ml-dsa", context=b"qday")
    assert (attestation.strict, attestation.ecdsa_scheme, attestation.context) == (False, "bip137", b"qday".hex())
    assert (await client.verify_attestation(attestation.id)).valid

    message = b"plain signature"
    good = await client.verify_signature(
        public_key=generated.public_key,
        message=message.hex(),
        signature=keyfile.sign(keypair, message).hex(),
        algorithm="ml-dsa-44",
    )
    assert good.valid and good.ecdsa_valid is None
    forged = keyfile.sign(keyfile.generate("ml-dsa-44"), message)
    raw = await client.verify_hybrid(
        message=message.hex(),
        ecdsa_signature=signer.sign(message, "eip191").hex(),
        ecdsa_public_key=signer.address(),
        pqc_signature=forged.hex(),
        pqc_public_key=generated.public_key,
        algorithm="ml-dsa-44",
    )
    assert (raw.valid, raw.ecdsa_valid, raw.pqc_valid) == (False, True, False)


async def test_proof_of_possession_with_another_key_is_refused(client):
    keypair, other = keyfile.generate("ml-dsa-44"), keyfile.generate("ml-dsa-44")
    challenge = await client.registration_challenge("ml-dsa-44", keypair.public_key.hex())
    signature = keyfile.sign(other, challenge.challenge.encode(), bytes.fromhex(challenge.context))
    with pytest.raises(CryptoError) as refused:
        await client.register_key(
            "ml-dsa-44", "ethereum", keypair.public_key.hex(), challenge.challenge, signature.hex()
        )
    assert (refused.value.code, refused.value.status) == ("PQC_004", 422)
    with pytest.raises(CryptoError) as unregistered:
        await attest(client, EcdsaSigner(os.urandom(32)), keypair, message=b"not registered")
    assert unregistered.value.code == "PQC_003"


async def test_api_keys_accounts_watchlist_and_service_endpoints(client, server):
    assert (await client.health()).api_version == "v1"
    assert "/v1/sign/hybrid" in (await client.openapi())["paths"]
    with pytest.raises(AccountError) as duplicate:
        await client.register_account(client.account.email, PASSWORD)
    assert (duplicate.value.code, duplicate.value.status) == ("ACC_001", 409)

    created = await client.create_api_key("second", "publishable", "test")
    listed = {k.id: k for k in await client.list_api_keys()}
    assert {client.account.key_id, created.id} <= set(listed) and listed[created.id].prefix == created.prefix
    rotated = await client.rotate_api_key(created.id)
    assert rotated.rotated_from == created.id and rotated.key != created.key
    await client.delete_api_key(rotated.id)
    async with QdayClient(rotated.key, server.base_url) as revoked:
        with pytest.raises(AuthError) as denied:
            await revoked.detect_chains("0x" + "11" * 20)
    assert (denied.value.code, denied.value.details.get("reason")) == ("AUTH_002", "deleted")

    detection = await client.detect_chains("0x" + "11" * 20)
    assert detection.default_chain == "ethereum" and len(detection.chains) == 15
    watched = await client.watch("0x" + "22" * 20, label="treasury")
    assert [w.id for w in await client.watchlist()] == [watched.id]
    await client.unwatch(watched.id)
    assert await client.watchlist() == []
    with pytest.raises(RequestError) as missing:
        await client.unwatch(watched.id)
    assert (missing.value.code, missing.value.status) == ("REQ_005", 404)


async def test_scan_results_and_scan_errors_are_typed(client, anvil):
    funded = anvil.new_account(3 * 10**18)
    scan = await client.scan_wallet(funded.address, "ethereum")
    assert isinstance(scan, models.WalletScan) and scan.public_key_exposed is False
    assert scan.balance_at_risk == "3 ETH" and all(isinstance(f, models.RiskFactor) for f in scan.risk_factors)
    with pytest.raises(ScanError) as invalid:
        await client.scan_wallet("0x1234")
    assert (invalid.value.code, invalid.value.status) == ("SCAN_001", 400)
    async with QdayClient("svc_sec_test_sk_" + "x" * 43, client._http.base_url.__str__()) as stranger:
        with pytest.raises(AuthError) as unknown:
            await stranger.scan_wallet(funded.address)
    assert (unknown.value.code, unknown.value.status) == ("AUTH_001", 401)


async def test_managed_custody_needs_pro_and_then_signs(client, server):
    with pytest.raises(CustodyError) as free:
        await client.generate_key("ml-dsa-44", "ethereum", custody="managed")
    assert (free.value.code, free.value.status) == ("CUS_001", 403)
    with pytest.raises(RequestError):
        await client.managed_key("key_" + "0" * 30)
    usage = await client.usage()
    assert isinstance(usage, models.Usage) and usage.signatures == 0


@requires_softhsm
async def test_managed_key_lifecycle_through_the_sdk(client, server):
    # the command runs its own event loop: off this test's
    argv = ["admin", "set-plan", client.account.email, "pro", "--data-dir", str(server.data_dir)]
    assert await asyncio.to_thread(qday_main, argv) == 0
    managed = await client.generate_key("ml-dsa-44", "ethereum", custody="managed")
    assert isinstance(managed, models.ManagedKey) and managed.state == "active"
    signed = await client.sign_managed(managed.id, b"pay 1 BTC".hex(), "ml-dsa-44")
    pqc.verify("ml-dsa-44", bytes.fromhex(signed.public_key), b"pay 1 BTC", bytes.fromhex(signed.signature))
    assert (await client.delete_managed_key(managed.id)).state == "pending_deletion"
    assert (await client.cancel_key_deletion(managed.id)).state == "active"
    assert [e.type for e in await client.key_events(managed.id)] == [
        "created",
        "deletion_scheduled",
        "deletion_cancelled",
    ]
    assert (await client.managed_key(managed.id)).state == "active"
    assert (await client.usage()).signatures == 1


async def test_local_slh_dsa_key_registers_too(client):
    keypair = keyfile.generate("slh-dsa-128s")
    registered = await register_key(client, keypair, "bitcoin")
    assert (registered.algorithm, registered.chain, registered.public_key) == (
        "slh-dsa-sha2-128s",
        "bitcoin",
        keypair.public_key.hex(),
    )


@requires_softhsm
async def test_webhooks_through_the_sdk_and_a_delivery_verified_by_the_receiver(client):
    assert (await client.ready()).status == "ready"
    with WebhookReceiver() as receiver:
        made = await client.create_webhook(receiver.url, ["key.exposed"], "desk")
        assert made.secret.startswith("whsec_") and made.status == "enabled"
        assert [w.id for w in await client.webhooks()] == [made.id]
        signing = await client.webhook_signing_key()
        ping = await client.test_webhook(made.id)
        assert ping.delivered and ping.attempt is not None and ping.attempt.status == 200
        (got,) = await receiver.arrived(1)
        event = verify_webhook(got.body, got.headers, made.secret, signing.public_key)
        assert (event.id, event.type, event.data) == (ping.event_id, "ping", {"webhookId": made.id})
        with pytest.raises(WebhookVerificationError):
            verify_webhook(got.body + b" ", got.headers, made.secret, signing.public_key)
        rotated = await client.rotate_webhook_secret(made.id)
        with pytest.raises(WebhookVerificationError):  # the old delivery was signed under the old secret only
            verify_webhook(got.body, got.headers, rotated.secret, signing.public_key)
        (delivery,) = await client.webhook_deliveries(made.id)
        assert delivery.state == "delivered" and [a.status for a in delivery.attempts] == [200]
        await client.delete_webhook(made.id)
        assert await client.webhooks() == []
        with pytest.raises(RequestError) as refused:
            await client.create_webhook("ftp://127.0.0.1/x", ["key.exposed"])
        assert refused.value.code == "REQ_001"
