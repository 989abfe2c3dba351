"""Where the client sends requests and with which credential.

Order, first found wins: ``QDAY_API_URL`` / ``QDAY_API_KEY`` in the
environment, then the chosen profile of the profile file, then the default
URL (http://127.0.0.1:8000) and no key. The profile file is TOML,
``$QDAY_CLIENT_CONFIG`` or ``~/.config/qday/client.toml``, owner-only (0600)::

    [profiles.default]
    api_url = "http://127.0.0.1:8000"
    api_key = "svc_sec_test_sk_..."

The profile is ``--profile NAME``, else ``QDAY_PROFILE``, else ``default``.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from qday_client.client import DEFAULT_API_URL
from qday_client.errors import LocalError
from qday_client.private_files import read_private, write_private


@dataclass(frozen=True)
class Config:
    """The resolved API URL and credential (the key is left out of ``repr``)."""

    api_url: str
    api_key: str | None = field(default=None, repr=False)
    profile: str = "default"


def profile_path(env: Mapping[str, str] = os.environ) -> Path:
    """The profile file's path."""
    return Path(env.get("QDAY_CLIENT_CONFIG") or Path.home() / ".config" / "qday" / "client.toml")


def _read_profiles(path: Path) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    try:
        profiles = tomllib.loads(read_private(path)).get("profiles", {})
    except tomllib.TOMLDecodeError as exc:
        raise LocalError(f"profile file {path} is not valid TOML: {exc}") from None
    return {
        name: {k: str(v) for k, v in values.items()} for name, values in profiles.items() if isinstance(values, dict)
    }


def load_config(profile: str | None = None, env: Mapping[str, str] = os.environ) -> Config:
    """The configuration for this run (see the module docstring for the order)."""
    name = profile or env.get("QDAY_PROFILE") or "default"
    chosen = _read_profiles(profile_path(env)).get(name, {})
    return Config(
        api_url=env.get("QDAY_API_URL") or chosen.get("api_url") or DEFAULT_API_URL,
        api_key=env.get("QDAY_API_KEY") or chosen.get("api_key") or None,
        profile=name,
    )


def save_profile(name: str, api_url: str, api_key: str, env: Mapping[str, str] = os.environ) -> Path:
    """Store (or replace) a profile in the profile file, written owner-only."""
    path = profile_path(env)
    profiles = _read_profiles(path)
    profiles[name] = {"api_url": api_url, "api_key": api_key}
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lines = []
    for profile, values in profiles.items():
        lines.append(f"[profiles.{json.dumps(profile)}]")
        lines.extend(f"{key} = {json.dumps(value)}" for key, value in values.items())
        lines.append("")
    write_private(path, "\n".join(lines).encode(), overwrite=True)
    return path
