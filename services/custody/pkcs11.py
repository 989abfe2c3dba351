"""PKCS#11 custody: ML-DSA seeds kept only wrapped by a non-extractable AES key.

The token (SoftHSM2 by default, any PKCS#11 module with CKM_AES_GCM otherwise)
holds one AES-256 key per deployment, generated on the token with
CKA_SENSITIVE=true, CKA_EXTRACTABLE=false, CKA_MODIFIABLE=false, usable only to
encrypt and decrypt. For each managed key:

* create: 32 random seed bytes → public key → AES-256-GCM encryption *on the
  token* with a random 96-bit IV and associated data binding the key id,
  account, environment, algorithm and wrapping-key id → a 78-byte blob
  ``01 | len | wrapping-key CKA_ID | IV | ciphertext | tag`` that only the
  operational store keeps. Nothing per key is written to the token, so a crash
  can never leave a half-made key object behind on it.
* sign: decryption on the token → the seed in a ``bytearray`` for one
  signature (``pqc.sign``, OpenSSL through ``cryptography``) → overwritten.

Two process-wide facts shape this module:

* python-pkcs11 calls ``C_Initialize(NULL)``, which tells the module the
  application will not call it from several threads at once; SoftHSM2 then
  runs without internal locks (concurrent calls corrupt its heap, measured).
  Every call into a module therefore goes through ``_MODULE_LOCK``. A token
  decryption takes ~80 µs, so the lock is never the bottleneck of signing.
* SoftHSM2 reads ``SOFTHSM2_CONF`` once, in ``C_Initialize``, and sees tokens
  created by other processes only after re-initialising. One configuration
  per process, then; opening a second one while the first is in use is
  refused with a clear ``CustodyUnavailable``.

SoftHSM2 token set-up (and ``python -m services.custody.softhsm init DIR``) is in
``services.custody.softhsm``.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pqc
from pqc import Algorithm
from pqc.mldsa import public_key_of
from services.custody.backend import (
    CustodyKey,
    new_seed,
    require_managed_algorithm,
    scrub_bytes,
    wipe,
)
from services.custody.errors import CustodyIntegrityError, CustodyUnavailable

log = logging.getLogger("qday.custody")

#: Where Debian's ``softhsm2`` package installs the PKCS#11 module.
SOFTHSM_MODULE = "/usr/lib/softhsm/libsofthsm2.so"
DEFAULT_TOKEN_LABEL = "qday"
DEFAULT_WRAP_LABEL = "qday-wrap-v1"
BACKEND_NAME = "pkcs11-aes-gcm"

_BLOB_VERSION = 1
_IV_BYTES = 12
_TAG_BITS = 128
_SEED_BYTES = 32

_MODULE_LOCK = threading.RLock()


@dataclass
class _LoadedModule:
    lib: Any
    conf: str | None
    users: int = 0
    sessions: dict[str, int] = field(default_factory=dict)  # token label -> open sessions


_MODULES: dict[str, _LoadedModule] = {}


def _pkcs11() -> Any:
    try:
        import pkcs11
    except ImportError as exc:  # pragma: no cover - pinned dependency
        raise CustodyUnavailable("python-pkcs11 is not installed") from exc
    return pkcs11


def _acquire_module(path: str, conf: Path | None) -> _LoadedModule:
    """Load and initialise the module once per process (caller holds the lock)."""
    pkcs11 = _pkcs11()
    wanted = str(conf) if conf is not None else None
    loaded = _MODULES.get(path)
    if loaded is not None and wanted is not None and loaded.conf not in (None, wanted):
        if loaded.users:
            raise CustodyUnavailable(
                f"this process already uses the SoftHSM2 configuration {loaded.conf}; SoftHSM2 reads one "
                "configuration per process",
                configured=wanted,
            )
        os.environ["SOFTHSM2_CONF"] = wanted
        loaded.lib.reinitialize()
        loaded.conf, loaded.sessions = wanted, {}
    if loaded is None:
        if wanted is not None:
            os.environ["SOFTHSM2_CONF"] = wanted
        try:
            lib = pkcs11.lib(path)
        except pkcs11.PKCS11Error as exc:
            raise CustodyUnavailable(f"cannot load the PKCS#11 module {path}: {type(exc).__name__}") from exc
        loaded = _MODULES[path] = _LoadedModule(lib, wanted)
    loaded.users += 1
    return loaded


def _release_module(path: str) -> None:
    loaded = _MODULES.get(path)
    if loaded is not None and loaded.users > 0:
        loaded.users -= 1


# --- the backend ----------------------------------------------------------------------


def _aad(wrap_id: bytes, binding: bytes) -> bytes:
    return bytes((_BLOB_VERSION, len(wrap_id))) + wrap_id + binding


def _parse_blob(key_ref: bytes) -> tuple[bytes, bytes, bytes]:
    if len(key_ref) < 2 or key_ref[0] != _BLOB_VERSION:
        raise CustodyIntegrityError("stored key material has an unknown format")
    id_len = key_ref[1]
    wrap_id = key_ref[2 : 2 + id_len]
    iv = key_ref[2 + id_len : 2 + id_len + _IV_BYTES]
    ciphertext = key_ref[2 + id_len + _IV_BYTES :]
    if len(wrap_id) != id_len or len(iv) != _IV_BYTES or len(ciphertext) != _SEED_BYTES + _TAG_BITS // 8:
        raise CustodyIntegrityError("stored key material is truncated")
    return wrap_id, iv, ciphertext


class Pkcs11WrappedSeedCustody:
    """``KeyCustody`` over a PKCS#11 token holding one AES-256 wrapping key.

    ``conf`` is the SoftHSM2 configuration (None for other modules, which are
    configured their own way). Instances are thread-safe.
    """

    name = BACKEND_NAME

    def __init__(
        self,
        module: str,
        token_label: str,
        pin: str,
        wrap_label: str = DEFAULT_WRAP_LABEL,
        conf: Path | None = None,
        create_wrap_key: bool = True,
    ) -> None:
        if not Path(module).is_file():
            raise CustodyUnavailable(f"PKCS#11 module {module} not found (SoftHSM2: apt-get install softhsm2)")
        if not pin:
            raise CustodyUnavailable("no PIN for the custody token: set QDAY_CUSTODY_PIN")
        self._module = module
        self._token_label = token_label
        self._wrap_label = wrap_label
        self._wrap_keys: dict[bytes, Any] = {}
        self._closed = False
        pkcs11 = _pkcs11()
        with _MODULE_LOCK:
            self._loaded = _acquire_module(module, conf)
            try:
                token = self._token()
                self._session = self._open_session(token, pin)
                self._loaded.sessions[token_label] = self._loaded.sessions.get(token_label, 0) + 1
                try:
                    if pkcs11.Mechanism.AES_GCM not in token.slot.get_mechanisms():
                        raise CustodyUnavailable(f"token {token_label!r} does not offer CKM_AES_GCM")
                    self._current_id = self._wrapping_key(create_wrap_key)
                except BaseException:
                    self._close_session()
                    raise
            except BaseException:
                _release_module(module)
                raise

    # --- set-up ---------------------------------------------------------------------

    def _token(self) -> Any:
        pkcs11 = _pkcs11()
        lib = self._loaded.lib
        tokens = list(lib.get_tokens(token_label=self._token_label))
        if not tokens and self._loaded.users == 1 and not any(self._loaded.sessions.values()):
            lib.reinitialize()  # SoftHSM2 sees tokens another process created only after this
            tokens = list(lib.get_tokens(token_label=self._token_label))
        if len(tokens) != 1:
            raise CustodyUnavailable(f"expected one PKCS#11 token labelled {self._token_label!r}, found {len(tokens)}")
        if not isinstance(tokens[0], pkcs11.Token):  # pragma: no cover - library contract
            raise CustodyUnavailable("unexpected token object")
        return tokens[0]

    def _open_session(self, token: Any, pin: str) -> Any:
        pkcs11 = _pkcs11()
        # Login state belongs to the application: a second session of this process
        # on a logged-in token must not log in again.
        if self._loaded.sessions.get(self._token_label):
            return token.open(rw=True)
        try:
            return token.open(rw=True, user_pin=pin)
        except pkcs11.UserAlreadyLoggedIn:
            return token.open(rw=True)
        except (pkcs11.PinIncorrect, pkcs11.PinInvalid, pkcs11.PinLenRange) as exc:
            raise CustodyUnavailable(f"the custody token {self._token_label!r} refused the PIN") from exc
        except pkcs11.PinLocked as exc:
            raise CustodyUnavailable(f"the custody token {self._token_label!r} has locked its user PIN") from exc

    def _find_wrap_keys(self) -> list[Any]:
        pkcs11 = _pkcs11()
        A = pkcs11.Attribute
        return list(
            self._session.get_objects(
                {A.CLASS: pkcs11.ObjectClass.SECRET_KEY, A.KEY_TYPE: pkcs11.KeyType.AES, A.LABEL: self._wrap_label}
            )
        )

    def _wrapping_key(self, create: bool) -> bytes:
        pkcs11 = _pkcs11()
        A = pkcs11.Attribute
        keys = self._find_wrap_keys()
        if not keys:
            if not create:
                raise CustodyUnavailable(f"no AES wrapping key labelled {self._wrap_label!r} on the token")
            self._session.generate_key(
                pkcs11.KeyType.AES,
                256,
                id=os.urandom(16),
                label=self._wrap_label,
                store=True,
                template={
                    A.TOKEN: True,
                    A.PRIVATE: True,
                    A.SENSITIVE: True,
                    A.EXTRACTABLE: False,
                    A.MODIFIABLE: False,
                    A.ENCRYPT: True,
                    A.DECRYPT: True,
                    A.WRAP: False,
                    A.UNWRAP: False,
                    A.SIGN: False,
                    A.VERIFY: False,
                    A.DERIVE: False,
                },
            )
            log.info("generated the custody wrapping key %r on token %r", self._wrap_label, self._token_label)
            keys = self._find_wrap_keys()
        for key in keys:
            if not key[A.SENSITIVE] or key[A.EXTRACTABLE]:
                raise CustodyUnavailable(
                    f"wrapping key {self._wrap_label!r} is extractable or not sensitive; refusing to use it"
                )
            self._wrap_keys[bytes(key[A.ID])] = key
        # Two processes racing on a module without a shared lock file may both create
        # one; each blob names its key, so either works. New blobs use the lowest id.
        return min(self._wrap_keys)

    def _wrap_key(self, wrap_id: bytes) -> Any:
        key = self._wrap_keys.get(wrap_id)
        if key is None:
            pkcs11 = _pkcs11()
            A = pkcs11.Attribute
            found = list(self._session.get_objects({A.CLASS: pkcs11.ObjectClass.SECRET_KEY, A.ID: wrap_id}))
            if len(found) != 1:
                raise CustodyIntegrityError("stored key material was wrapped under a key this token does not hold")
            key = self._wrap_keys[wrap_id] = found[0]
        return key

    # --- KeyCustody ---------------------------------------------------------------------

    def create(self, algorithm: Algorithm, binding: bytes) -> CustodyKey:
        """A fresh ML-DSA key: the public key and the wrapped seed."""
        require_managed_algorithm(algorithm)
        seed = new_seed()
        try:
            public_key = public_key_of(algorithm, seed)
            iv = os.urandom(_IV_BYTES)
            wrap_id = self._current_id
            plain = bytes(seed)  # python-pkcs11 takes only bytes; scrubbed below
            try:
                ciphertext = self._crypt("encrypt", wrap_id, plain, iv, binding)
            finally:
                scrub_bytes(plain)
            key_ref = bytes((_BLOB_VERSION, len(wrap_id))) + wrap_id + iv + ciphertext
            # Read it back through the token before anyone stores it: a blob that
            # does not open is never written.
            check = self._unwrap(key_ref, binding)
            try:
                if not hmac.compare_digest(check, seed):
                    raise CustodyIntegrityError("wrapped seed did not read back")
            finally:
                wipe(check)
            return CustodyKey(public_key, key_ref, self.name, wrap_id.hex())
        finally:
            wipe(seed)

    def sign(self, algorithm: Algorithm, key_ref: bytes, binding: bytes, message: bytes, context: bytes) -> bytes:
        """Unwrap the seed on the token, sign once, overwrite the seed."""
        require_managed_algorithm(algorithm)
        seed = self._unwrap(key_ref, binding)
        try:
            return pqc.sign(algorithm, seed, message, context)  # type: ignore[arg-type]  # a bytearray, to be wiped
        finally:
            wipe(seed)

    def destroy(self, key_ref: bytes, binding: bytes) -> None:
        """Nothing to do on the token: it holds no per-key object. The store
        destroys the key by erasing its wrapped seed."""

    def describe(self) -> dict[str, str]:
        """Module, token and wrapping-key identity (nothing secret)."""
        return {
            "backend": self.name,
            "module": self._module,
            "token": self._token_label,
            "wrappingKey": f"{self._wrap_label}/{self._current_id.hex()}",
        }

    def close(self) -> None:
        """Close this instance's session (the module stays loaded for the process)."""
        with _MODULE_LOCK:
            if self._closed:
                return
            self._closed = True
            self._close_session()
            _release_module(self._module)

    # --- internals ------------------------------------------------------------------------

    def _close_session(self) -> None:
        with contextlib.suppress(Exception):
            self._session.close()
        count = self._loaded.sessions.get(self._token_label, 0)
        self._loaded.sessions[self._token_label] = max(0, count - 1)

    def _crypt(self, operation: str, wrap_id: bytes, data: bytes, iv: bytes, binding: bytes) -> bytes:
        pkcs11 = _pkcs11()
        from pkcs11.mechanisms import GCMParams

        params = GCMParams(iv, _aad(wrap_id, binding), _TAG_BITS)
        with _MODULE_LOCK:
            if self._closed:
                raise CustodyUnavailable("the custody backend is closed")
            key = self._wrap_key(wrap_id)
            try:
                result: bytes = getattr(key, operation)(
                    data, mechanism=pkcs11.Mechanism.AES_GCM, mechanism_param=params
                )
                return result
            except (
                pkcs11.GeneralError,
                pkcs11.EncryptedDataInvalid,
                pkcs11.EncryptedDataLenRange,
                pkcs11.DataInvalid,
                pkcs11.DataLenRange,
            ) as exc:
                if operation == "decrypt":
                    raise CustodyIntegrityError("stored key material failed its integrity check") from None
                raise CustodyUnavailable(f"the custody token failed to wrap a key ({type(exc).__name__})") from None
            except pkcs11.PKCS11Error as exc:
                raise CustodyUnavailable(f"the custody token failed ({type(exc).__name__})") from None

    def _unwrap(self, key_ref: bytes, binding: bytes) -> bytearray:
        """The seed in a mutable buffer the caller must ``wipe``. Used by ``sign``
        and by tests that check where seeds can (not) be found; never by the API."""
        wrap_id, iv, ciphertext = _parse_blob(key_ref)
        plain = self._crypt("decrypt", wrap_id, ciphertext, iv, binding)
        try:
            if len(plain) != _SEED_BYTES:
                raise CustodyIntegrityError("stored key material has the wrong length")
            return bytearray(plain)
        finally:
            scrub_bytes(plain)
