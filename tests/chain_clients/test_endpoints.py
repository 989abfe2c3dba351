"""Endpoint configuration: defaults, TOML table, environment variables, validation, factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from chains.clients import build_clients
from chains.clients.cosmos import CosmosClient
from chains.clients.esplora import EsploraClient
from chains.clients.evm import EvmClient
from chains.clients.solana import SolanaClient
from chains.clients.tron import TronClient
from chains.endpoints import ConfigError, EndpointConfig, RetrySettings, load_endpoints, read_table, redact_url
from chains.environment import Environment
from chains.registry import CHAINS, EVM_CHAINS, Chain, Network


def test_defaults_are_public_endpoints_per_environment() -> None:
    endpoints = load_endpoints({})
    assert endpoints.live.evm[Chain.ETHEREUM].url == "https://ethereum-rpc.publicnode.com"
    assert endpoints.test.evm[Chain.ETHEREUM].url == "https://ethereum-sepolia-rpc.publicnode.com"
    assert endpoints[Environment.TEST].solana.url == "https://api.devnet.solana.com"
    assert endpoints.live.bitcoin_rpc is None and endpoints.test.bitcoin_rpc is None
    assert {c: endpoints.live.evm_chain_ids[c] for c in EVM_CHAINS} == {c: CHAINS[c].evm_chain_id for c in EVM_CHAINS}
    assert set(endpoints.test.evm_chain_ids.values()) == {None}
    assert endpoints.live.bitcoin_esplora.timeout == 10.0
    assert endpoints.live.price_feeds["ETH"] == "0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419"
    assert Environment.TEST.network is Network.TESTNET


def test_environment_variables_override_the_table_which_overrides_defaults() -> None:
    table = {
        "settings": {"timeout": 7, "retry_attempts": 4, "breaker_cooldown": 12},
        "live": {
            "endpoints": {
                "ethereum": {"url": "https://table.example/eth", "timeout": 3, "chain_id": 1},
                "base": "https://table.example/base",
                "bitcoin_rpc": {"url": "http://u:p@10.0.0.2:8332", "timeout": 900},
            },
            "prices": {"max_age": 600, "feeds": {"DOGE": "0x2465CefD3b488BE410b941b1d4b2767088e2A028"}},
        },
    }
    env = {
        "QDAY_BASE_RPC_URL": "https://env.example/base",
        "QDAY_TEST_SOLANA_RPC_URL": "http://127.0.0.1:8899",
        "QDAY_TRONGRID_API_KEY": "grid-key",
    }
    endpoints = load_endpoints(env, table)
    eth = endpoints.live.evm[Chain.ETHEREUM]
    assert (eth.url, eth.timeout, eth.retry.attempts, eth.breaker.cooldown) == ("https://table.example/eth", 3, 4, 12)
    assert endpoints.live.evm[Chain.BASE].url == "https://env.example/base"
    assert endpoints.live.evm[Chain.ARBITRUM].timeout == 7
    assert endpoints.live.bitcoin_rpc is not None and endpoints.live.bitcoin_rpc.timeout == 900
    assert endpoints.test.solana.url == "http://127.0.0.1:8899" and endpoints.live.solana.url.startswith("https://api.")
    assert endpoints.live.trongrid.headers == {"TRON-PRO-API-KEY": "grid-key"} and not endpoints.test.trongrid.headers
    assert endpoints.live.price_max_age == 600 and "DOGE" in endpoints.live.price_feeds
    assert "DOGE" not in endpoints.test.price_feeds


@pytest.mark.parametrize(
    ("env", "table", "message"),
    [
        ({"QDAY_ETHEREUM_RPC_URL": "ftp://host/x"}, None, "must be http or https"),
        ({"QDAY_COSMOS_LCD_URL": "https://"}, None, "has no host"),
        ({}, {"settings": {"timeout": -1}}, "timeout must be positive"),
        ({}, {"settings": {"retry_attempts": 0}}, "attempts must be at least 1"),
        ({}, {"settings": {"timeout": "fast"}}, "must be a number"),
        ({}, {"live": {"endpoints": {"ethereum": {"url": "https://x", "retries": 2}}}}, "unknown key"),
        ({}, {"live": {"endpoints": {"dogecoin": "https://x"}}}, "unknown endpoint"),
        ({}, {"staging": {}}, "unknown top-level"),
        (
            {},
            {"live": {"endpoints": {"polygon": {"url": "https://x", "chain_id": "137"}}}},
            "chain_id must be an integer",
        ),
        ({}, {"test": {"prices": {"feeds": {"ETH": "0x5F4EC3DF9CBD43714FE2740F5E3616155C5B8419x"}}}}, "price feed ETH"),
        ({}, {"live": {"prices": {"max_age": 0}}}, "max_age must be positive"),
    ],
)
def test_invalid_configuration_is_refused_with_a_clear_error(env, table, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_endpoints(env, table)


def test_errors_and_redaction_never_show_credentials() -> None:
    with pytest.raises(ConfigError) as caught:
        load_endpoints({"QDAY_SOLANA_RPC_URL": "ftp://user:hunter2@host/v2/abcd1234abcd1234abcd?api-key=SECRET"})
    assert (
        "hunter2" not in str(caught.value) and "SECRET" not in str(caught.value) and "abcd1234" not in str(caught.value)
    )
    assert (
        redact_url("https://u:p@eth.example:8443/v3/0123456789abcdef0123?key=1#f") == "https://eth.example:8443/v3/***"
    )
    assert redact_url("https://blockstream.info/api") == "https://blockstream.info/api"
    assert EndpointConfig("http://a:b@[::1]:8332").redacted == "http://[::1]:8332"


def test_retry_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="base_delay"):
        RetrySettings(base_delay=5, max_delay=1)


def test_read_table(tmp_path: Path) -> None:
    good = tmp_path / "chains.toml"
    good.write_text('[live.endpoints]\nethereum = "https://my-node.example"\n')
    assert load_endpoints({}, read_table(good)).live.evm[Chain.ETHEREUM].url == "https://my-node.example"
    bad = tmp_path / "bad.toml"
    bad.write_text("[live\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_table(bad)


@pytest.mark.parametrize("environment", list(Environment))
async def test_factory_builds_one_client_per_chain(environment: Environment, http) -> None:
    clients = build_clients(load_endpoints({}), environment, http)
    assert list(clients) == list(CHAINS)
    kinds = {
        EvmClient: EVM_CHAINS,
        EsploraClient: (Chain.BITCOIN,),
        SolanaClient: (Chain.SOLANA,),
        CosmosClient: (Chain.COSMOS,),
        TronClient: (Chain.TRON,),
    }
    for kind, chains in kinds.items():
        assert all(type(clients[c]) is kind and clients[c].chain is c for c in chains)
    assert clients[Chain.BITCOIN].network is environment.network
    for client in clients.values():
        await client.aclose()


def test_only_live_chains_under_their_own_chain_id_have_market_value():
    plain = load_endpoints({})
    assert plain[Environment.LIVE].has_market_value(Chain.ETHEREUM)
    assert plain[Environment.LIVE].has_market_value(Chain.BITCOIN)
    assert not plain[Environment.TEST].has_market_value(Chain.ETHEREUM)  # Sepolia ETH is free
    devnet = load_endpoints({}, {"live": {"endpoints": {"base": {"url": "http://127.0.0.1:8545", "chain_id": 31337}}}})
    assert not devnet[Environment.LIVE].has_market_value(Chain.BASE)  # anvil standing in for base
    assert devnet[Environment.LIVE].has_market_value(Chain.ETHEREUM)
