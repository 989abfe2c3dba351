"""Where the chain clients get their data: one frozen configuration per environment.

``load_endpoints(env, table)`` is a pure function. It starts from well-known public
endpoints (for real users; tests never call them), applies a TOML table, then the process
environment, and validates every URL. The result, ``ChainEndpoints``, holds an
``EnvironmentEndpoints`` for the ``live`` and the ``test`` environment (API keys of the
``test`` environment scan public test networks: Sepolia and other EVM testnets, Bitcoin
testnet4, Solana devnet, the Cosmos ICS provider testnet, Tron Nile).

Environment variables (``QDAY_TEST_`` instead of ``QDAY_`` for the test environment):

- ``QDAY_<CHAIN>_RPC_URL`` for the 15 EVM chains and Solana (``QDAY_ETHEREUM_RPC_URL`` ...)
- ``QDAY_BITCOIN_ESPLORA_URL``, ``QDAY_BITCOIN_RPC_URL`` (Bitcoin Core; no default)
- ``QDAY_COSMOS_LCD_URL``, ``QDAY_TRON_API_URL``, ``QDAY_TRONGRID_URL``,
  ``QDAY_TRONGRID_API_KEY`` (sent as the ``TRON-PRO-API-KEY`` header)

Endpoint URLs may carry credentials (``https://user:pass@host``, ``?apikey=…``, a key in the
path). Nothing prints them: error messages use ``EndpointConfig.redacted``.

Timeouts, retries and the circuit breaker come from the ``[settings]`` table (every
endpoint) and may be overridden per endpoint (see ``docs/chain-clients.md``).
"""

from __future__ import annotations

import enum
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypedDict
from urllib.parse import SplitResult, urlsplit, urlunsplit

from chains.codecs.evm import EvmAddress
from chains.environment import Environment
from chains.errors import InvalidAddress
from chains.registry import CHAINS, EVM_CHAINS, Chain


class ConfigError(ValueError):
    """The chain endpoint configuration is invalid (bad URL, unknown key, wrong type)."""


class Source(enum.StrEnum):
    """A kind of upstream data source that is not an EVM chain's JSON-RPC endpoint."""

    BITCOIN_ESPLORA = "bitcoin_esplora"
    BITCOIN_RPC = "bitcoin_rpc"
    SOLANA = "solana"
    COSMOS_LCD = "cosmos_lcd"
    TRON_API = "tron_api"
    TRONGRID = "trongrid"

    @property
    def env_name(self) -> str:
        """The variable name after the environment prefix (``SOLANA_RPC_URL`` ...)."""
        return _SOURCE_ENV_NAMES[self]


_SOURCE_ENV_NAMES = MappingProxyType(
    {
        Source.BITCOIN_ESPLORA: "BITCOIN_ESPLORA_URL",
        Source.BITCOIN_RPC: "BITCOIN_RPC_URL",
        Source.SOLANA: "SOLANA_RPC_URL",
        Source.COSMOS_LCD: "COSMOS_LCD_URL",
        Source.TRON_API: "TRON_API_URL",
        Source.TRONGRID: "TRONGRID_URL",
    }
)


@dataclass(frozen=True, slots=True)
class RetrySettings:
    """Bounded retries of idempotent reads: exponential backoff with full jitter.

    Attempt ``n`` (0-based) that fails waits ``random() * min(max_delay, base_delay * 2**n)``
    before the next one; at most ``attempts`` attempts, and never past ``budget`` seconds
    from the first one (the call's overall deadline).
    """

    attempts: int = 3
    base_delay: float = 0.25
    max_delay: float = 4.0
    budget: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError(f"retry attempts must be at least 1, got {self.attempts}")
        if not 0 <= self.base_delay <= self.max_delay:
            raise ConfigError(f"need 0 <= base_delay <= max_delay, got {self.base_delay} and {self.max_delay}")
        if self.budget <= 0:
            raise ConfigError(f"retry budget must be positive, got {self.budget}")


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """Circuit breaker of one endpoint: open after ``failures`` consecutive failed
    attempts, half-open (one probe) ``cooldown`` seconds later."""

    failures: int = 5
    cooldown: float = 30.0

    def __post_init__(self) -> None:
        if self.failures < 1:
            raise ConfigError(f"breaker failures must be at least 1, got {self.failures}")
        if self.cooldown <= 0:
            raise ConfigError(f"breaker cooldown must be positive, got {self.cooldown}")


