"""Service configuration: one frozen settings object, read once at start-up.

Values come from ``QDAY_*`` environment variables, then an optional TOML file
(``QDAY_CONFIG`` or ``--config``), then the embedded defaults; environment wins.
Everything is validated here so a bad value stops start-up with a clear message
instead of failing on the first request.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from chains.endpoints import ChainEndpoints, ConfigError, load_endpoints
from chains.errors import UnsupportedChain
from chains.registry import CHAINS, parse_chain

ALL_CHAINS: tuple[str, ...] = tuple(chain.value for chain in CHAINS)


class SettingsError(ValueError):
    """A configuration value is missing, malformed or out of range."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Every tunable of the service, immutable after start-up."""

    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    data_dir: Path = Path("var")
    #: Service token at the start of API key strings (``svc_sec_live_sk_…``).
    key_token: str = "svc"
    #: Hex master secret; when empty, one is generated under ``data_dir/secrets``.
    secret_key: str = field(default="", repr=False)
    session_ttl_seconds: int = 12 * 3600
    rotation_grace_seconds: int = 24 * 3600
    max_body_bytes: int = 64 * 1024
    #: Total time a client has to send a request's headers and body (slow clients: 408).
    request_timeout_seconds: int = 30
    #: Multiplies every rate limit (load tests, fuzzing); 1 in production.
    rate_limit_multiplier: float = 1.0
    #: Length of the fixed rate-limit windows (aligned on multiples of it since the epoch);
    #: 60 in production, as the spec's limits are per minute; tests choose their own.
    rate_window_seconds: int = 60
    #: Per-minute limits of the ``enterprise`` plan ("custom" in the spec).
    enterprise_limit_factor: int = 10
    #: Addresses an ``enterprise`` account may watch (``services.caps`` has the other plans').
    enterprise_watch_cap: int = 10_000_000
    #: Honour ``X-Forwarded-For`` only from these proxy addresses.
    trusted_proxies: tuple[str, ...] = ()
    #: ``FULL`` survives power loss; ``NORMAL`` only process crashes.
    sqlite_synchronous: str = "FULL"
    #: ``postgresql://user:password@host:port/db``: every operational table on PostgreSQL,
    #: shared by several API nodes and the pipelines; empty: SQLite in ``data_dir``.
    database_url: str = field(default="", repr=False)
    #: Most PostgreSQL connections one process holds (plus one listening for changes).
    database_pool_size: int = 10
    #: Where the Dagster UI of ``qday up`` is, for the links of the home page.
    dagster_url: str = "http://127.0.0.1:3000"
    #: Service name written into attestation statements (binds them to this service).
    public_domain: str = "qday.local"
    #: Lifetime of key-registration challenges and attestation statements.
    challenge_ttl_seconds: int = 600
    #: How long a result fetched by the scan endpoint is served before it is refreshed.
    scan_cache_ttl_seconds: int = 600
    #: How long a result published by the daily pipeline run is served (a day and a margin).
    pipeline_result_ttl_seconds: int = 26 * 3600
    #: Chains a scan checks for the other addresses of a key (``all``, ``none`` or a comma
    #: list): the 15 EVM chains and Tron for an EVM or Tron address, Bitcoin and Cosmos for
    #: a key hash. Family chains left out are reported unavailable (verdict incomplete).
    family_chains: tuple[str, ...] = ALL_CHAINS
    #: How long a scan waits for a family chain before reporting it unavailable.
    family_wait_seconds: float = 5.0
    log_level: str = "INFO"
    access_log: bool = False
    #: Managed custody backend: ``softhsm`` (embedded default: a SoftHSM2 token,
    #: created under ``data_dir/softhsm`` on first start), ``pkcs11`` (an existing
    #: token of any PKCS#11 module with AES-GCM, e.g. a network HSM) or ``disabled``.
    custody_backend: str = "softhsm"
    #: The PKCS#11 module (shared library) of the custody token.
    custody_module: str = "/usr/lib/softhsm/libsofthsm2.so"
    custody_token_label: str = "qday"
    #: Label of the token's AES wrapping key (generated on first start if missing).
    custody_wrap_key_label: str = "qday-wrap-v1"
    #: User PIN of the token; empty with ``softhsm``: generated beside the token.
    custody_pin: str = field(default="", repr=False)
    #: SoftHSM2 configuration; empty: ``$SOFTHSM2_CONF`` if set, else
    #: ``data_dir/softhsm/softhsm2.conf``.
    softhsm_conf: str = ""
    #: Waiting period between a deletion request and destruction (spec: at least 7 days).
    deletion_wait_days: int = 7
    #: How often each worker destroys managed keys whose waiting period is over (0: never;
    #: then run ``qday admin purge-keys`` from a scheduler).
    purge_interval_seconds: int = 300
    #: Webhook URLs may be http and point at loopback and private addresses (a receiver on
    #: the same network, tests); off by default (SSRF). Cloud-metadata addresses never.
    webhook_allow_private: bool = False
    #: Seconds before the first retry of a failed webhook delivery (doubling up to an hour).
    webhook_retry_base_seconds: float = 5.0
    #: Seconds one webhook delivery attempt may take (connect, send, first answer).
    webhook_timeout_seconds: float = 10.0
    #: Seconds between looks at the heads of EVM chains with watched addresses, for alerts
    #: (0: off; only the node holding the follower lease looks).
    alert_poll_seconds: float = 1.0
    #: Chain data endpoints of both environments (``[chains]`` table, ``QDAY_<CHAIN>_…``).
    chains: ChainEndpoints = field(default_factory=lambda: load_endpoints({}), repr=False)

    @property
    def operational_db(self) -> Path:
        """The SQLite file holding accounts, keys, attestations and results (unused
        with a ``database_url``)."""
        return self.data_dir / "qday.sqlite"

    @property
    def analytics_dir(self) -> Path:
        """The analytics folder: Parquet tables and the Bitcoin exposure index."""
        return self.data_dir.resolve() / "analytics"

    @property
    def ratelimit_db(self) -> Path:
        """The SQLite file holding rate-limit windows (loss on crash is harmless)."""
        return self.data_dir / "ratelimit.sqlite"

    @property
    def secrets_dir(self) -> Path:
        """Owner-only folder for the generated master secret."""
        return self.data_dir / "secrets"


