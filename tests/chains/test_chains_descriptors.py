"""Output descriptors (BIP-380..386, BIP-389) against every vector of wallets/descriptors.json.

The service holds public data only, so three kinds of BIP vectors do not give a script here:

* Private keys. Many of the BIPs' *valid* examples use WIF keys or xprvs. The parser must
  refuse them with ``bip32.PrivateKeyRefused`` (before any other error about that key) and
  its message must not contain the key text, so those vectors are asserted to be refused
  that way, whether the BIP lists them as valid or invalid.
* Hardened steps after an xpub (``xpub.../3h/*``, ``/*h``): BIP-380 lists them as valid key
  expressions (the wallet may hold the private key), but deriving them needs the private
  key: asserted to raise ``InvalidDescriptor`` saying so.
* ``combo()`` (BIP-384): it stands for several scripts while an expansion is one; asserted
  to raise ``InvalidDescriptor`` naming it as unsupported.

Where a common library is more lenient than the BIPs (``0H`` markers, a trailing slash,
uncompressed keys in wpkh/wsh/tr, thresholds of 0 or above n, see INDEX.md), the BIP is followed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from coincurve import PrivateKey

from chains.bitcoin.bip32 import HARDENED, PrivateKeyRefused, parse_extended_key
from chains.bitcoin.descriptors import (
    Descriptor,
    InvalidDescriptor,
    descriptor_checksum,
    extended_key_descriptors,
    parse_descriptor,
)
from chains.bitcoin.script import taproot_output_key, witness_script_pubkey
from chains.codecs.bitcoin import BitcoinAddress
from chains.registry import Network

Loader = Callable[[str], Any]
VECTORS = "wallets/descriptors.json"
SCRIPT_SECTIONS = ("bip381", "bip382", "bip383", "bip384", "bip385", "bip386")
XPUB = "xpub6ERApfZwUNrhLCkDtcHTcxd75RbzS1ed54G1LkBUHQVHQKqhMkhgbmJbZRkrgZw4koxb5JaHWkY4ALHY2grBGRjaDMzQLcgJvLJuZZvRcEL"
UNCOMPRESSED = (
    "04a34b99f22c790c4e36b2b3c2c35a36db06226e41c692fc82b8b56ac1c540c5bd"
    "5b8dec5235a0fa8722476c7709c02559e3aa73aa03918ba2d492eea75abea235"
)
KEY = "03a34b99f22c790c4e36b2b3c2c35a36db06226e41c692fc82b8b56ac1c540c5bd"


def _key_parts(descriptor: str) -> list[str]:
    """The key part of each argument: after any origin, before any derivation step."""
    return [token.rpartition("]")[2].partition("/")[0] for token in re.split(r"[(),{}]", descriptor)]


def _private_keys(descriptor: str) -> list[str]:
    """WIF keys and xprv/tprv keys in the text, found independently of the parser."""
    return [
        key
        for key in _key_parts(descriptor)
        if key.startswith(("xprv", "tprv")) or re.fullmatch(r"[5KLc9][1-9A-HJ-NP-Za-km-z]{50,51}", key)
    ]


def _hardened_after_xpub(descriptor: str) -> bool:
    for token in re.split(r"[(),{}]", descriptor):
        key, *steps = token.rpartition("]")[2].split("/")
        if key.startswith(("xpub", "tpub")) and any(step.endswith(("h", "'", "h>")) for step in steps):
            return True
    return False


def _assert_refused_as_private(descriptor: str) -> None:
    with pytest.raises(PrivateKeyRefused) as caught:
        parse_descriptor(descriptor)
    message = str(caught.value) + repr(caught.value.details)
    for key in _private_keys(descriptor):
        assert key not in message


def _refused(text: str) -> bool:
    """Assert an invalid descriptor is refused: as private key material when it holds some
    (True), else as ``InvalidDescriptor`` (False)."""
    if _private_keys(text):
        _assert_refused_as_private(text)
        return True
    with pytest.raises(InvalidDescriptor):
        parse_descriptor(text)
    return False


def _assert_hardened_refused(descriptor: str) -> None:
    with pytest.raises(InvalidDescriptor, match="needs the private key"):
        parse_descriptor(descriptor)


def _scripts(descriptor: Descriptor, count: int, path: int = 0) -> list[str]:
    return [descriptor.expand(index, path).script_pubkey.hex() for index in range(count)]


# --- BIP-380: checksum and character set -------------------------------------------------


def test_bip380_checksum_vectors(load_vectors: Loader) -> None:
    cases = load_vectors(VECTORS)["bip380"]["checksum_tests"]
    assert len(cases) == 8
    for case in cases:
        text = case["descriptor"]
        if case["expected"].startswith("valid"):
            descriptor = parse_descriptor(text)
            assert descriptor.script == bytes.fromhex("deadbeef")
            assert descriptor.canonical() == "raw(deadbeef)#89f8spxm"
        else:
            with pytest.raises(InvalidDescriptor):
                parse_descriptor(text)


def test_checksum_function_and_require_checksum() -> None:
    assert descriptor_checksum("raw(deadbeef)") == "89f8spxm"
    parse_descriptor("raw(deadbeef)#89f8spxm", require_checksum=True)
    with pytest.raises(InvalidDescriptor, match="no '#checksum'"):
        parse_descriptor("raw(deadbeef)", require_checksum=True)
    with pytest.raises(InvalidDescriptor, match="position 4"):
        descriptor_checksum("raw(\u00dc)")


# --- BIP-380: key expressions (inside pk(), which allows every kind of key) ---------------


def test_bip380_valid_key_expressions(load_vectors: Loader) -> None:
    cases = load_vectors(VECTORS)["bip380"]["key_expressions_valid"]
    assert len(cases) == 21
    outcomes = {"parsed": 0, "private": 0, "hardened": 0}
    for case in cases:
        text = f"pk({case['expression']})"
        if _private_keys(text):
            _assert_refused_as_private(text)
            outcomes["private"] += 1
        elif _hardened_after_xpub(text):
            _assert_hardened_refused(text)
            outcomes["hardened"] += 1
        else:
            descriptor = parse_descriptor(text)
            assert descriptor.expand().script_pubkey.endswith(b"\xac")
            assert parse_descriptor(descriptor.canonical()) == descriptor
            outcomes["parsed"] += 1
    assert outcomes == {"parsed": 9, "private": 9, "hardened": 3}


def test_bip380_invalid_key_expressions(load_vectors: Loader) -> None:
    cases = load_vectors(VECTORS)["bip380"]["key_expressions_invalid"]
    assert len(cases) == 16
    assert sum(_refused(f"pk({case['expression']})") for case in cases) == 8  # private keys


# --- BIP-381..386: scripts of valid descriptors, invalid descriptors ------------------------


def test_bip381_to_386_valid_descriptors(load_vectors: Loader) -> None:
    vectors = load_vectors(VECTORS)
    outcomes = {"scripts": 0, "parsed_without_script": 0, "private": 0, "combo": 0}
    for section in SCRIPT_SECTIONS:
        for case in vectors[section]["valid"]:
            text = case["descriptor"]
            if _private_keys(text):
                _assert_refused_as_private(text)
                outcomes["private"] += 1
            elif text.startswith("combo("):
                with pytest.raises(InvalidDescriptor, match=r"combo\(\) is not supported"):
                    parse_descriptor(text)
                outcomes["combo"] += 1
            elif not case["scripts"]:
                parse_descriptor(text)
                outcomes["parsed_without_script"] += 1
            else:
                descriptor = parse_descriptor(text)
                expected = case["scripts"]
                assert descriptor.ranged == (len(expected) > 1), text
                assert _scripts(descriptor, len(expected)) == expected, text
                assert parse_descriptor(descriptor.canonical(), require_checksum=True) == descriptor
                outcomes["scripts"] += 1
    assert outcomes == {"scripts": 24, "parsed_without_script": 0, "private": 26, "combo": 2}


def test_bip381_to_386_invalid_descriptors(load_vectors: Loader) -> None:
    vectors = load_vectors(VECTORS)
    refused = [_refused(case["descriptor"]) for section in SCRIPT_SECTIONS for case in vectors[section]["invalid"]]
    assert (refused.count(False), refused.count(True)) == (27, 5)  # (invalid, private keys)


# --- BIP-389: multipath ---------------------------------------------------------------------


def test_bip389_valid_multipath_descriptors(load_vectors: Loader) -> None:
    cases = load_vectors(VECTORS)["bip389"]["valid"]
    expanded = private = 0
    for case in cases:
        text = case["descriptor"]
        if _private_keys(text):
            _assert_refused_as_private(text)
            private += 1
            continue
        descriptor = parse_descriptor(text)
        assert descriptor.multipath == len(case["expands_to"])
        for path, single_text in enumerate(case["expands_to"]):
            single = parse_descriptor(single_text)
            assert single.multipath == 1
            count = 3 if single.ranged else 1
            assert _scripts(descriptor, count, path) == _scripts(single, count), (text, path)
            assert [descriptor.expand(i, path).keys for i in range(count)] == [
                single.expand(i).keys for i in range(count)
            ]
            expanded += 1
    assert (expanded, private) == (12, 1)


def test_bip389_invalid_multipath_descriptors(load_vectors: Loader) -> None:
    cases = load_vectors(VECTORS)["bip389"]["invalid"]
    assert sum(_refused(case["descriptor"]) for case in cases) == 2  # private keys


# --- The API beyond the vectors ----------------------------------------------------------------


def test_canonical_normalises_hardened_markers_and_hex_case() -> None:
    descriptor = parse_descriptor(f"pkh([DEADBEEF/1/2'/3/4h]{KEY.upper()})")
    assert descriptor.canonical().split("#")[0] == f"pkh([deadbeef/1/2h/3/4h]{KEY})"


def test_expansion_keys_carry_origin_fingerprint_and_full_path() -> None:
    descriptor = parse_descriptor(f"wsh(sortedmulti(1,[d34db33f/48h/0h/0h/2h]{XPUB}/<0;1>/*,{KEY}))")
    assert descriptor.ranged and descriptor.multipath == 2
    keys = descriptor.expand(index=5, path=1).keys
    assert keys[0].fingerprint == bytes.fromhex("d34db33f")
    assert keys[0].path == (48 + HARDENED, HARDENED, HARDENED, 2 + HARDENED, 1, 5)
    assert keys[1].pubkey == bytes.fromhex(KEY) and keys[1].path == ()
    with pytest.raises(ValueError, match="branch"):
        descriptor.expand(path=2)


def test_taproot_keys_are_x_only() -> None:
    expansion = parse_descriptor(f"tr({XPUB}/0/*)").expand(3)
    assert len(expansion.keys[0].pubkey) == 32
    assert expansion.script_pubkey[:2] == b"\x51\x20"


def test_multisig_limits_and_large_thresholds() -> None:
    keys = [PrivateKey((i + 1).to_bytes(32, "big")).public_key.format().hex() for i in range(21)]
    with pytest.raises(InvalidDescriptor, match="at most 3 keys"):
        parse_descriptor(f"multi(1,{','.join(keys[:4])})")
    with pytest.raises(InvalidDescriptor, match="at most 20 keys"):
        parse_descriptor(f"wsh(multi(1,{','.join(keys)}))")
    parse_descriptor(f"sh(multi(1,{','.join(keys[:15])}))")
    script = parse_descriptor(f"wsh(multi(17,{','.join(keys[:17])}))").inner
    assert script is not None
    redeem = script.expand().script_pubkey
    assert redeem.startswith(bytes([1, 17])) and redeem.endswith(bytes([1, 17, 0xAE]))


def test_errors_say_where() -> None:
    with pytest.raises(InvalidDescriptor, match=r"sh\(\) is not allowed in sh\(\).*position 3"):
        parse_descriptor(f"sh(sh(pk({KEY})))")
    with pytest.raises(InvalidDescriptor, match="uncompressed"):
        parse_descriptor(f"wpkh({UNCOMPRESSED})")


def test_one_multipath_step_per_key_and_matching_lengths() -> None:
    with pytest.raises(InvalidDescriptor, match="only one multipath"):
        parse_descriptor(f"pkh({XPUB}/<0;1>/<2;3>)")
    with pytest.raises(InvalidDescriptor, match="different lengths"):
        parse_descriptor(f"sh(multi(1,{XPUB}/<0;1>/*,{XPUB}/<0;1;2>/*))")


def _address_script(address: str) -> str:
    return BitcoinAddress.decode(address, network=Network.MAINNET).script_pubkey.hex()


def test_a_zpub_is_the_wpkh_wallet_of_bip84(load_vectors: Loader) -> None:
    vector = load_vectors("wallets/bip84.json")
    (wallet,) = extended_key_descriptors(vector["account"]["xpub"])
    assert wallet.canonical().startswith("wpkh(xpub") and "/<0;1>/*)#" in wallet.canonical()
    receive0, receive1, change0 = (a["address"] for a in vector["addresses"])
    assert wallet.expand(0, 0).script_pubkey.hex() == _address_script(receive0)
    assert wallet.expand(1, 0).script_pubkey.hex() == _address_script(receive1)
    assert wallet.expand(0, 1).script_pubkey.hex() == _address_script(change0)
    with pytest.raises(PrivateKeyRefused) as refused:
        extended_key_descriptors(vector["account"]["xpriv"])
    assert vector["account"]["xpriv"] not in str(refused.value)


def test_a_bare_xpub_is_every_single_key_wallet_and_its_tr_is_bip86(load_vectors: Loader) -> None:
    vector = load_vectors("wallets/bip86.json")
    wallets = extended_key_descriptors(vector["account"]["xpub"])
    assert [w.canonical().split("(")[0] for w in wallets] == ["pkh", "sh", "wpkh", "tr"]
    first = vector["addresses"][0]
    assert wallets[3].expand(0, 0).script_pubkey.hex() == first["scriptPubKey"]


def test_a_multisig_cosigner_key_asks_for_the_whole_descriptor(load_vectors: Loader) -> None:
    zpub = load_vectors("wallets/bip84.json")["account"]["xpub"]
    key, _ = parse_extended_key(zpub)
    cosigner = key.encode(bytes.fromhex("02aa7ed3"))  # the same key as a Zpub (P2WSH multisig)
    with pytest.raises(InvalidDescriptor, match="one cosigner of a multisig"):
        extended_key_descriptors(cosigner)


def test_taproot_tree_gives_the_merkle_root_of_each_bip386_output(load_vectors: Loader) -> None:
    """The Merkle root ``taproot_tree`` gives, tweaking the internal key, is the output key of
    every BIP-386 vector with a script tree; each leaf key lists the leaves it is in."""
    checked = 0
    for case in load_vectors(VECTORS)["bip386"]["valid"]:
        text = case["descriptor"]
        if "," not in text or _private_keys(text) or not case["scripts"]:
            continue
        descriptor = parse_descriptor(text)
        for index, expected in enumerate(case["scripts"]):
            root, leaves = descriptor.taproot_tree(index)
            internal, *leaf_keys = descriptor.expand(index).keys
            assert (
                root is not None
                and witness_script_pubkey(1, taproot_output_key(internal.pubkey, root)).hex() == expected
            )
            assert set(leaves) == {k.pubkey for k in leaf_keys} and all(len(h) == 1 for h in leaves.values())
            checked += 1
    assert checked == 1  # the one BIP-386 tree vector of public keys (the others hold private keys)
    with pytest.raises(ValueError, match="no taproot tree"):
        parse_descriptor("wpkh(03a34b99f22c790c4e36b2b3c2c35a36db06226e41c692fc82b8b56ac1c540c5bd)").taproot_tree()
    assert parse_descriptor(f"tr({'a3' * 32})").taproot_tree() == (None, {})
