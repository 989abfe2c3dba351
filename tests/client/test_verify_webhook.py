"""``qday_client.verify_webhook`` against deliveries signed here independently of the
server: HMAC-SHA256 with ``hmac`` and ML-DSA-65 with dilithium-py (pure-Python FIPS 204
final, empty context), in the wire format of docs/api.md (Webhooks)."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

import pytest
from dilithium_py.ml_dsa import ML_DSA_65  # type: ignore[import-untyped]  # ships no types
from hypothesis import given, settings
from hypothesis import strategies as st

import qday_client
from qday_client import LocalError, QdayError, WebhookEvent, WebhookVerificationError, verify_webhook

SECRET = "whsec_" + "A" * 43
NEW_SECRET = "whsec_" + "B" * 43
T = 1_700_000_000
EVENT: dict[str, Any] = {
    "id": "evt_01HZX",
    "type": "key.exposed",
    "createdAt": "2023-11-14T22:13:20.000Z",
    "data": {"address": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "chain": "ethereum", "before": 10, "after": 90},
}
BODY = json.dumps(EVENT, separators=(",", ":")).encode()


@functools.cache
def _keypair(name: str) -> tuple[bytes, bytes]:
    """A dilithium-py ML-DSA-65 key pair per name, made once per run."""
    return ML_DSA_65.keygen()


def _public_key(name: str = "qday") -> bytes:
    return _keypair(name)[0]


@functools.cache
def _mldsa(payload: bytes, key: str = "qday") -> bytes:
    """dilithium-py's ML-DSA-65 signature of ``payload``, empty context (cached: ~0.25 s each)."""
    return ML_DSA_65.sign(_keypair(key)[1], payload, ctx=b"")


def _mac(secret: str, t: int | str, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()


def _headers(
    body: bytes = BODY, t: int = T, secrets: tuple[str, ...] = (SECRET,), key: str = "qday", event_id: str | None = None
) -> dict[str, str]:
    """The headers the server sends with ``body`` at time ``t``."""
    return {
        "Content-Type": "application/json",
        "Qday-Event-Id": EVENT["id"] if event_id is None else event_id,
        "Qday-Signature": ",".join([f"t={t}", *(f"v1={_mac(s, t, body)}" for s in secrets)]),
        "Qday-Signature-MLDSA": _mldsa(f"{t}.".encode() + body, key).hex(),
    }


def _verify(
    body: bytes = BODY,
    headers: dict[str, str] | None = None,
    *,
    secret: str = SECRET,
    public_key: bytes | str | None = None,
    tolerance: int = 300,
    now: float | None = T + 1,
) -> WebhookEvent:
    return verify_webhook(
        body,
        _headers() if headers is None else headers,
        secret,
        _public_key() if public_key is None else public_key,
        tolerance=tolerance,
        now=now,
    )


def _refused(reason: str, *fragments: str, **kwargs: Any) -> WebhookVerificationError:
    """The error ``_verify(**kwargs)`` raises, checked for its reason and message fragments."""
    with pytest.raises(WebhookVerificationError) as raised:
        _verify(**kwargs)
    error = raised.value
    assert error.reason == reason, error.message
    assert error.code == "WEBHOOK" and error.details == {"reason": reason}
    for fragment in fragments:
        assert fragment in error.message
    return error


def test_exported_from_the_package() -> None:
    assert {"verify_webhook", "WebhookEvent", "WebhookVerificationError"} <= set(qday_client.__all__)
    assert issubclass(WebhookVerificationError, QdayError)


@pytest.mark.parametrize("as_hex", [False, True], ids=["bytes-key", "hex-key"])
def test_a_valid_delivery_verifies_and_returns_the_event(as_hex: bool) -> None:
    key = _public_key().hex() if as_hex else _public_key()
    event = _verify(public_key=key)
    assert event == WebhookEvent(id="evt_01HZX", type="key.exposed", created_at=EVENT["createdAt"], data=EVENT["data"])
    with pytest.raises(AttributeError):
        event.id = "evt_other"  # type: ignore[misc]  # frozen


def test_unknown_fields_and_event_types_are_accepted() -> None:
    body = json.dumps({**EVENT, "type": "future.event", "extra": 1}).encode()
    assert _verify(body, _headers(body)).type == "future.event"


def test_during_a_rotation_either_secret_verifies() -> None:
    headers = _headers(secrets=(NEW_SECRET, SECRET))
    assert headers["Qday-Signature"].count("v1=") == 2
    assert _verify(headers=headers, secret=SECRET).id == EVENT["id"]
    assert _verify(headers=headers, secret=NEW_SECRET).id == EVENT["id"]
    _refused("hmac_mismatch", "no v1", headers=headers, secret="whsec_" + "C" * 43)


@pytest.mark.parametrize("name", ["Qday-Signature", "Qday-Signature-MLDSA", "Qday-Event-Id"])
def test_a_missing_header_is_named(name: str) -> None:
    headers = {k: v for k, v in _headers().items() if k != name}
    error = _refused("missing_header", "missing header", headers=headers)
    assert error.message.split(":")[0] == f"missing header {name}"


def test_all_missing_headers_are_named() -> None:
    _refused(
        "missing_header",
        "Qday-Signature, Qday-Signature-MLDSA, Qday-Event-Id",
        headers={"Content-Type": "application/json"},
    )


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("", "not key=value"),
        ("garbage", "not key=value"),
        (f"v1={_mac(SECRET, T, BODY)}", "exactly one t"),
        (f"t={T},t={T},v1={_mac(SECRET, T, BODY)}", "exactly one t"),
        (f"t={T}", "no v1"),
        (f"t={T},v2=abc", "no v1"),
        (f"t=-{T},v1={_mac(SECRET, T, BODY)}", "t is not a Unix time"),
        (f"t={T}.5,v1={_mac(SECRET, T, BODY)}", "t is not a Unix time"),
        (f"t=,v1={_mac(SECRET, T, BODY)}", "t is not a Unix time"),
        (f"t={T},v1=zz", "not 64 hex digits"),
        (f"t={T},v1={_mac(SECRET, T, BODY)[:-2]}", "not 64 hex digits"),
        (f"t={T},v1={_mac(SECRET, T, BODY)},v1=", "not 64 hex digits"),
    ],
)
def test_a_malformed_signature_header_is_refused(value: str, fragment: str) -> None:
    headers = {**_headers(), "Qday-Signature": value}
    _refused("malformed_signature", "malformed Qday-Signature header", fragment, headers=headers)


