"""The Cosmos LCD client against a loopback server replaying the conformance LCD bodies."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from chains.clients.cosmos import HEIGHT_HEADER, CosmosClient
from chains.codecs.cosmos import CosmosAddress
from chains.endpoints import EndpointConfig, RetrySettings
from chains.errors import ChainUnavailable, MalformedChainData
from chains.observation import AccountType, Exposure
from chains.registry import Chain, Network
from pqc.hashes import sha256
from tests.chain_clients.loopback import Loopback

SIGNED = "cosmos1vv6hruquzpty4xpks9znkw8gys5x4nsnqw9f4k"
VESTING = "cosmos1x3rhderemr703f4lxktk2da99vl5crs28ur3xl"
ACCOUNTS = "/cosmos/auth/v1beta1/accounts/"
BALANCES = "/cosmos/bank/v1beta1/balances/"


@pytest.fixture
def lcd(rpc_vector) -> dict[str, Any]:
    return {
        "account": rpc_vector("rpc/cosmos_lcd_account.json"),
        "balances": rpc_vector("rpc/cosmos_lcd_balances.json"),
    }


def client(loopback: Loopback, http, clock) -> CosmosClient:
    return CosmosClient(
        EndpointConfig(loopback.url, retry=RetrySettings(attempts=2, base_delay=0.1)),
        http,
        page_limit=1,
        timing=clock.timing(),
    )


async def observe(loopback: Loopback, http, clock, address: str):
    (seen,) = await client(loopback, http, clock).observe([CosmosAddress.decode(address)])
    return seen


async def test_signed_account_is_exposed_with_its_key(loopback: Loopback, http, clock, lcd) -> None:
    loopback.route(
        "GET", ACCOUNTS + SIGNED, lcd["account"]["examples"][0]["response"], headers={HEIGHT_HEADER: "25000123"}
    )
    loopback.route("GET", BALANCES + SIGNED, lcd["balances"]["examples"][0]["response"])
    seen = await observe(loopback, http, clock, SIGNED)
    key = base64.b64decode("Avn3xBbmE0+MEyWMuxhmjjiX1GtCUVyv/Mavg8OcRIm4")
    assert seen.exposure is Exposure.EXPOSED_AT_REST and seen.public_key == key
    assert (seen.account_type, seen.address_type) == (AccountType.EOA, "secp256k1")
    assert (seen.balance, seen.tx_count, seen.outbound_tx_count) == (10_000, 1019, 1019)
    assert (seen.height, seen.symbol, seen.decimals, seen.source) == (25_000_123, "ATOM", 6, "cosmos-lcd")


async def test_vesting_wrapper_is_unwrapped_and_balances_are_paged(loopback: Loopback, http, clock, lcd) -> None:
    loopback.route("GET", ACCOUNTS + VESTING, lcd["account"]["examples"][1]["response"])

    def pages(body: Any, query: dict[str, str]) -> tuple[int, Any]:
        if query.get("pagination.key") == "cGFnZTI=":
            return 200, {"balances": [{"denom": "uatom", "amount": "16677084600"}], "pagination": {"next_key": None}}
        return 200, {
            "balances": [
                {"denom": "ibc/27394FB092D2ECCD56123C74F36E4C1F926001CEADA9CA97EA622B25F41E5EB2", "amount": "5"}
            ],
            "pagination": {"next_key": "cGFnZTI=", "total": "2"},
        }

    loopback.handle("GET", BALANCES + VESTING, pages)
    seen = await observe(loopback, http, clock, VESTING)
    assert seen.exposure is Exposure.EXPOSED_AT_REST and seen.public_key.hex().startswith("03e6739bff")
    assert seen.balance == 16_677_084_600 and seen.tx_count == 30
    assert loopback.count(BALANCES + VESTING) == 2


async def test_account_that_never_signed_is_exposed_on_spend(loopback: Loopback, http, clock, lcd) -> None:
    loopback.route("GET", ACCOUNTS + SIGNED, lcd["account"]["examples"][2]["response"])
    loopback.route("GET", BALANCES + SIGNED, lcd["balances"]["examples"][0]["response"])
    seen = await observe(loopback, http, clock, SIGNED)
    assert seen.exposure is Exposure.EXPOSED_ON_SPEND and seen.public_key is None and seen.has_activity


def cosmos_address(payload: bytes) -> str:
    """The ``cosmos1…`` text of a 20- or 32-byte account."""
    return str(CosmosAddress(payload, Chain.COSMOS, Network.MAINNET))


async def test_unknown_account_has_no_activity(loopback: Loopback, http, clock, lcd) -> None:
    address = cosmos_address(sha256(b"never used")[:20])
    not_found = lcd["account"]["not_found"]
    loopback.route("GET", ACCOUNTS + address, not_found["body"], status=not_found["http_status"])
    loopback.route("GET", BALANCES + address, lcd["balances"]["examples"][1]["response"])
    seen = await observe(loopback, http, clock, address)
    assert not seen.has_activity and seen.exposure is Exposure.EXPOSED_ON_SPEND


async def test_module_and_interchain_accounts_are_code_controlled(loopback: Loopback, http, clock, lcd) -> None:
    distribution = cosmos_address(sha256(b"distribution")[:20])  # a module account's address
    loopback.route(
        "GET",
        ACCOUNTS + distribution,
        {
            "account": {
                "@type": "/cosmos.auth.v1beta1.ModuleAccount",
                "base_account": {"address": distribution, "pub_key": None, "account_number": "1", "sequence": "0"},
                "name": "distribution",
                "permissions": [],
            }
        },
    )
    loopback.route("GET", BALANCES + distribution, lcd["balances"]["examples"][0]["response"])
    seen = await observe(loopback, http, clock, distribution)
    assert (seen.account_type, seen.exposure, seen.address_type) == (
        AccountType.CONTRACT,
        Exposure.NOT_EXPOSED,
        "contract",
    )
    ica = cosmos_address(sha256(b"an interchain account"))  # 32 bytes: no key of its own
    loopback.route("GET", ACCOUNTS + ica, lcd["account"]["not_found"]["body"], status=404)
    loopback.route("GET", BALANCES + ica, lcd["balances"]["examples"][0]["response"])
    seen = await observe(loopback, http, clock, ica)
    assert seen.account_type is AccountType.CONTRACT and seen.exposure is Exposure.NOT_EXPOSED


async def test_key_of_another_address_is_refused(loopback: Loopback, http, clock, lcd) -> None:
    body = copy.deepcopy(lcd["account"]["examples"][0]["response"])
    body["account"]["pub_key"]["key"] = lcd["account"]["examples"][1]["response"]["account"]["base_vesting_account"][
        "base_account"
    ]["pub_key"]["key"]
    loopback.route("GET", ACCOUNTS + SIGNED, body)
    loopback.route("GET", BALANCES + SIGNED, lcd["balances"]["examples"][0]["response"])
    with pytest.raises(MalformedChainData, match="does not hash to"):
        await observe(loopback, http, clock, SIGNED)


async def test_404_that_is_not_a_not_found_answer_is_an_outage(loopback: Loopback, http, clock, lcd) -> None:
    loopback.route("GET", ACCOUNTS + SIGNED, {"code": 12, "message": "Not Implemented"}, status=404)
    loopback.route("GET", BALANCES + SIGNED, lcd["balances"]["examples"][0]["response"])
    with pytest.raises(ChainUnavailable, match="without a NotFound answer"):
        await observe(loopback, http, clock, SIGNED)
