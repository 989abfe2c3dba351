"""The attestations page on both engines: attestations made through the JSON API are listed
in their own environment only, keyset-paged; the verify form gives the API's verdict (valid;
invalid with the failing signature named) by id or raw components; junk shows the API's
codes with 4xx; another tenant sees nothing; a form without its CSRF token is refused."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import httpx
import pytest

import api.dashboard.attestations as attestations_page
from tests.dashboard.support import PASSWORD, browser, csrf_of, logged_in
from tests.signing import hybrid_body, registered_signer
from tests.support import Tenant, make_tenant

HYBRID = "/v1/sign/hybrid"


async def _attest(client: httpx.AsyncClient, tenant: Tenant, key: str, message: bytes) -> tuple[str, dict[str, Any]]:
    """An attestation made through the API with ``key`` (its environment); its id and body."""
    signer = await registered_signer(client, tenant, key=key)
    body = hybrid_body(message, os.urandom(32), signer)
    r = await client.post(HYBRID, json=body, headers=tenant.auth(key))
    assert r.status_code == 201, r.text
    return r.json()["data"]["id"], body


async def _verify(b: httpx.AsyncClient, pasted: str, env: str = "live") -> httpx.Response:
    token = csrf_of((await b.get(f"/attestations?env={env}")).text)
    return await b.post(f"/attestations/verify?env={env}", data={"attestation": pasted, "csrf": token})


def _listed(page: str) -> list[str]:
    return re.findall(r'<input type="hidden" name="attestation" value="(att_[0-9a-f]+)">', page)


async def test_attestations_are_listed_per_environment_and_verified(app: Any, client: httpx.AsyncClient) -> None:
    tenant = await make_tenant(client, ("secret_live", "secret_test"))
    live_id, live_body = await _attest(client, tenant, "secret_live", b"live attestation")
    test_id, _ = await _attest(client, tenant, "secret_test", b"test attestation")
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        live = await b.get("/attestations")
        assert live.status_code == 200 and _listed(live.text) == [live_id]
        assert live_body["ecdsaPublicKey"] in live.text and "ml-dsa-65" in live.text and "verified" in live.text
        assert _listed((await b.get("/attestations?env=test")).text) == [test_id]

        by_id = await _verify(b, live_id)
        assert by_id.status_code == 200 and 'id="verdict"' in by_id.text
        assert re.search(rf"<strong>Valid</strong>: attestation <code>{live_id}</code>", by_id.text)

        raw = await _verify(b, json.dumps(live_body))
        assert raw.status_code == 200 and "<strong>Valid</strong>" in raw.text and "verdict-reasons" not in raw.text

        signature = bytearray(bytes.fromhex(live_body["pqcSignature"]))
        signature[10] ^= 0x01
        tampered = await _verify(b, json.dumps({**live_body, "pqcSignature": signature.hex()}))
        assert tampered.status_code == 200 and "<strong>Invalid</strong>" in tampered.text
        reasons = re.search(r'<ul id="verdict-reasons">(.*?)</ul>', tampered.text, re.S)
        assert reasons and "ml-dsa-65 signature does not verify" in reasons.group(1)
        assert "ECDSA signature was not made" not in reasons.group(1)
        assert "<dt>ECDSA signature</dt><dd>valid</dd>" in tampered.text

        other_signer = hybrid_body(b"live attestation", os.urandom(32), await registered_signer(client, tenant))
        wrong_ecdsa = await _verify(b, json.dumps({**live_body, "ecdsaSignature": other_signer["ecdsaSignature"]}))
        assert wrong_ecdsa.status_code == 200 and "ECDSA signature was not made" in wrong_ecdsa.text

        crossed = await _verify(b, test_id)  # the test environment's attestation, from a live page
        assert crossed.status_code == 404 and "REQ_005" in crossed.text
        assert (await _verify(b, test_id, env="test")).status_code == 200


async def test_junk_shows_the_api_codes(app: Any, client: httpx.AsyncClient) -> None:
    tenant = await make_tenant(client)
    _, body = await _attest(client, tenant, "secret_live", b"junk checks")
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        cases = {
            "{not json": (400, "REQ_002"),
            "two words": (400, "REQ_002"),
            "": (400, "REQ_001"),
            '{"message": "00"}': (400, "REQ_001"),  # in none of the three forms
            '{"bogus": 1}': (400, "REQ_001"),
            '{"attestationId": 7}': (400, "REQ_001"),
            json.dumps({**body, "pqcSignature": "zz"}): (400, "PQC_002"),
            json.dumps({**body, "algorithm": "rsa-2048"}): (400, "PQC_001"),
            "att_" + "0" * 30: (404, "REQ_005"),
        }
        for pasted, (status, code) in cases.items():
            r = await _verify(b, pasted)
            assert r.status_code == status and f"({code})" in r.text and 'role="alert"' in r.text, pasted
            assert 'id="verdict"' not in r.text
        kept = await _verify(b, "{not json")
        assert "{not json</textarea>" in kept.text  # the pasted text stays to be corrected


async def test_attestations_are_paged(app: Any, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    tenant = await make_tenant(client)
    made = {(await _attest(client, tenant, "secret_live", f"paged {i}".encode()))[0] for i in range(3)}
    monkeypatch.setattr(attestations_page, "PAGE_SIZE", 2)
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        first = await b.get("/attestations")
        cursor = re.search(r"cursor=([^\"&]+)", first.text)
        assert len(_listed(first.text)) == 2 and cursor is not None
        second = await b.get(f"/attestations?cursor={cursor.group(1)}")
        assert len(_listed(second.text)) == 1 and "cursor=" not in second.text
        assert set(_listed(first.text)) | set(_listed(second.text)) == made
        bad = await b.get("/attestations?cursor=nonsense")
        assert bad.status_code == 400 and "REQ_001" in bad.text


async def test_another_tenant_sees_nothing_and_forms_need_their_token(app: Any, client: httpx.AsyncClient) -> None:
    owner = await make_tenant(client)
    attestation_id, _ = await _attest(client, owner, "secret_live", b"mine only")
    async with browser(app) as b:
        other = f"other-{os.urandom(6).hex()}@example.com"
        assert (await b.post("/register", data={"email": other, "password": PASSWORD})).status_code == 303
        assert attestation_id not in (await b.get("/attestations")).text
        r = await _verify(b, attestation_id)
        assert r.status_code == 404 and "REQ_005" in r.text and "<strong>Valid</strong>" not in r.text
    async with browser(app) as b:
        await logged_in(b, owner.email, owner.password)
        r = await b.post("/attestations/verify", data={"attestation": attestation_id})
        assert r.status_code == 403 and 'id="verdict"' not in r.text
        r = await b.post("/attestations/verify", data={"attestation": attestation_id, "csrf": "0" * 64})
        assert r.status_code == 403 and 'id="verdict"' not in r.text