def test_whitespace_after_commas_and_other_schemes_are_tolerated() -> None:
    mac = _mac(SECRET, T, BODY)
    headers = {**_headers(), "Qday-Signature": f"t={T}, v2=future, v1={mac}"}
    assert _verify(headers=headers).id == EVENT["id"]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("xyz", "not a hex digit"),
        ("abc", "odd number"),
        ("", "empty"),
        ("00" * 3308, "3309 bytes, got 3308"),
        ("00" * 3310, "3309 bytes, got 3310"),
    ],
)
def test_a_malformed_mldsa_header_is_refused_before_verifying(
    value: str, fragment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_run(*args: object) -> None:
        raise AssertionError("pqc.verify called on a signature of the wrong length")

    monkeypatch.setattr("pqc.verify", must_not_run)
    headers = {**_headers(), "Qday-Signature-MLDSA": value}
    _refused("malformed_signature", "malformed Qday-Signature-MLDSA header", fragment, headers=headers)


def test_a_wrong_secret_matches_no_v1() -> None:
    _refused("hmac_mismatch", "no v1 in Qday-Signature matches", secret=NEW_SECRET)


def test_a_signature_from_another_key_is_refused() -> None:
    headers = _headers(key="attacker")  # right HMAC, ML-DSA-65 under another key
    _refused("mldsa_invalid", "not valid under the webhook signing key", headers=headers)
    assert _verify(headers=headers, public_key=_public_key("attacker")).id == EVENT["id"]


def test_a_body_altered_by_one_byte_fails_both_signatures() -> None:
    altered = BODY.replace(b'"after":90', b'"after":91')
    assert len(altered) == len(BODY) and altered != BODY
    _refused("hmac_mismatch", body=altered)
    # Even with the secret (leaked, say), the ML-DSA signature still refuses it.
    headers = {**_headers(), "Qday-Signature": f"t={T},v1={_mac(SECRET, T, altered)}"}
    _refused("mldsa_invalid", body=altered, headers=headers)


@pytest.mark.parametrize(
    ("now", "tolerance", "reason", "fragment"),
    [
        (T + 301, 300, "timestamp_too_old", "301 s old"),
        (T - 301, 300, "timestamp_in_future", "301 s in the future"),
        (T + 11, 10, "timestamp_too_old", "more than the 10 s allowed"),
        (T - 11, 10, "timestamp_in_future", "more than the 10 s allowed"),
    ],
)
def test_timestamps_out_of_tolerance_are_refused(now: float, tolerance: int, reason: str, fragment: str) -> None:
    _refused(reason, fragment, now=now, tolerance=tolerance)


@pytest.mark.parametrize("now", [T - 300, T, T + 300, T + 299.9])
def test_timestamps_within_tolerance_are_accepted(now: float) -> None:
    assert _verify(now=now).id == EVENT["id"]


def test_the_default_clock_is_this_machine_s() -> None:
    _refused("timestamp_too_old", "s old", now=None)  # T is in 2023


def test_an_event_id_header_other_than_the_body_s_is_refused() -> None:
    _refused("event_id_mismatch", "'evt_other'", "'evt_01HZX'", headers=_headers(event_id="evt_other"))


@pytest.mark.parametrize(
    ("body", "reason", "fragment"),
    [
        (b"{not json", "body_not_json", "not valid JSON"),
        (b"", "body_not_json", "not valid JSON"),
        (b'["evt_01HZX"]', "body_not_event", "Expected `object`"),
        (b'{"id":"evt_01HZX","type":"ping","createdAt":"x"}', "body_not_event", "`data`"),
        (b'{"id":"evt_01HZX","type":"ping","createdAt":"x","data":[]}', "body_not_event", "`$.data`"),
    ],
)
def test_a_signed_body_that_is_not_an_event_is_refused(body: bytes, reason: str, fragment: str) -> None:
    _refused(reason, fragment, body=body, headers=_headers(body))


@pytest.mark.parametrize("case", [str.lower, str.upper, str.title])
def test_header_names_match_in_any_case(case: Callable[[str], str]) -> None:
    headers = {case(k): v for k, v in _headers().items()}
    assert _verify(headers=headers).id == EVENT["id"]


def test_a_header_repeated_with_different_values_is_refused() -> None:
    headers = {**_headers(), "qday-event-id": "evt_other"}
    _refused("duplicate_header", "Qday-Event-Id appears more than once", headers=headers)
    assert _verify(headers={**_headers(), "qday-event-id": EVENT["id"]}).id == EVENT["id"]


@pytest.mark.parametrize(
    ("public_key", "fragment"),
    [(b"\x00" * 1951, "1952-byte ml-dsa-65 key"), ("ab" * 1953, "got 1953 bytes"), ("not hex", "not hex")],
)
def test_a_public_key_that_cannot_be_the_signing_key_is_a_local_error(public_key: bytes | str, fragment: str) -> None:
    with pytest.raises(LocalError, match=fragment):
        _verify(public_key=public_key)


@pytest.mark.parametrize("secret", ["", "whsec_", "sk_test_abc"])
def test_a_secret_that_is_not_an_endpoint_secret_is_a_local_error(secret: str) -> None:
    with pytest.raises(LocalError, match="whsec_"):
        _verify(secret=secret)


_POSITION = st.integers(min_value=0, max_value=10_000)
_PROPERTY = settings(max_examples=50, deadline=None)


@_PROPERTY
@given(_POSITION, st.integers(min_value=1, max_value=255))
def test_any_single_byte_change_of_the_body_is_rejected(position: int, delta: int) -> None:
    altered = bytearray(BODY)
    altered[position % len(BODY)] ^= delta
    with pytest.raises(WebhookVerificationError):
        _verify(bytes(altered))


@_PROPERTY
@given(_POSITION, st.characters(codec="latin-1"))
def test_any_single_character_change_of_t_is_rejected(position: int, character: str) -> None:
    t = str(T)
    i = position % len(t)
    altered = t[:i] + character + t[i + 1 :]
    if altered == t:
        return
    headers = _headers()
    headers["Qday-Signature"] = headers["Qday-Signature"].replace(f"t={t}", f"t={altered}", 1)
    with pytest.raises(WebhookVerificationError):
        _verify(headers=headers, now=T)


@_PROPERTY
@given(_POSITION, st.integers(min_value=1, max_value=255))
def test_any_single_byte_change_of_the_mldsa_signature_is_rejected(position: int, delta: int) -> None:
    signature = bytearray(_mldsa(f"{T}.".encode() + BODY))
    signature[position % len(signature)] ^= delta
    headers = {**_headers(), "Qday-Signature-MLDSA": bytes(signature).hex()}
    with pytest.raises(WebhookVerificationError) as raised:
        _verify(headers=headers)
    assert raised.value.reason == "mldsa_invalid"


@_PROPERTY
@given(st.integers(min_value=0, max_value=31), st.integers(min_value=1, max_value=255))
def test_any_single_byte_change_of_the_hmac_is_rejected(position: int, delta: int) -> None:
    mac = bytearray.fromhex(_mac(SECRET, T, BODY))
    mac[position] ^= delta
    headers = {**_headers(), "Qday-Signature": f"t={T},v1={bytes(mac).hex()}"}
    with pytest.raises(WebhookVerificationError) as raised:
        _verify(headers=headers)
    assert raised.value.reason == "hmac_mismatch"
