"""Where the CLI's URL and key come from: environment first, then the profile
file (owner-only), then the default URL."""

from __future__ import annotations

import os
import stat

import pytest

from qday_client import LocalError
from qday_client.client import DEFAULT_API_URL
from qday_client.config import load_config, save_profile


def test_environment_beats_profile_which_beats_defaults(tmp_path):
    env = {"QDAY_CLIENT_CONFIG": str(tmp_path / "qday" / "client.toml")}
    assert (load_config(env=env).api_url, load_config(env=env).api_key) == (DEFAULT_API_URL, None)
    path = save_profile("default", "http://127.0.0.1:9000", "svc_sec_test_sk_saved", env=env)
    save_profile("ci", "http://127.0.0.1:9001", "svc_sec_test_sk_ci", env=env)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    saved = load_config(env=env)
    assert (saved.api_url, saved.api_key) == ("http://127.0.0.1:9000", "svc_sec_test_sk_saved")
    assert "svc_sec" not in repr(saved)
    assert load_config("ci", env=env).api_key == "svc_sec_test_sk_ci"
    assert load_config(env={**env, "QDAY_PROFILE": "ci"}).api_url == "http://127.0.0.1:9001"
    overridden = load_config(env={**env, "QDAY_API_KEY": "svc_sec_test_sk_env", "QDAY_API_URL": "http://h:1"})
    assert (overridden.api_url, overridden.api_key) == ("http://h:1", "svc_sec_test_sk_env")


def test_profile_file_readable_by_others_is_refused(tmp_path):
    env = {"QDAY_CLIENT_CONFIG": str(tmp_path / "client.toml")}
    path = save_profile("default", "http://127.0.0.1:9000", "svc_sec_test_sk_saved", env=env)
    os.chmod(path, 0o644)
    with pytest.raises(LocalError, match="chmod 600"):
        load_config(env=env)
