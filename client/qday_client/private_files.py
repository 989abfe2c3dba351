"""Files only their owner may read: key files and the profile file.

``write_private`` creates a file with mode 0600 (never wider, whatever the
umask); ``read_private`` refuses a file that group or others can access, as
ssh does with private keys, so a secret left world-readable is noticed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from qday_client.errors import LocalError


def write_private(path: Path, data: bytes, *, overwrite: bool = False) -> None:
    """Write ``data`` to ``path`` with mode 0600; an existing file is an error unless ``overwrite``."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise LocalError(f"{path} exists; choose another file or pass --force") from None
    except OSError as exc:
        raise LocalError(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(data)


def read_private(path: Path) -> str:
    """The text of an owner-only file; ``LocalError`` if it is unreadable or open to other users."""
    try:
        mode = path.stat().st_mode
        text = path.read_text()
    except OSError as exc:
        raise LocalError(f"cannot read {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise LocalError(f"{path} is accessible by other users (mode {stat.S_IMODE(mode):o}); run: chmod 600 {path}")
    return text
