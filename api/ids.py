"""Identifiers of the form ``<prefix>_<random>`` used by every resource."""

from __future__ import annotations

import os


def new_id(prefix: str) -> str:
    """A fresh random identifier such as ``usr_3f9c…``: 120 random bits as 30
    lower-case hex digits (``base64.b32encode`` is pure Python and 10x slower)."""
    return f"{prefix}_{os.urandom(15).hex()}"