_INT_FIELDS = {f.name for f in fields(Settings) if f.type in ("int",)}
_FLOAT_FIELDS = {f.name for f in fields(Settings) if f.type in ("float",)}
_BOOL_FIELDS = {f.name for f in fields(Settings) if f.type in ("bool",)}


def _coerce(name: str, raw: Any) -> Any:
    if name in _INT_FIELDS:
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if name in _FLOAT_FIELDS:
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise SettingsError(f"{name} must be a number, got {raw!r}") from None
    if name in _BOOL_FIELDS:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"{name} must be true or false, got {raw!r}")
    if name == "data_dir":
        return Path(raw)
    if name == "family_chains":
        return _chain_list(raw)
    if name == "trusted_proxies":
        items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
        return tuple(item.strip() for item in items if str(item).strip())
    return str(raw)


def _chain_list(raw: Any) -> tuple[str, ...]:
    """``all``, ``none`` or chain names (a list, or text separated by commas), checked."""
    text = raw if isinstance(raw, list | tuple) else str(raw).split(",")
    items = [str(item).strip().lower() for item in text if str(item).strip()]
    if items == ["all"]:
        return ALL_CHAINS
    if items == ["none"]:
        return ()
    try:
        chosen = {parse_chain(item).value for item in items}
    except UnsupportedChain as exc:
        raise SettingsError(f"family_chains: {exc}") from None
    return tuple(chain for chain in ALL_CHAINS if chain in chosen)


