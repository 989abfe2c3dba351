"""SoftHSM2, the embedded PKCS#11 token of managed custody: its files under the data
directory and its creation with ``softhsm2-util`` (PINs generated and kept owner-only).
The backend that uses the token is ``services.custody.pkcs11``; the command that makes
one is ``services.custody.softhsm_cli``.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from services.custody.errors import CustodyUnavailable
from services.custody.pkcs11 import DEFAULT_TOKEN_LABEL, DEFAULT_WRAP_LABEL, SOFTHSM_MODULE, Pkcs11WrappedSeedCustody

log = logging.getLogger("qday.custody")


@dataclass(frozen=True, slots=True)
class SoftHsmLayout:
    """Files of an embedded SoftHSM2 token, all in one owner-only directory."""

    directory: Path

    @property
    def conf(self) -> Path:
        """The ``softhsm2.conf`` (``SOFTHSM2_CONF`` points here)."""
        return self.directory / "softhsm2.conf"

    @property
    def tokens(self) -> Path:
        """SoftHSM2's token directory (``directories.tokendir``)."""
        return self.directory / "tokens"

    @property
    def user_pin(self) -> Path:
        """Generated user PIN, used when ``QDAY_CUSTODY_PIN`` is not set."""
        return self.directory / "user-pin"

    @property
    def so_pin(self) -> Path:
        """Generated security-officer PIN (needed only to re-initialise the token)."""
        return self.directory / "so-pin"

    @property
    def lock(self) -> Path:
        """Serialises token creation and wrapping-key creation across processes."""
        return self.directory / ".lock"


def resolve_softhsm_conf(configured: str, data_dir: Path, environ: Mapping[str, str] | None = None) -> Path:
    """The SoftHSM2 configuration to use: the configured path; else an existing
    ``SOFTHSM2_CONF`` (how ``make test`` shares one throw-away token); else
    ``<data_dir>/softhsm/softhsm2.conf`` (created on first start)."""
    environ = os.environ if environ is None else environ
    if configured:
        return Path(configured).absolute()
    if environ.get("SOFTHSM2_CONF"):
        return Path(environ["SOFTHSM2_CONF"]).absolute()
    return (data_dir / "softhsm" / "softhsm2.conf").absolute()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _util() -> str:
    found = shutil.which("softhsm2-util") or (
        "/usr/bin/softhsm2-util" if Path("/usr/bin/softhsm2-util").exists() else None
    )
    if found is None:
        raise CustodyUnavailable("softhsm2-util not found: install SoftHSM2 (Debian: apt-get install softhsm2)")
    return found


def _token_labels(conf: Path) -> set[str]:
    done = subprocess.run(
        [_util(), "--show-slots"],
        env={**os.environ, "SOFTHSM2_CONF": str(conf)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise CustodyUnavailable(f"softhsm2-util --show-slots failed (exit {done.returncode}) for {conf}")
    return {m.group(1) for m in re.finditer(r"^\s*Label:\s*(.*?)\s*$", done.stdout, flags=re.M) if m.group(1)}


def ensure_softhsm_token(conf: Path, label: str = DEFAULT_TOKEN_LABEL, pin: str = "") -> str:
    """Create the configuration, PIN files and token when missing; return the user
    PIN. Idempotent; call under ``SoftHsmLayout.lock`` when processes may race.

    A configuration that already exists is used as it is (its token directory may
    live elsewhere). PINs are generated only for a token created here; for an
    existing token without a PIN file, ``pin`` (``QDAY_CUSTODY_PIN``) is required.
    """
    layout = SoftHsmLayout(conf.parent)
    layout.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not conf.exists():
        layout.tokens.mkdir(mode=0o700, exist_ok=True)
        _write_private(
            conf,
            "# qday managed custody: embedded SoftHSM2 token (created by qday)\n"
            f"directories.tokendir = {layout.tokens.absolute()}/\n"
            "objectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n",
        )
    if label in _token_labels(conf):
        if pin:
            return pin
        if layout.user_pin.exists():
            return layout.user_pin.read_text().strip()
        raise CustodyUnavailable(
            f"token {label!r} exists under {conf} but its user PIN is unknown: set QDAY_CUSTODY_PIN"
        )
    user_pin = pin
    if not user_pin:
        if not layout.user_pin.exists():
            _write_private(layout.user_pin, secrets.token_hex(16))
        user_pin = layout.user_pin.read_text().strip()
    if not layout.so_pin.exists():
        _write_private(layout.so_pin, secrets.token_hex(16))
    so_pin = layout.so_pin.read_text().strip()
    # softhsm2-util takes PINs only as arguments: they are visible in the process
    # list for the few milliseconds it runs (local, owner-only set-up step).
    done = subprocess.run(
        [_util(), "--init-token", "--free", "--label", label, "--pin", user_pin, "--so-pin", so_pin],
        env={**os.environ, "SOFTHSM2_CONF": str(conf)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise CustodyUnavailable(f"softhsm2-util --init-token failed (exit {done.returncode}) for {conf}")
    log.info("initialised SoftHSM2 token %r under %s", label, layout.tokens)
    return user_pin


def open_softhsm(
    conf: Path,
    token_label: str = DEFAULT_TOKEN_LABEL,
    pin: str = "",
    wrap_label: str = DEFAULT_WRAP_LABEL,
    module: str = SOFTHSM_MODULE,
) -> Pkcs11WrappedSeedCustody:
    """The embedded default: create the SoftHSM2 token under ``conf``'s directory
    on first use (with generated PINs unless ``pin`` is given), then open it."""
    if not Path(module).is_file():
        raise CustodyUnavailable(f"SoftHSM2 is not installed: {module} is missing (Debian: apt-get install softhsm2)")
    layout = SoftHsmLayout(conf.parent)
    with _file_lock(layout.lock):
        user_pin = ensure_softhsm_token(conf, token_label, pin)
        return Pkcs11WrappedSeedCustody(module, token_label, user_pin, wrap_label, conf=conf)
