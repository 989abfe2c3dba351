"""The embedded PKCS#11 backend: the wrapping key never leaves the token, each
seed exists only wrapped and bound to its key row, and nothing per key is kept
on the token."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pkcs11
import pytest

import pqc
from pqc import Algorithm
from pqc.mldsa import public_key_of
from services.custody.backend import binding_for, scrub_bytes, wipe
from services.custody.errors import CustodyIntegrityError, CustodyUnavailable
from services.custody.pkcs11 import _MODULE_LOCK, Pkcs11WrappedSeedCustody
from services.custody.softhsm import SoftHsmLayout, ensure_softhsm_token, open_softhsm
from tests.custody.support import requires_softhsm, shared_softhsm_conf
from tests.support import REPO_ROOT

pytestmark = requires_softhsm
BIND = binding_for("key_one", "usr_one", "live", "ml-dsa-65")


def _token_secret_keys(backend) -> list:
    with _MODULE_LOCK:
        return list(backend._session.get_objects({pkcs11.Attribute.CLASS: pkcs11.ObjectClass.SECRET_KEY}))


def test_wrapping_key_is_sensitive_non_extractable_and_unreadable(backend):
    A = pkcs11.Attribute
    (key,) = [k for k in _token_secret_keys(backend) if k[A.LABEL] == "qday-wrap-v1"]
    assert key[A.SENSITIVE] and not key[A.EXTRACTABLE] and key[A.NEVER_EXTRACTABLE] and key[A.ALWAYS_SENSITIVE]
    assert key[A.LOCAL]  # generated on the token, never imported
    assert not key[A.MODIFIABLE] and not key[A.WRAP]
    with _MODULE_LOCK, pytest.raises(pkcs11.AttributeSensitive):
        key[A.VALUE]
    with _MODULE_LOCK, pytest.raises(pkcs11.PKCS11Error):
        key[A.EXTRACTABLE] = True


@pytest.mark.parametrize("algorithm", [Algorithm.ML_DSA_44, Algorithm.ML_DSA_65, Algorithm.ML_DSA_87])
def test_created_keys_sign_verifiable_signatures(backend, algorithm):
    binding = binding_for("key_x", "usr_x", "live", algorithm.value)
    made = backend.create(algorithm, binding)
    assert len(made.public_key) == pqc.SPECS[algorithm].public_key_size
    assert made.backend == "pkcs11-aes-gcm" and made.wrapping_key == backend.describe()["wrappingKey"].split("/")[1]
    assert len(made.key_ref) == 2 + 16 + 12 + 32 + 16
    for context in (b"", b"qday", bytes(range(255))):
        signature = backend.sign(algorithm, made.key_ref, binding, b"message", context)
        pqc.verify(algorithm, made.public_key, b"message", signature, context)
    seed = backend._unwrap(made.key_ref, binding)
    assert public_key_of(algorithm, seed) == made.public_key
    assert bytes(seed) not in made.key_ref and bytes(seed) not in repr(made).encode()
    wipe(seed)
    assert seed == bytearray(32)


def test_wrapped_seed_is_bound_to_its_row(backend):
    made = backend.create(Algorithm.ML_DSA_65, BIND)
    others = [
        binding_for("key_two", "usr_one", "live", "ml-dsa-65"),  # swapped into another row
        binding_for("key_one", "usr_two", "live", "ml-dsa-65"),  # another account
        binding_for("key_one", "usr_one", "test", "ml-dsa-65"),  # the other environment
        binding_for("key_one", "usr_one", "live", "ml-dsa-87"),
    ]  # relabelled algorithm
    for binding in others:
        with pytest.raises(CustodyIntegrityError):
            backend.sign(Algorithm.ML_DSA_65, made.key_ref, binding, b"m", b"")
    for position in (2, 20, 40, len(made.key_ref) - 1):  # wrapping-key id, IV, ciphertext, tag
        tampered = bytearray(made.key_ref)
        tampered[position] ^= 1
        with pytest.raises(CustodyIntegrityError):
            backend.sign(Algorithm.ML_DSA_65, bytes(tampered), BIND, b"m", b"")
    for broken in (b"", b"\x02" + made.key_ref[1:], made.key_ref[:-1]):
        with pytest.raises(CustodyIntegrityError):
            backend.sign(Algorithm.ML_DSA_65, broken, BIND, b"m", b"")
    # The failures left the token's session usable.
    pqc.verify("ml-dsa-65", made.public_key, b"m", backend.sign(Algorithm.ML_DSA_65, made.key_ref, BIND, b"m", b""))


def test_no_per_key_objects_on_the_token(backend):
    before = len(_token_secret_keys(backend))
    for _ in range(20):
        made = backend.create(Algorithm.ML_DSA_44, BIND)
        backend.destroy(made.key_ref, BIND)
    assert len(_token_secret_keys(backend)) == before


def test_slh_dsa_cannot_be_held(backend):
    with pytest.raises(ValueError):
        backend.create(Algorithm.SLH_DSA_SHA2_128S, BIND)


def test_a_second_instance_shares_the_wrapping_key_and_login(backend):
    other = open_softhsm(shared_softhsm_conf())
    try:
        assert other.describe() == backend.describe()
        made = backend.create(Algorithm.ML_DSA_65, BIND)
        pqc.verify("ml-dsa-65", made.public_key, b"m", other.sign(Algorithm.ML_DSA_65, made.key_ref, BIND, b"m", b""))
    finally:
        other.close()
    made = backend.create(Algorithm.ML_DSA_65, BIND)  # the first is still logged in
    assert backend.sign(Algorithm.ML_DSA_65, made.key_ref, BIND, b"m", b"")


def test_unusable_configurations_are_clear_errors(backend, tmp_path):
    with pytest.raises(CustodyUnavailable, match="not found"):
        Pkcs11WrappedSeedCustody(str(tmp_path / "missing.so"), "qday", "1234")
    with pytest.raises(CustodyUnavailable, match="PIN"):
        Pkcs11WrappedSeedCustody("/usr/lib/softhsm/libsofthsm2.so", "qday", "")
    with pytest.raises(CustodyUnavailable, match="expected one PKCS#11 token"):
        Pkcs11WrappedSeedCustody("/usr/lib/softhsm/libsofthsm2.so", "no-such-token", "1234")
    # SoftHSM2 reads one configuration per process; a second one is refused while the first is in use.
    with pytest.raises(CustodyUnavailable, match="one configuration per process"):
        open_softhsm(SoftHsmLayout(tmp_path / "other").conf)


def test_token_creation_is_idempotent_and_owner_only(tmp_path):
    conf = SoftHsmLayout(tmp_path / "softhsm").conf
    pin = ensure_softhsm_token(conf)
    assert ensure_softhsm_token(conf) == pin
    layout = SoftHsmLayout(conf.parent)
    for path in (layout.directory, layout.tokens, layout.conf, layout.user_pin, layout.so_pin):
        assert path.stat().st_mode & 0o077 == 0, path
    assert len(list(layout.tokens.iterdir())) == 1
    layout.user_pin.unlink()
    with pytest.raises(CustodyUnavailable, match="PIN is unknown"):
        ensure_softhsm_token(conf)
    assert ensure_softhsm_token(conf, pin=pin) == pin


def _init(directory: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "services.custody.softhsm_cli", "init", str(directory), *flags]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_the_init_command_makes_a_token_with_its_wrapping_key_once(tmp_path):
    """What `make` runs: a token and its wrapping key, then the same token again."""
    conf = SoftHsmLayout(tmp_path / "softhsm").conf
    first, again = _init(tmp_path / "softhsm"), _init(tmp_path / "softhsm")
    assert (first.returncode, first.stdout.strip()) == (0, str(conf)), first.stderr
    assert (again.returncode, again.stdout.strip()) == (0, str(conf)), again.stderr
    assert len(list(SoftHsmLayout(conf.parent).tokens.iterdir())) == 1
    missing = _init(tmp_path / "other", "--module", str(tmp_path / "no-such-module.so"))
    assert missing.returncode == 2 and missing.stderr.startswith("softhsm: ") and "is missing" in missing.stderr


def test_scrub_bytes_zeroes_a_private_buffer():
    value = bytes(bytearray(b"\x5a" * 32))
    scrub_bytes(value)
    assert value == bytes(32)