def _validate(s: Settings) -> Settings:
    if not 0 < s.port < 65536:
        raise SettingsError(f"port must be 1..65535, got {s.port}")
    if not 1 <= s.workers <= 64:
        raise SettingsError(f"workers must be 1..64, got {s.workers}")
    if not s.key_token.isalnum() or not s.key_token.islower() or len(s.key_token) > 16:
        raise SettingsError("key_token must be 1-16 lowercase letters or digits")
    if s.secret_key:
        try:
            secret = bytes.fromhex(s.secret_key)
        except ValueError:
            raise SettingsError("secret_key must be hex") from None
        if len(secret) < 32:
            raise SettingsError("secret_key must be at least 32 bytes (64 hex digits)")
    if s.session_ttl_seconds < 60:
        raise SettingsError("session_ttl_seconds must be at least 60")
    if s.rotation_grace_seconds < 0:
        raise SettingsError("rotation_grace_seconds must not be negative")
    if not 2 <= s.request_timeout_seconds <= 300:
        raise SettingsError("request_timeout_seconds must be between 2 and 300")
    if not 1024 <= s.max_body_bytes <= 16 * 1024 * 1024:
        raise SettingsError("max_body_bytes must be between 1 KiB and 16 MiB")
    if s.rate_limit_multiplier <= 0:
        raise SettingsError("rate_limit_multiplier must be positive")
    # The plan limits are counts per window: a window under a minute would multiply the
    # spec's per-minute limits, so only as long or longer (stricter) windows are allowed.
    if not 60 <= s.rate_window_seconds <= 86400:
        raise SettingsError("rate_window_seconds must be between 60 and 86400 (the limits are per window)")
    if s.enterprise_limit_factor < 1:
        raise SettingsError("enterprise_limit_factor must be at least 1")
    if not 1 <= s.enterprise_watch_cap <= 1_000_000_000:
        raise SettingsError("enterprise_watch_cap must be between 1 and 1000000000")
    if not 10 <= s.challenge_ttl_seconds <= 86400:
        raise SettingsError("challenge_ttl_seconds must be between 10 and 86400")
    if not s.public_domain or any(c.isspace() for c in s.public_domain):
        raise SettingsError("public_domain must be a non-empty name without spaces")
    for name in ("scan_cache_ttl_seconds", "pipeline_result_ttl_seconds"):
        if not 0 <= getattr(s, name) <= 30 * 86400:
            raise SettingsError(f"{name} must be between 0 and 2592000 (30 days)")
    if not 0.1 <= s.family_wait_seconds <= 60:
        raise SettingsError("family_wait_seconds must be between 0.1 and 60")
    if s.custody_backend not in ("softhsm", "pkcs11", "disabled"):
        raise SettingsError("custody_backend must be softhsm, pkcs11 or disabled")
    if not 7 <= s.deletion_wait_days <= 3650:
        raise SettingsError("deletion_wait_days must be between 7 (the spec's minimum) and 3650")
    if s.purge_interval_seconds != 0 and not 10 <= s.purge_interval_seconds <= 86400:
        raise SettingsError("purge_interval_seconds must be 0 (off) or between 10 and 86400")
    if not 0.05 <= s.webhook_retry_base_seconds <= 5:
        raise SettingsError("webhook_retry_base_seconds must be between 0.05 and 5 (the first retry within 5 s)")
    if s.alert_poll_seconds != 0 and not 0.05 <= s.alert_poll_seconds <= 3600:
        raise SettingsError("alert_poll_seconds must be 0 (off) or between 0.05 and 3600")
    if not 1 <= s.webhook_timeout_seconds <= 10:
        raise SettingsError("webhook_timeout_seconds must be between 1 and 10")
    if s.database_url and not s.database_url.startswith(("postgresql://", "postgres://")):
        raise SettingsError("database_url must be a postgresql:// URL (or empty for SQLite in data_dir)")
    if s.database_url and not s.secret_key:
        # A generated secret would live in one node's data directory: every node must
        # hash API keys and sign sessions with the same one.
        raise SettingsError("database_url needs secret_key (QDAY_SECRET_KEY), the same on every node")
    if not 1 <= s.database_pool_size <= 200:
        raise SettingsError("database_pool_size must be between 1 and 200")
    if s.sqlite_synchronous not in ("FULL", "NORMAL", "EXTRA"):
        raise SettingsError("sqlite_synchronous must be FULL, NORMAL or EXTRA")
    if s.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise SettingsError("log_level must be DEBUG, INFO, WARNING or ERROR")
    for proxy in s.trusted_proxies:
        try:
            ipaddress.ip_address(proxy)
        except ValueError:
            raise SettingsError(f"trusted_proxies: {proxy!r} is not an IP address") from None
    return replace(s, log_level=s.log_level.upper())


def load_settings(
    env: Mapping[str, str] | None = None,
    config_file: Path | None = None,
    **overrides: Any,
) -> Settings:
    """Build the validated settings from defaults, a TOML file, the environment
    and explicit overrides (command-line flags), in rising priority."""
    env = os.environ if env is None else env
    names = {f.name for f in fields(Settings)} - {"chains"}
    values: dict[str, Any] = {}
    chains_table: dict[str, Any] | None = None
    config_path = config_file or (Path(env["QDAY_CONFIG"]) if env.get("QDAY_CONFIG") else None)
    if config_path is not None:
        try:
            table = tomllib.loads(config_path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SettingsError(f"cannot read config file {config_path}: {exc}") from None
        chains_table = table.pop("chains", None)
        unknown = sorted(set(table) - names)
        if unknown:
            raise SettingsError(f"unknown settings in {config_path}: {', '.join(unknown)}")
        values.update({k: _coerce(k, v) for k, v in table.items()})
    for name in names:
        raw = env.get(f"QDAY_{name.upper()}")
        if raw is not None and raw != "":
            values[name] = _coerce(name, raw)
    values.update({k: _coerce(k, v) for k, v in overrides.items() if v is not None})
    try:
        values["chains"] = load_endpoints(env, chains_table)
    except ConfigError as exc:
        raise SettingsError(f"chain endpoints: {exc}") from None
    return _validate(Settings(**values))
