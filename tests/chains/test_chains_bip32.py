"""Public BIP-32 derivation and SLIP-132 versions (chains/bitcoin/bip32.py), checked
against the BIP-32, BIP-49, BIP-84, BIP-86 and SLIP-132 test vectors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chains.bitcoin.bip32 import (
    HARDENED,
    ExtendedPublicKey,
    InvalidExtendedKey,
    PrivateKeyRefused,
    key_version,
    looks_private,
    parse_extended_key,
)
from chains.codecs.base58 import b58check_decode, b58check_encode
from chains.keys import KeyForm, key_addresses, parse_public_key

Loader = Callable[[str], Any]

#: SLIP-132 "address encoding" column -> KeyVersion.script.
SCRIPTS = {
    "P2PKH or P2SH": None,
    "P2WPKH in P2SH": "p2sh-p2wpkh",
    "P2WPKH": "p2wpkh",
    "Multi-signature P2WSH in P2SH": "p2sh-p2wsh",
    "Multi-signature P2WSH": "p2wsh",
}


def _path(text: str) -> list[int]:
    """``m/0H/1`` (BIP-32 vectors' notation) or ``m/84'/0'/0'`` -> child numbers."""
    parts = text.split("/")
    assert parts[0] == "m"
    return [int(p.rstrip("H'")) + (HARDENED if p[-1] in "H'" else 0) for p in parts[1:]]


def _bitcoin_rows(load_vectors: Loader) -> list[dict[str, Any]]:
    rows = load_vectors("wallets/slip132.json")["version_bytes"]
    return [row for row in rows if row["coin"] in ("Bitcoin", "Bitcoin Testnet")]


def _fields(key: ExtendedPublicKey) -> tuple[int, bytes, int, bytes, bytes]:
    return key.depth, key.parent_fingerprint, key.child_number, key.chain_code, key.public_key


# --- BIP-32 vectors 1-4 -------------------------------------------------------------------------


def test_bip32_valid_vectors_parse_reencode_and_derive(load_vectors: Loader) -> None:
    vectors = load_vectors("wallets/bip32.json")["valid_vectors"]
    assert [v["vector"] for v in vectors] == [1, 2, 3, 4]
    parsed = derived = refused = 0
    for vector in vectors:
        parent: ExtendedPublicKey | None = None
        parent_path: list[int] = []
        for chain in vector["chains"]:
            key, row = parse_extended_key(chain["ext_pub"])
            parsed += 1
            path = _path(chain["chain"])
            assert row.name == "xpub" and row.network == "mainnet"
            assert key.encode() == chain["ext_pub"]
            assert key.depth == len(path)
            assert key.child_number == (path[-1] if path else 0)
            if parent is None:
                assert path == []
            else:
                assert path[:-1] == parent_path  # each chain extends the previous by one step
                assert key.parent_fingerprint == parent.fingerprint
                if path[-1] >= HARDENED:
                    with pytest.raises(InvalidExtendedKey, match="hardened derivation needs the private key"):
                        parent.derive(path[-1])
                    refused += 1
                else:
                    assert parent.derive(path[-1]).encode() == chain["ext_pub"]
                    derived += 1
            parent, parent_path = key, path
    assert (parsed, derived, refused) == (17, 6, 7)


# --- BIP-32 vector 5 ----------------------------------------------------------------------------


def test_bip32_invalid_keys_refused(load_vectors: Loader) -> None:
    keys = load_vectors("wallets/bip32.json")["invalid_extended_keys"]["keys"]
    assert len(keys) == 16
    for case in keys:
        text, reason = case["key"], case["reason"]
        # every xprv-looking key (whatever else is wrong) and an xpub carrying private key
        # data (0x00 ‖ k) are private material; the rest are plain invalid public keys
        private = text.startswith("xprv") or reason == "pubkey version / prvkey mismatch"
        expected = PrivateKeyRefused if private else InvalidExtendedKey
        with pytest.raises(expected) as caught:
            parse_extended_key(text)
        assert type(caught.value) is expected, reason
        assert text not in str(caught.value)
        assert (looks_private(text) is not None) == private, reason


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("invalid pubkey prefix 04", "invalid public key prefix 04"),
        ("invalid pubkey prefix 01", "invalid public key prefix 01"),
        ("zero depth with non-zero parent fingerprint", "zero depth with a non-zero parent fingerprint"),
        ("zero depth with non-zero index", "zero depth with a non-zero child number"),
        ("unknown extended key version", "unknown extended key version"),
        ("invalid pubkey 020000000000000000000000000000000000000000000000000000000000000007", "not a point"),
    ],
)
def test_bip32_invalid_public_keys_give_the_reason(load_vectors: Loader, reason: str, message: str) -> None:
    keys = load_vectors("wallets/bip32.json")["invalid_extended_keys"]["keys"]
    texts = [k["key"] for k in keys if k["reason"] == reason and not k["key"].startswith("xprv")]
    assert texts
    for text in texts:
        with pytest.raises(InvalidExtendedKey, match=message):
            parse_extended_key(text)


def test_bad_text_is_invalid_extended_key(load_vectors: Loader) -> None:
    xpub = load_vectors("wallets/bip32.json")["valid_vectors"][0]["chains"][0]["ext_pub"]
    for text in ("", "not-base58-0OIl", xpub[:-1] + "9", b58check_encode(b58check_decode(xpub)[:-1])):
        with pytest.raises(InvalidExtendedKey):
            parse_extended_key(text)


# --- derivation limits and re-encoding ----------------------------------------------------------


def test_derive_limits_and_reencoding(load_vectors: Loader) -> None:
    bip84 = load_vectors("wallets/bip84.json")
    zpub, row = parse_extended_key(bip84["account"]["xpub"])
    assert (row.name, row.network, row.script) == ("zpub", "mainnet", "p2wpkh")
    for index in (-1, 2**32, HARDENED, 2**32 - 1):
        with pytest.raises(InvalidExtendedKey):
            zpub.derive(index)
    deepest = ExtendedPublicKey(zpub.version, 255, b"\0" * 4, 0, zpub.chain_code, zpub.public_key)
    with pytest.raises(InvalidExtendedKey, match="depth 255"):
        deepest.derive(0)
    assert zpub.derive_path([]) == zpub
    # the same key under the xpub version: same fields, same children
    as_xpub, xrow = parse_extended_key(zpub.encode(bytes.fromhex("0488b21e")))
    assert xrow.name == "xpub" and as_xpub.public_key == zpub.public_key
    assert as_xpub.derive(7).public_key == zpub.derive(7).public_key
    with pytest.raises(InvalidExtendedKey):
        zpub.encode(bytes.fromhex("04b2430c"))  # a private version: never written


# --- BIP-49 / BIP-84 / BIP-86 -------------------------------------------------------------------


def test_bip49_first_receive_key(load_vectors: Loader) -> None:
    fields = {f["name"]: f["value"] for g in load_vectors("wallets/bip49.json")["groups"] for f in g["fields"]}
    account, row = parse_extended_key(fields["account0Xpub"])
    assert (row.name, row.network, row.script) == ("upub", "testnet", "p2sh-p2wpkh")
    assert account.derive_path([0, 0]).public_key.hex() == fields["account0recvPublicKeyHex"]


def test_bip84_receive_and_change_keys(load_vectors: Loader) -> None:
    bip84 = load_vectors("wallets/bip84.json")
    account, _ = parse_extended_key(bip84["account"]["xpub"])
    assert len(bip84["addresses"]) == 3
    for entry in bip84["addresses"]:
        path = _path(entry["path"])
        assert path[:3] == _path(bip84["account"]["path"])
        assert account.derive_path(path[3:]).public_key.hex() == entry["pubkey"]


def test_bip86_receive_and_change_keys(load_vectors: Loader) -> None:
    bip86 = load_vectors("wallets/bip86.json")
    account, row = parse_extended_key(bip86["account"]["xpub"])
    assert row.name == "xpub"
    assert len(bip86["addresses"]) == 3
    for entry in bip86["addresses"]:
        child = account.derive_path(_path(entry["path"])[3:])
        assert child.encode() == entry["xpub"]
        assert child.public_key[1:].hex() == entry["internal_key"]


# --- SLIP-132 -----------------------------------------------------------------------------------


def test_slip132_table_matches_the_bitcoin_rows(load_vectors: Loader) -> None:
    rows = _bitcoin_rows(load_vectors)
    assert len(rows) == 10
    key, _ = parse_extended_key(load_vectors("wallets/bip32.json")["valid_vectors"][0]["chains"][0]["ext_pub"])
    for entry in rows:
        public, private = bytes.fromhex(entry["public_version_hex"]), bytes.fromhex(entry["private_version_hex"])
        row = key_version(public)
        assert row is not None
        assert (row.name, row.version) == (entry["public_prefix"], public)
        assert row.network == ("mainnet" if entry["coin"] == "Bitcoin" else "testnet")
        assert row.script == SCRIPTS[entry["address_encoding"]]
        assert key_version(private) is None
        text = key.encode(public)
        assert text.startswith(entry["public_prefix"])
        assert parse_extended_key(text) == (ExtendedPublicKey(public, *_fields(key)), row)
        # the same payload under the private version is refused, named by its prefix
        private_text = b58check_encode(private + b58check_decode(text)[4:])
        assert private_text.startswith(entry["private_prefix"])
        label = f"extended private key ({entry['private_prefix']})"
        assert looks_private(private_text) == label
        with pytest.raises(PrivateKeyRefused, match=label.replace("(", r"\(").replace(")", r"\)")):
            parse_extended_key(private_text)


def test_slip132_vectors_first_address(load_vectors: Loader) -> None:
    forms = {None: KeyForm.P2PKH, "p2sh-p2wpkh": KeyForm.P2SH_P2WPKH, "p2wpkh": KeyForm.P2WPKH}
    vectors = load_vectors("wallets/slip132.json")["bitcoin_test_vectors"]["vectors"]
    assert len(vectors) == 3
    for vector in vectors:
        account, row = parse_extended_key(vector["account_xpub"])
        assert account.depth == 3
        assert looks_private(vector["account_xprv"]) == f"extended private key ({vector['account_xprv'][:4]})"
        path = _path(vector["address_path"])
        assert path[:3] == _path(vector["account_path"])
        child = account.derive_path(path[3:])
        places = key_addresses(parse_public_key(child.public_key))
        assert vector["address"] in [p.text for p in places if p.form is forms[row.script]]


# --- looks_private ------------------------------------------------------------------------------


def test_looks_private_on_wif_keys(load_vectors: Loader) -> None:
    entries = load_vectors("bitcoin/key_io_valid.json")
    private = [e for e in entries if e[2]["isPrivkey"]]
    kinds = {(e[2]["chain"] == "main", e[2]["isCompressed"]) for e in private}
    assert kinds == {(True, True), (True, False), (False, True), (False, False)}
    for text, _, _ in private:
        assert looks_private(text) == "WIF private key"
        with pytest.raises(PrivateKeyRefused) as caught:
            parse_extended_key(text)
        assert text not in str(caught.value)
    for text, _, _ in (e for e in entries if not e[2]["isPrivkey"]):
        assert looks_private(text) is None


def test_looks_private_on_wallet_vectors(load_vectors: Loader) -> None:
    bip84 = load_vectors("wallets/bip84.json")
    bip49 = {f["name"]: f["value"] for g in load_vectors("wallets/bip49.json")["groups"] for f in g["fields"]}
    vector1 = load_vectors("wallets/bip32.json")["valid_vectors"][0]["chains"][0]
    tprv = b58check_encode(bytes.fromhex("04358394") + b58check_decode(vector1["ext_prv"])[4:])
    assert looks_private(vector1["ext_prv"]) == "extended private key (xprv)"
    assert looks_private(tprv) == "extended private key (tprv)"
    assert looks_private(bip84["account"]["xpriv"]) == "extended private key (zprv)"
    assert looks_private(bip49["account0Xpriv"]) == "extended private key (uprv)"
    assert looks_private(bip49["account0recvPrivateKey"]) == "WIF private key"
    for entry in bip84["addresses"]:
        assert looks_private(entry["privkey"]) == "WIF private key"
        assert looks_private(entry["address"]) is None
        assert looks_private(entry["pubkey"]) is None
    for public in (vector1["ext_pub"], bip84["account"]["xpub"], bip49["account0Xpub"], bip49["address"], ""):
        assert looks_private(public) is None


def test_children_are_derive_of_each_index(load_vectors: Loader) -> None:
    """The batch a gap-limit scan uses gives exactly what one ``derive`` per index gives."""
    receive = parse_extended_key(load_vectors("wallets/bip84.json")["account"]["xpub"])[0].derive(0)
    assert list(receive.children(range(25))) == [receive.derive(i) for i in range(25)]
    with pytest.raises(InvalidExtendedKey, match="hardened"):
        list(receive.children([3, HARDENED]))
