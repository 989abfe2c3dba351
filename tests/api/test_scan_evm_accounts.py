"""POST /v1/scan/descriptor with an EVM chain: the accounts ``0/i`` of an account-level xpub
(BIP-44 coin type 60, as MetaMask derives them) scanned across their keccak family, on two
anvil nodes (ethereum, chain id 1; base, chain id 8453) and polygon on a closed port (down).

The seed is BIP-39's "abandon … about"; its first account is the well-known
0x9858EfFD232B4033E47d90003D41EC34EcaEda94. The private keys, derived here with embit (an
independent implementation), sign real transactions on anvil.
"""

from __future__ import annotations

from typing import Any

import pytest
from embit import bip32 as embit_bip32
from embit import bip39
from eth_account import Account
from eth_account.signers.local import LocalAccount

from services.settings import load_settings
from storage.models import Plan
from tests.anvil import Anvil, free_port
from tests.api.test_scan_family import TRANSFER
from tests.support import ManualClock, client_for, engine_env, make_tenant, running_app

SCAN = "/v1/scan/descriptor"
MNEMONIC = " ".join(["abandon"] * 11 + ["about"])
FIRST_ACCOUNT = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"


def account_key() -> embit_bip32.HDKey:
    return embit_bip32.HDKey.from_seed(bip39.mnemonic_to_seed(MNEMONIC)).derive("m/44h/60h/0h")


def signer(index: int) -> LocalAccount:
    return Account.from_key(account_key().derive([0, index]).key.secret)


@pytest.fixture(scope="module")
async def app(nodes: tuple[Anvil, Anvil], tmp_path_factory: pytest.TempPathFactory, module_database_url: str) -> Any:
    ethereum, base = nodes
    env = {
        "QDAY_ETHEREUM_RPC_URL": ethereum.url,
        "QDAY_BASE_RPC_URL": base.url,
        "QDAY_POLYGON_RPC_URL": f"http://127.0.0.1:{free_port()}",  # nothing listens: down
        "QDAY_FAMILY_CHAINS": "ethereum,base,polygon",
        "QDAY_FAMILY_WAIT_SECONDS": "2",
        **engine_env(module_database_url),  # on both engines
    }
    async with running_app(load_settings(env, data_dir=tmp_path_factory.mktemp("evm-accounts")), ManualClock()) as app:
        yield app


async def test_accounts_of_an_xpub_are_found_and_judged_across_chains(app: Any, nodes: tuple[Anvil, Anvil]) -> None:
    ethereum, base = nodes
    first, third = signer(0), signer(2)
    assert first.address == FIRST_ACCOUNT
    ethereum.fund(first.address, 2 * 10**18)  # received only: its key is not on chain
    base.fund(third.address, 10**18)
    base.send(third, {"to": Account.create().address, **TRANSFER})  # signed on base: exposed everywhere
    xpub = account_key().to_public().to_base58()
    async with client_for(app) as client:
        tenant = await make_tenant(client, ("secret_live",))
        await app.ctx.store.set_plan(tenant.email, Plan.PRO)
        r = await client.post(
            SCAN, json={"descriptor": xpub, "chain": "ethereum", "gapLimit": 3}, headers=tenant.auth("secret_live")
        )
        assert r.status_code == 200, r.text
        data = r.json()["data"]
        found = {(a["address"], a["chain"]): a for a in data["addresses"]}
        assert set(found) == {(FIRST_ACCOUNT, "ethereum"), (third.address, "base")}
        quiet = found[(FIRST_ACCOUNT, "ethereum")]
        assert (quiet["index"], quiet["balance"], quiet["publicKeyExposed"]) == (0, "2 ETH", False)
        exposed = found[(third.address, "base")]
        assert exposed["index"] == 2 and exposed["publicKeyExposed"] is True
        assert exposed["exposure"] == "EXPOSED_AT_REST" and exposed["txCount"] == 1
        summary = data["summary"]
        assert (summary["usedAddresses"], summary["derivedAddresses"]) == (2, 6)  # 0..2, then 3..5
        assert summary["balanceSat"] is None and summary["riskValue"] == max(a["riskValue"] for a in data["addresses"])
        assert data["coins"] == [] and data["descriptors"][0]["descriptor"] == f"{xpub}/0/*"
        assert "polygon" in data["coverage"]["unavailable"] and data["exposureComplete"] is False

        for bad, code in (
            (account_key().to_base58(), "SCAN_006"),  # the account's xprv
            (embit_bip32.HDKey.from_seed(bip39.mnemonic_to_seed(MNEMONIC)).to_public().to_base58(), "SCAN_005"),
        ):
            r = await client.post(SCAN, json={"descriptor": bad, "chain": "base"}, headers=tenant.auth("secret_live"))
            assert (r.status_code, r.json()["error"]["code"]) == (400, code), r.text
