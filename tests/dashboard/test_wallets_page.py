"""Watched wallets on the portfolio page, over a loopback Esplora serving a built chain of
real transactions (BIP-84's test account, as tests/api/test_scan_descriptor.py builds it):
watched with the form and scanned at once, shown with the worst W-level, balances and the
exposed balance; stopped with the form; refusals as pages (a bad gap limit, a private key,
another account's wallet, no CSRF token); test and live kept apart."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from chains.bitcoin.wallet import parse_wallet
from chains.registry import Network
from core.ids import new_id
from services.settings import load_settings
from tests.api.test_scan_descriptor import bip84, esplora, wallet_address  # noqa: F401  (esplora: a fixture)
from tests.chain_clients.loopback import Loopback
from tests.dashboard.support import PASSWORD, browser, csrf_of
from tests.esplora_chain import EsploraChain
from tests.support import ManualClock, engine_env, running_app


@pytest.fixture(scope="module")
async def app(esplora: Loopback, tmp_path_factory: pytest.TempPathFactory, module_database_url: str) -> Any:  # noqa: F811
    env = {"QDAY_BITCOIN_ESPLORA_URL": esplora.url, "QDAY_FAMILY_CHAINS": "none", **engine_env(module_database_url)}
    settings = load_settings(env, data_dir=tmp_path_factory.mktemp("dashboard-wallets"))
    async with running_app(settings, ManualClock()) as app:
        yield app


async def test_a_wallet_is_watched_scanned_shown_and_stopped(
    app: Any,
    esplora: Loopback,  # noqa: F811  (the imported fixture)
    conformance_dir: Path,
) -> None:
    chain = EsploraChain(esplora, tip=900_000)
    zpub = bip84(conformance_dir)["account"]["xpub"]
    receive0, receive3 = wallet_address(zpub, 0, 0), wallet_address(zpub, 0, 3)
    chain.pay(receive0.script_pubkey, 50_000, 800_000)
    first = chain.pay(receive3.script_pubkey, 70_000, 800_010)[0]
    key3 = parse_wallet(zpub, Network.MAINNET).descriptors[0].expand(3, 0).keys[0].pubkey
    chain.spend(first, key3, wallet_address(zpub, 1, 1).script_pubkey, 800_020)
    chain.pay(receive3.script_pubkey, 30_000, 800_030)  # paid again after its key was shown

    async with browser(app) as b, browser(app) as other:
        for client in (b, other):
            r = await client.post("/register", data={"email": f"{new_id('w')}@example.com", "password": PASSWORD})
            assert r.status_code == 303
        token = csrf_of((await b.get("/portfolio")).text)
        form = {"descriptor": zpub, "label": "cold <storage>", "gap_limit": "5", "csrf": token}
        assert (await b.post("/portfolio/wallets", data={**form, "csrf": ""})).status_code == 403
        assert "No wallets watched yet." in (await b.get("/portfolio")).text  # nothing was done
        r = await b.post("/portfolio/wallets", data=form)
        assert r.status_code == 303, r.text
        page = (await b.get("/portfolio")).text
        row = re.search(r'<table id="wallets">.*?<tbody>(.*?)</tbody>', page, re.S)
        assert row is not None
        cells = row.group(1)
        assert f'<code class="address">{zpub}</code>' in cells and "cold &lt;storage&gt;" in cells
        assert re.search(r'class="badge level-(W[1-4])">\1<', cells)  # the worst used address's level
        assert "3 / 16" in cells  # used / derived with a gap limit of 5
        assert "0.00149000" in cells and "0.00030000" in cells  # balance and its exposed part
        assert "No wallets watched yet." in (await b.get("/portfolio?env=test")).text

        wallet_id = re.search(r'action="/portfolio/wallets/([^/]+)/delete', cells)
        assert wallet_id is not None
        other_token = csrf_of((await other.get("/portfolio")).text)
        r = await other.post(f"/portfolio/wallets/{wallet_id.group(1)}/delete", data={"csrf": other_token})
        assert r.status_code == 404 and "REQ_005" in r.text  # not theirs: still watched
        assert zpub in (await b.get("/portfolio")).text

        for bad in ("0", "ten", "1001"):
            r = await b.post("/portfolio/wallets", data={**form, "gap_limit": bad})
            assert r.status_code == 400 and "gap limit must be" in r.text and "REQ_001" in r.text, bad
        private = bip84(conformance_dir)["account"]["xpriv"]
        r = await b.post("/portfolio/wallets", data={**form, "descriptor": private})
        assert 400 <= r.status_code < 500 and private not in r.text  # refused without echoing the key

        r = await b.post(f"/portfolio/wallets/{wallet_id.group(1)}/delete", data={"csrf": token})
        assert r.status_code == 303
        assert "No wallets watched yet." in (await b.get("/portfolio")).text
