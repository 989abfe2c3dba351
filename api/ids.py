"""Identifiers of the form ``<prefix>_<random>`` used by every resource."""

from __future__ import annotations

import base64
import os


def new_id(prefix: str) -> str:
    """A fresh random identifier such as ``usr_k3x…``: 120 random bits as 24
    lower-case base32 characters."""
    return f"{prefix}_{base64.b32encode(os.urandom(15)).decode().lower()}"
