"""Scanned public keys on the dashboard, over a loopback Esplora replaying real mainnet data
(the block-9 coinbase key, whose P2PK output shows it; tests/api/test_scan_key.py's fixtures):
scanned with the portfolio's form, listed there, and its own page with the level, the
evidence, every address the key makes and what the scan could not see (chains not
configured here); refusals as pages; other accounts and the other environment see nothing."""

from __future__ import annotations

import re
from typing import Any

import httpx

from chains.keys import parse_public_key
from core.ids import new_id
from tests.api.test_scan_key import BLOCK9_KEY, BLOCK9_P2PKH, esplora, key_app  # noqa: F401  (fixtures)
from tests.dashboard.support import PASSWORD, browser, csrf_of

BLOCK9_OUTPUT_TXID = "0437cd7f8525ceed2324359c2d0ba26006d92d856a9c20fa0241106ee5a597c9"


async def _registered(b: httpx.AsyncClient) -> str:
    r = await b.post("/register", data={"email": f"{new_id('k')}@example.com", "password": PASSWORD})
    assert r.status_code == 303
    return csrf_of((await b.get("/portfolio")).text)


async def test_a_key_is_scanned_listed_and_shown_with_what_was_not_seen(key_app: Any) -> None:  # noqa: F811
    compressed = parse_public_key(bytes.fromhex(BLOCK9_KEY)).compressed.hex()
    async with browser(key_app) as b, browser(key_app) as other:
        token = await _registered(b)
        assert (await b.post("/portfolio/keys", data={"public_key": BLOCK9_KEY})).status_code == 403
        assert "No keys scanned yet." in (await b.get("/portfolio")).text  # nothing was done
        r = await b.post("/portfolio/keys", data={"public_key": "0x" + BLOCK9_KEY, "csrf": token})
        assert r.status_code == 303 and r.headers["location"] == f"/key/{compressed}?env=live", r.text

        page = (await b.get(r.headers["location"])).text
        assert re.search(r'<h2 id="scan-1"><span class="badge level-(W[1-4])">\1</span>', page)
        assert "<strong>exposed</strong>" in page and BLOCK9_OUTPUT_TXID in page
        assert BLOCK9_P2PKH in page and "40 BTC" in page  # the P2PK output's coins, at risk
        unseen = re.search(r"Chains that did not answer: ([^<]+)</li>", page)
        assert unseen is not None and "ethereum" in unseen.group(1)  # said, not hidden
        assert "not seen:" in page and "(SCAN_004)" in page

        portfolio = (await b.get("/portfolio")).text
        assert f'href="/key/{compressed}?env=live"' in portfolio and "all chains" in portfolio
        assert (await b.get(f"/key/{BLOCK9_KEY}")).status_code == 200  # either encoding names the key

        for bad in ("zz", "02" + "00" * 32):  # not hex; not a point on the curve
            r = await b.post("/portfolio/keys", data={"public_key": bad, "csrf": token})
            assert r.status_code == 400 and "(PQC_002)" in r.text, r.text
        assert (await b.get("/key/nonsense")).status_code == 400
        missing = await b.get(f"/key/{compressed}?env=test")  # scanned in live only
        assert missing.status_code == 404 and "REQ_005" in missing.text

        await _registered(other)
        assert (await other.get(f"/key/{compressed}")).status_code == 404
        assert compressed not in (await other.get("/portfolio")).text
