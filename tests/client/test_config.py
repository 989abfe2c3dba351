"""Where the CLI's URL and key come from (environment first, then the owner-only
profile file, then the default URL), and what it says when that URL does not answer."""

from __future__ import annotations

import os
import stat

import pytest

from qday_client import LocalError
from qday_client.cli import EXIT_LOCAL_ERROR, main
from qday_client.client import DEFAULT_API_URL
from qday_client.config import load_config, save_profile
from tests.processes import free_port


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


def test_unreachable_server_is_a_local_error_naming_no_key(monkeypatch, capsys):
    monkeypatch.setenv("QDAY_API_KEY", "svc_sec_test_sk_" + "k" * 43)
    monkeypatch.setenv("QDAY_CLIENT_CONFIG", "/nonexistent/client.toml")
    assert main(["scan", "0x" + "11" * 20, "--api-url", f"http://127.0.0.1:{free_port()}"]) == EXIT_LOCAL_ERROR
    err = capsys.readouterr().err
    assert "NET: POST /v1/scan/wallet failed: ConnectError" in err and "k" * 43 not in err