_SECRET_SEGMENT = re.compile(r"(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_\-]{16,}")


def redact_url(url: str) -> str:
    """``url`` without credentials, for messages and logs.

    Drops userinfo, the query string and the fragment, and replaces path segments that look
    like API keys (16+ characters mixing letters and digits, as in ``/v3/<key>``) by ``***``.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    path = "/".join("***" if _SECRET_SEGMENT.fullmatch(seg) else seg for seg in parts.path.split("/"))
    return urlunsplit(SplitResult(parts.scheme, netloc, path, "", ""))


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """One upstream endpoint: its URL, per-request timeout, retry and breaker settings.

    ``headers`` are sent with every request (e.g. an API-key header); they are never
    printed. The URL must be http or https with a host.
    """

    url: str
    timeout: float = 10.0
    retry: RetrySettings = field(default_factory=RetrySettings)
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https"):
            raise ConfigError(f"endpoint URL must be http or https, got {redact_url(self.url)!r}")
        if not parts.hostname:
            raise ConfigError(f"endpoint URL has no host: {redact_url(self.url)!r}")
        if self.timeout <= 0:
            raise ConfigError(f"timeout must be positive, got {self.timeout} for {redact_url(self.url)}")

    @property
    def redacted(self) -> str:
        """The URL as it may appear in messages (no credentials)."""
        return redact_url(self.url)


@dataclass(frozen=True, slots=True)
class EnvironmentEndpoints:
    """Every data source of one environment.

    ``evm`` has the JSON-RPC endpoint of each of the 15 EVM chains and ``evm_chain_ids``
    the chain id each must report (checked once per client; None skips the check).
    ``bitcoin_rpc`` is None unless configured (there is no public Bitcoin Core RPC).
    ``price_feeds`` maps a coin symbol to its Chainlink USD aggregator on this
    environment's Ethereum endpoint; ``price_max_age`` (seconds) is how old a feed's
    ``updatedAt`` may be before its answer is ignored.
    """

    environment: Environment
    evm: Mapping[Chain, EndpointConfig]
    evm_chain_ids: Mapping[Chain, int | None]
    bitcoin_esplora: EndpointConfig
    bitcoin_rpc: EndpointConfig | None
    solana: EndpointConfig
    cosmos_lcd: EndpointConfig
    tron_api: EndpointConfig
    trongrid: EndpointConfig
    price_feeds: Mapping[str, str]
    price_max_age: float

    def has_market_value(self, chain: Chain) -> bool:
        """False where coins have no USD value: every chain of the test environment, and an
        EVM chain configured with another chain id than its own (a local node such as anvil
        standing in for it, ``make devnet``)."""
        if self.environment is Environment.TEST:
            return False
        configured, own = self.evm_chain_ids.get(chain), CHAINS[chain].evm_chain_id
        return configured is None or own is None or configured == own


@dataclass(frozen=True, slots=True)
class ChainEndpoints:
    """The endpoints of both environments."""

    live: EnvironmentEndpoints
    test: EnvironmentEndpoints

    def __getitem__(self, environment: Environment) -> EnvironmentEndpoints:
        """The endpoints of ``environment``."""
        return self.live if environment is Environment.LIVE else self.test


# --- defaults ---------------------------------------------------------------------------

#: Public JSON-RPC endpoints (live, test) of each EVM chain. Test networks: Sepolia for
#: Ethereum and the rollups, Polygon Amoy, Sonic testnet, Gnosis Chiado, Celo Sepolia, BSC
#: testnet, Avalanche Fuji.
_EVM_DEFAULTS: Mapping[Chain, tuple[str, str]] = MappingProxyType(
    {
        Chain.ETHEREUM: ("https://ethereum-rpc.publicnode.com", "https://ethereum-sepolia-rpc.publicnode.com"),
        Chain.BASE: ("https://mainnet.base.org", "https://sepolia.base.org"),
        Chain.ARBITRUM: ("https://arb1.arbitrum.io/rpc", "https://sepolia-rollup.arbitrum.io/rpc"),
        Chain.OPTIMISM: ("https://mainnet.optimism.io", "https://sepolia.optimism.io"),
        Chain.POLYGON: ("https://polygon-rpc.com", "https://rpc-amoy.polygon.technology"),
        Chain.ZKSYNC: ("https://mainnet.era.zksync.io", "https://sepolia.era.zksync.dev"),
        Chain.LINEA: ("https://rpc.linea.build", "https://rpc.sepolia.linea.build"),
        Chain.SCROLL: ("https://rpc.scroll.io", "https://sepolia-rpc.scroll.io"),
        Chain.MANTLE: ("https://rpc.mantle.xyz", "https://rpc.sepolia.mantle.xyz"),
        Chain.BLAST: ("https://rpc.blast.io", "https://sepolia.blast.io"),
        Chain.SONIC: ("https://rpc.soniclabs.com", "https://rpc.testnet.soniclabs.com"),
        Chain.GNOSIS: ("https://rpc.gnosischain.com", "https://rpc.chiadochain.net"),
        Chain.CELO: ("https://forno.celo.org", "https://forno.celo-sepolia.celo-testnet.org"),
        Chain.BSC: ("https://bsc-dataseed.bnbchain.org", "https://data-seed-prebsc-1-s1.bnbchain.org:8545"),
        Chain.AVALANCHE: ("https://api.avax.network/ext/bc/C/rpc", "https://api.avax-test.network/ext/bc/C/rpc"),
    }
)

#: Public endpoints (live, test) of the other sources; Bitcoin Core RPC has none.
_SOURCE_DEFAULTS: Mapping[Source, tuple[str, str]] = MappingProxyType(
    {
        Source.BITCOIN_ESPLORA: ("https://blockstream.info/api", "https://mempool.space/testnet4/api"),
        Source.SOLANA: ("https://api.mainnet-beta.solana.com", "https://api.devnet.solana.com"),
        Source.COSMOS_LCD: (
            "https://cosmos-rest.publicnode.com",
            "https://rest.provider-sentry-01.ics-testnet.polypore.xyz",
        ),
        Source.TRON_API: ("https://api.trongrid.io", "https://nile.trongrid.io"),
        Source.TRONGRID: ("https://api.trongrid.io", "https://nile.trongrid.io"),
    }
)

BITCOIN_RPC_TIMEOUT = 600.0
"""Default timeout of Bitcoin Core calls: a full UTXO-set scan (``scantxoutset``) takes minutes."""

#: Chainlink USD aggregators (proxies) on Ethereum mainnet and on Sepolia.
_PRICE_FEED_DEFAULTS: Mapping[Environment, Mapping[str, str]] = MappingProxyType(
    {
        Environment.LIVE: MappingProxyType(
            {
                "ETH": "0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419",
                "BTC": "0xF4030086522a5bEEa4988F8cA5B36dbC97BeE88c",
                "SOL": "0x4ffC43a60e009B551865A93d232E33Fce9f01507",
                "BNB": "0x14e613AC84a31f709eadbdF89C6CC390fDc9540A",
                "AVAX": "0xFF3EEb22B5E3dE6e705b44749C2559d704923FD7",
                "ATOM": "0xDC4BDB458C6361093069Ca2aD30D74cc152EdC75",
                "POL": "0x7bAC85A8a13A4BcD8abb3eB7d6b4d632c5a57676",
            }
        ),
        Environment.TEST: MappingProxyType(
            {
                "ETH": "0x694AA1769357215DE4FAC081bf1f309aDC325306",
                "BTC": "0x1b44F3514812d835EB1BDB0acB33d3fA3351Ee43",
            }
        ),
    }
)

DEFAULT_PRICE_MAX_AGE = 3 * 3600.0
"""Chainlink heartbeats are at most a day on minor feeds, an hour on ETH/BTC; three hours
of silence means the feed is not being updated for us."""

_EVM_NAMES = frozenset(chain.value for chain in EVM_CHAINS)
_SETTING_KEYS = frozenset(
    {
        "timeout",
        "retry_attempts",
        "retry_base_delay",
        "retry_max_delay",
        "retry_budget",
        "breaker_failures",
        "breaker_cooldown",
    }
)


# --- loading ----------------------------------------------------------------------------


class _RetryChanges(TypedDict, total=False):
    """The ``RetrySettings`` fields a settings table sets (``retry_<field>`` keys)."""

    attempts: int
    base_delay: float
    max_delay: float
    budget: float


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    return float(value)


def _apply_settings(
    base: EndpointConfig, settings: Mapping[str, Any], where: str, other_keys: frozenset[str] = frozenset()
) -> EndpointConfig:
    """``base`` with the timeout/retry/breaker keys of ``settings`` applied (``other_keys``
    are allowed in ``settings`` and left to the caller)."""
    unknown = set(settings) - _SETTING_KEYS - other_keys
    if unknown:
        raise ConfigError(f"unknown key(s) in {where}: {', '.join(sorted(unknown))}")
    retry, breaker, timeout = base.retry, base.breaker, base.timeout
    if "timeout" in settings:
        timeout = _number(settings["timeout"], f"{where}.timeout")
    changes: _RetryChanges = {}
    if "retry_attempts" in settings:
        changes["attempts"] = int(_number(settings["retry_attempts"], f"{where}.retry_attempts"))
    if "retry_base_delay" in settings:
        changes["base_delay"] = _number(settings["retry_base_delay"], f"{where}.retry_base_delay")
    if "retry_max_delay" in settings:
        changes["max_delay"] = _number(settings["retry_max_delay"], f"{where}.retry_max_delay")
    if "retry_budget" in settings:
        changes["budget"] = _number(settings["retry_budget"], f"{where}.retry_budget")
    retry = replace(retry, **changes)
    if "breaker_failures" in settings:
        breaker = replace(breaker, failures=int(_number(settings["breaker_failures"], f"{where}.breaker_failures")))
    if "breaker_cooldown" in settings:
        breaker = replace(breaker, cooldown=_number(settings["breaker_cooldown"], f"{where}.breaker_cooldown"))
    return replace(base, timeout=timeout, retry=retry, breaker=breaker)


def _table(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a table, got {type(value).__name__}")
    return value


class _Loader:
    """Builds one environment's endpoints from defaults, the table and the environment."""

    def __init__(self, environment: Environment, env: Mapping[str, str], table: Mapping[str, Any]) -> None:
        """Check the table's structure for ``environment``; values are checked as they are read."""
        self.environment = environment
        self.env = env
        self.settings = _table(table.get("settings", {}), "[settings]")
        section = _table(table.get(environment.value, {}), f"[{environment.value}]")
        unknown = set(section) - {"endpoints", "prices"}
        if unknown:
            raise ConfigError(f"unknown key(s) in [{environment.value}]: {', '.join(sorted(unknown))}")
        self.endpoints = _table(section.get("endpoints", {}), f"[{environment.value}.endpoints]")
        names = {c.value for c in EVM_CHAINS} | {s.value for s in Source}
        unknown = set(self.endpoints) - names
        if unknown:
            raise ConfigError(
                f"unknown endpoint(s) in [{environment.value}.endpoints]: {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(names))}"
            )
        self.prices = _table(section.get("prices", {}), f"[{environment.value}.prices]")

    def entry(self, name: str) -> Mapping[str, Any]:
        """The table entry of one endpoint (a URL string is short for ``{url = ...}``)."""
        value = self.endpoints.get(name, {})
        return (
            {"url": value} if isinstance(value, str) else _table(value, f"[{self.environment.value}.endpoints.{name}]")
        )

    def endpoint(self, name: str, env_name: str, default: str | None, timeout: float = 10.0) -> EndpointConfig | None:
        """Default < table < environment variable; then the timeout/retry settings. None
        when no URL is configured and there is no default."""
        entry = self.entry(name)
        url = self.env.get(self.environment.env_prefix + env_name) or entry.get("url") or default
        if url is None:
            return None
        if not isinstance(url, str):
            raise ConfigError(f"{self.environment.value} endpoint {name}: url must be a string")
        where = f"[{self.environment.value}.endpoints.{name}]"
        other_keys = frozenset({"url", "chain_id"} if name in _EVM_NAMES else {"url"})
        try:
            config = _apply_settings(EndpointConfig(url, timeout=timeout), self.settings, "[settings]")
            return _apply_settings(config, entry, where, other_keys)
        except ConfigError as exc:
            raise ConfigError(f"{self.environment.value} endpoint {name}: {exc}") from None

    def default(self, defaults: tuple[str, str]) -> str:
        """This environment's half of a (live, test) pair of default URLs."""
        return defaults[0] if self.environment is Environment.LIVE else defaults[1]

    def required(self, name: str, env_name: str, default: str | None, timeout: float = 10.0) -> EndpointConfig:
        """An endpoint that must exist (every source but Bitcoin Core has a default URL)."""
        config = self.endpoint(name, env_name, default, timeout)
        if config is None:
            raise ConfigError(f"{self.environment.value} endpoint {name} has no URL; set {env_name}")
        return config

    def evm(self) -> tuple[dict[Chain, EndpointConfig], dict[Chain, int | None]]:
        """Each EVM chain's endpoint and expected chain id (registry id on live, unchecked on test)."""
        endpoints, chain_ids = {}, {}
        for chain in EVM_CHAINS:
            endpoints[chain] = self.required(
                chain.value, f"{chain.value.upper()}_RPC_URL", self.default(_EVM_DEFAULTS[chain])
            )
            registry_id = CHAINS[chain].evm_chain_id if self.environment is Environment.LIVE else None
            chain_id = self.entry(chain.value).get("chain_id", registry_id)
            if chain_id is not None and (isinstance(chain_id, bool) or not isinstance(chain_id, int)):
                raise ConfigError(f"{self.environment.value} endpoint {chain.value}: chain_id must be an integer")
            chain_ids[chain] = chain_id
        return endpoints, chain_ids

    def source(self, source: Source) -> EndpointConfig:
        """A non-EVM source's endpoint (TronGrid also gets its API-key header)."""
        config = self.required(source.value, source.env_name, self.default(_SOURCE_DEFAULTS[source]))
        api_key = self.env.get(self.environment.env_prefix + "TRONGRID_API_KEY")
        if source is Source.TRONGRID and api_key:
            config = replace(config, headers=MappingProxyType({"TRON-PRO-API-KEY": api_key}))
        return config

    def price_feeds(self) -> tuple[dict[str, str], float]:
        """Symbol → aggregator address (checked as EVM addresses) and the staleness limit."""
        unknown = set(self.prices) - {"feeds", "max_age"}
        if unknown:
            raise ConfigError(f"unknown key(s) in [{self.environment.value}.prices]: {', '.join(sorted(unknown))}")
        feeds = {**_PRICE_FEED_DEFAULTS[self.environment], **_table(self.prices.get("feeds", {}), "prices.feeds")}
        checked = {}
        for symbol, address in feeds.items():
            try:
                checked[symbol] = str(EvmAddress.decode(str(address)))
            except InvalidAddress as exc:
                raise ConfigError(f"price feed {symbol}: {exc}") from None
        max_age = _number(self.prices.get("max_age", DEFAULT_PRICE_MAX_AGE), "prices.max_age")
        if max_age <= 0:
            raise ConfigError(f"prices.max_age must be positive, got {max_age}")
        return checked, max_age

    def load(self) -> EnvironmentEndpoints:
        """Build and validate the environment's endpoints."""
        evm, chain_ids = self.evm()
        feeds, max_age = self.price_feeds()
        return EnvironmentEndpoints(
            environment=self.environment,
            evm=MappingProxyType(evm),
            evm_chain_ids=MappingProxyType(chain_ids),
            bitcoin_esplora=self.source(Source.BITCOIN_ESPLORA),
            bitcoin_rpc=self.endpoint(Source.BITCOIN_RPC.value, Source.BITCOIN_RPC.env_name, None, BITCOIN_RPC_TIMEOUT),
            solana=self.source(Source.SOLANA),
            cosmos_lcd=self.source(Source.COSMOS_LCD),
            tron_api=self.source(Source.TRON_API),
            trongrid=self.source(Source.TRONGRID),
            price_feeds=MappingProxyType(feeds),
            price_max_age=max_age,
        )


def load_endpoints(env: Mapping[str, str], table: Mapping[str, Any] | None = None) -> ChainEndpoints:
    """Build the endpoint configuration of both environments; pure (reads nothing itself).

    ``env`` is the process environment (or any mapping); ``table`` the parsed TOML
    configuration (see ``read_table``), with ``[settings]``, ``[live.endpoints]``,
    ``[live.prices]``, ``[test.endpoints]`` and ``[test.prices]``. Precedence: built-in
    defaults < table < environment variables. Raises ``ConfigError`` naming the bad entry.
    """
    table = table or {}
    unknown = set(table) - {"settings", "live", "test"}
    if unknown:
        raise ConfigError(f"unknown top-level key(s) in the chain configuration: {', '.join(sorted(unknown))}")
    return ChainEndpoints(
        live=_Loader(Environment.LIVE, env, table).load(),
        test=_Loader(Environment.TEST, env, table).load(),
    )


def read_table(path: str | Path) -> dict[str, Any]:
    """Parse a TOML configuration file for ``load_endpoints`` (``ConfigError`` if it is not TOML)."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
