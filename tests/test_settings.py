"""Settings: environment, TOML file and flags, validated at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.settings import SettingsError, load_settings


def test_defaults_are_embedded():
    s = load_settings({})
    assert (s.host, s.port, s.data_dir, s.key_token) == ("127.0.0.1", 8000, Path("var"), "svc")
    assert s.max_body_bytes == 65536
    assert s.rate_window_seconds == 60


def test_environment_overrides_file_and_flags_override_environment(tmp_path):
    config = tmp_path / "qday.toml"
    config.write_text('port = 9001\nkey_token = "acme"\ntrusted_proxies = ["127.0.0.1"]\n')
    s = load_settings({"QDAY_CONFIG": str(config), "QDAY_PORT": "9002"})
    assert s.port == 9002 and s.key_token == "acme" and s.trusted_proxies == ("127.0.0.1",)
    assert load_settings({"QDAY_CONFIG": str(config)}, port=9003).port == 9003


def test_rate_window_comes_from_the_environment_or_the_file(tmp_path):
    assert load_settings({"QDAY_RATE_WINDOW_SECONDS": "120"}).rate_window_seconds == 120
    config = tmp_path / "qday.toml"
    config.write_text("rate_window_seconds = 3600\n")
    assert load_settings({}, config_file=config).rate_window_seconds == 3600


def test_settings_are_frozen():
    s = load_settings({})
    with pytest.raises(AttributeError):
        s.port = 1  # type: ignore[misc]  # the point: frozen settings refuse it


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"QDAY_PORT": "eighty"}, "port must be an integer"),
        ({"QDAY_PORT": "70000"}, "port must be 1..65535"),
        ({"QDAY_KEY_TOKEN": "Bad_Token"}, "key_token"),
        ({"QDAY_SECRET_KEY": "abcd"}, "at least 32 bytes"),
        ({"QDAY_SECRET_KEY": "zz" * 32}, "hex"),
        ({"QDAY_ACCESS_LOG": "maybe"}, "true or false"),
        ({"QDAY_TRUSTED_PROXIES": "not-an-ip"}, "not an IP address"),
        ({"QDAY_SQLITE_SYNCHRONOUS": "OFF"}, "sqlite_synchronous"),
        ({"QDAY_RATE_LIMIT_MULTIPLIER": "0"}, "positive"),
        ({"QDAY_RATE_WINDOW_SECONDS": "0"}, "rate_window_seconds must be between 60"),
        ({"QDAY_RATE_WINDOW_SECONDS": "-60"}, "rate_window_seconds must be between 60"),
        ({"QDAY_RATE_WINDOW_SECONDS": "59"}, "the limits are per window"),
        ({"QDAY_RATE_WINDOW_SECONDS": "86401"}, "between 60 and 86400"),
        ({"QDAY_RATE_WINDOW_SECONDS": "1.5"}, "rate_window_seconds must be an integer"),
        ({"QDAY_DATABASE_URL": "mysql://db/qday", "QDAY_SECRET_KEY": "ab" * 32}, "postgresql:// URL"),
        ({"QDAY_DATABASE_URL": "postgresql://db/qday"}, "needs secret_key"),
        (
            {"QDAY_DATABASE_URL": "postgresql://db/qday", "QDAY_SECRET_KEY": "ab" * 32, "QDAY_DATABASE_POOL_SIZE": "0"},
            "database_pool_size",
        ),
    ],
)
def test_bad_values_stop_start_up_with_a_clear_message(env, message):
    with pytest.raises(SettingsError, match=message):
        load_settings(env)


def test_unknown_keys_in_the_file_are_refused(tmp_path):
    config = tmp_path / "qday.toml"
    config.write_text("prot = 1\n")
    with pytest.raises(SettingsError, match="unknown settings.*prot"):
        load_settings({}, config_file=config)


def test_unreadable_file_is_reported(tmp_path):
    with pytest.raises(SettingsError, match="cannot read config file"):
        load_settings({}, config_file=tmp_path / "missing.toml")


def test_the_database_url_is_never_printed():
    settings = load_settings({"QDAY_DATABASE_URL": "postgresql://qday:hunter2@db/qday", "QDAY_SECRET_KEY": "ab" * 32})
    assert settings.database_url.endswith("@db/qday")
    assert "hunter2" not in repr(settings)
