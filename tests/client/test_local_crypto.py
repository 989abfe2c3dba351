"""Local key material: key files, ECDSA signing and Ethereum keystores, checked
against the server's own verification code (pqc) and an independent wallet
implementation (eth-account)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct

import pqc
from qday_client import EcdsaSigner, LocalError, keyfile, keystore, load_signer

# Web3 Secret Storage Definition, test vector "PBKDF2-SHA-256" (password "testpassword").
SPEC_VECTOR = {
    "crypto": {
        "cipher": "aes-128-ctr",
        "cipherparams": {"iv": "6087dab2f9fdbbfaddc31a909735c1e6"},
        "ciphertext": "5318b4d5bcd28de64ee5559e671353e16f075ecae9f99c7a79a38af5f869aa46",
        "kdf": "pbkdf2",
        "kdfparams": {
            "c": 262144,
            "dklen": 32,
            "prf": "hmac-sha256",
            "salt": "ae3cd4e7013836a3df6bd7241b12db061dbe2c6785853cce422d148a624ce0bd",
        },
        "mac": "517ead924a9d0dc3124507e3393d175ce3ff7c1e96529c6c555ce9e51205e9b2",
    },
    "id": "3198bc9c-6672-5ab3-d995-4942343ae5b6",
    "version": 3,
}
SPEC_SECRET = "7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d"
SPEC_ADDRESS = "0x008aeeda4d805471df9b2a5b0f38a0c3bcba786b"


@pytest.mark.parametrize("algorithm", ["ml-dsa-44", "ml-dsa-87", "slh-dsa-128s"])
def test_key_file_round_trip_is_owner_only_and_signs_what_the_server_verifies(tmp_path, algorithm):
    keypair = keyfile.generate(algorithm)
    path = keyfile.save(keypair, tmp_path / "pq.key")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = keyfile.load(path)
    assert loaded == keypair
    spec = pqc.SPECS[loaded.algorithm]
    assert (len(loaded.private_key), len(loaded.seed)) == (spec.private_key_size, spec.seed_size)
    signature = keyfile.sign(loaded, b"message", b"ctx")
    pqc.verify(loaded.algorithm, loaded.public_key, b"message", signature, b"ctx")
    assert "private" not in repr(loaded).lower() and loaded.private_key.hex() not in path.name


def test_key_file_is_never_overwritten_and_refused_when_others_can_read_it(tmp_path):
    path = keyfile.save(keyfile.generate("ml-dsa-44"), tmp_path / "pq.key")
    with pytest.raises(LocalError, match="exists"):
        keyfile.save(keyfile.generate("ml-dsa-44"), path)
    os.chmod(path, 0o644)
    with pytest.raises(LocalError, match="chmod 600"):
        keyfile.load(path)


def test_damaged_key_file_is_refused(tmp_path):
    path = keyfile.save(keyfile.generate("ml-dsa-44"), tmp_path / "pq.key")
    document = json.loads(path.read_text())
    document["seed"] = "00" * 32
    path.write_text(json.dumps(document))
    with pytest.raises(LocalError, match="does not re-create"):
        keyfile.load(path)


@pytest.mark.parametrize(
    "scheme,layout",
    [("eip191", pqc.SignatureLayout.RSV), ("digest", pqc.SignatureLayout.RSV), ("bip137", pqc.SignatureLayout.BIP137)],
)
def test_ecdsa_signatures_recover_to_the_signer_with_the_server_code(scheme, layout):
    signer = EcdsaSigner(os.urandom(32))
    message = os.urandom(32)
    signature = signer.sign(message, scheme)
    recovered = pqc.recover_public_key(pqc.message_digest(scheme, message), signature, layout)
    pqc.require_signer(recovered, signer.public_key())


def test_eip191_signature_matches_eth_account():
    key = os.urandom(32)
    signer = EcdsaSigner(key)
    expected = Account.sign_message(encode_defunct(primitive=b"hello"), private_key=key)
    assert signer.sign(b"hello", "eip191") == bytes(expected.signature)
    assert signer.address() == Account.from_key(key).address.lower()
    assert key.hex() not in repr(signer)


def test_keystore_spec_vector_decrypts_to_its_secret(tmp_path):
    path = tmp_path / "keystore.json"
    path.write_text(json.dumps(SPEC_VECTOR))
    signer = load_signer(str(path), lambda: "testpassword")
    assert signer.address() == SPEC_ADDRESS
    assert keystore.decrypt(SPEC_VECTOR, "testpassword").hex() == SPEC_SECRET
    with pytest.raises(LocalError, match="wrong keystore password"):
        keystore.decrypt(SPEC_VECTOR, "not the password")


def test_scrypt_keystore_written_by_eth_account_decrypts():
    key = os.urandom(32)
    document = Account.encrypt(key, "pw", kdf="scrypt", iterations=1 << 12)
    assert keystore.decrypt(document, "pw") == key


def test_ecdsa_key_sources(tmp_path, monkeypatch):
    key = os.urandom(32)
    raw, text = tmp_path / "raw.key", tmp_path / "hex.key"
    raw.write_bytes(key)
    text.write_text("0x" + key.hex() + "\n")
    monkeypatch.setenv("WALLET_KEY", key.hex())
    addresses = {
        load_signer(s, lambda: pytest.fail("no password needed")).address()
        for s in (str(raw), str(text), "env:WALLET_KEY", key.hex())
    }
    assert addresses == {EcdsaSigner(key).address()}
    with pytest.raises(LocalError):
        load_signer("not-a-key", lambda: "")
