"""The detail page of an address and the portfolio's exposure trend, on both engines, from
``address_risk`` files landed the way the rescoring pipeline lands them (its own steps:
watch-list export, observation rows, key-family links, prices, scores) into the app's own
analytics folder (``Settings.analytics_dir``, the folder the pipelines are given), and the
results it publishes to the operational store: factors with weights and scores, evidence
with explorer links that are links only, the history chart with each day, the trend per day
and level, "no history yet", and 400/404 pages for bad chains and other tenants' addresses."""

from __future__ import annotations

import dataclasses
import re
import secrets
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import httpx
import polars as pl

from chains.clients.prices import Price
from chains.codecs.detect import parse_address
from chains.environment import Environment
from chains.keys import family_key
from chains.observation import EvidenceKind, ExposureEvidence, Observation
from chains.registry import CHAINS, Chain
from pipelines.families import family_links, link_frame
from pipelines.rescore import (
    DAILY,
    Batch,
    member_rows,
    observation_rows,
    price_rows,
    records_for,
    risk_rows,
    watch_entries_frame,
)
from scoring import load_readiness
from scoring.model import WEIGHT_PERCENT
from scoring.risk import SCORE_COLUMN
from storage.analytics import AnalyticsStore
from storage.models import WatchedAddress
from storage.sql_scans import SqlScanStore
from tests.dashboard.support import browser, logged_in, watched
from tests.pipelines.support import btc_observation, evm_address, evm_observation
from tests.support import make_tenant

LIVE = Environment.LIVE
BTC = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
USD = {"ETH": Decimal("3000"), "BTC": Decimal("90000")}


def _score(day: date, entries: list[WatchedAddress], found: list[Observation]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The day's watch-list export of ``entries`` and the ``address_risk`` rows of ``found``
    (one chain), built by the pipeline's own steps."""
    chain = Chain(found[0].chain)
    batch = Batch(day, DAILY, f"run-{day}-{secrets.token_hex(3)}")
    at = datetime.combine(day, time(2), UTC)
    families = [family_key(parse_address(o.address, chain)) for o in found]
    rows = observation_rows(found, LIVE, batch, families)
    members = member_rows([(o, (f,)) for o, f in zip(found, families, strict=True)], LIVE, batch)
    symbol = CHAINS[chain].symbol
    prices = price_rows(chain, {LIVE: Price(symbol, USD[symbol], at, "test")}, batch, at)
    risk = risk_rows(link_frame(rows, family_links({chain.value: members.lazy()})), prices, load_readiness(), at)
    return watch_entries_frame(entries, batch, at), risk


async def _land(
    app: Any, day: date, entries: list[WatchedAddress], found: list[Observation], publish: bool = False
) -> pl.DataFrame:
    """Land one chain-day partition's watch list and ``address_risk`` files in the app's
    analytics folder (and publish its results, as ``published_scan_results`` does)."""
    watch, risk = _score(day, entries, found)
    store = AnalyticsStore(app.ctx.settings.analytics_dir)
    chain = found[0].chain
    store.write_frame("watchlist", store.daily_file("watchlist", day, chain), watch)
    store.write_frame("address_risk", store.daily_file("address_risk", day, chain), risk)
    if publish:
        await SqlScanStore(app.ctx.database).save_results(records_for(risk, watch, load_readiness()))
    return risk


async def _entries(app: Any, account_id: str) -> dict[str, WatchedAddress]:
    return {w.address: w for w in await SqlScanStore(app.ctx.database).watchlist(account_id, LIVE)}


def _eth(
    nonce: int, balance_eth: int, at: datetime, txid: str | None = None, address: str | None = None
) -> Observation:
    """An EOA observed at ``at`` (a new address unless given), its key revealed by ``txid``."""
    address = address or evm_address(secrets.randbits(64))
    _, found = evm_observation(address, balance_eth * 10**18, nonce, observed_at=at)
    if txid is None:
        return found
    return dataclasses.replace(
        found, evidence=(ExposureEvidence("ethereum", found.address, EvidenceKind.NONCE, txid, 21),)
    )


def _only_links_leave(page: str) -> None:
    """Every URL of another origin on the page is the href of a link that gives nothing away."""
    assert "<img" not in page and "<iframe" not in page and "prefetch" not in page and "<script" not in page
    for found in re.finditer(r"https?://", page):
        tag_start = page.rfind("<", 0, found.start())
        tag = page[tag_start : page.index(">", found.start()) + 1]
        if tag.startswith("<svg"):  # the SVG namespace name, not a resource
            assert 'xmlns="http://www.w3.org/2000/svg"' in tag
            continue
        assert re.fullmatch(r'<a href="https://[^"\s]+" rel="noopener noreferrer">', tag), tag


async def test_the_detail_page_shows_factors_evidence_links_and_history(app: Any, client: httpx.AsyncClient) -> None:
    tenant, other = await make_tenant(client), await make_tenant(client)
    today = app.ctx.clock.now().date()
    yesterday = today - timedelta(days=1)
    txid = "0x" + secrets.token_hex(32)
    before = _eth(0, 2, datetime.combine(yesterday, time(1), UTC))
    after = _eth(4, 2, datetime.combine(today, time(1), UTC), txid, before.address)
    btc_txid = secrets.token_hex(32)
    _, coin = btc_observation(
        BTC,
        50_000_000,
        spent=1,
        evidence=(ExposureEvidence("bitcoin", BTC, EvidenceKind.SPEND, btc_txid, 870_000),),
        observed_at=datetime.combine(today, time(1), UTC),
    )
    eth = before.address
    await watched(app, tenant.account_id, [("ethereum", eth, "cold wallet"), ("bitcoin", BTC, None)])
    entries = await _entries(app, tenant.account_id)
    first = await _land(app, yesterday, [entries[eth]], [before])
    second = await _land(app, today, [entries[eth]], [after], publish=True)
    await _land(app, today, [entries[BTC]], [coin], publish=True)
    old, new = first.row(0, named=True), second.row(0, named=True)
    assert old["risk_score"] != new["risk_score"]  # the key was revealed in between

    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        portfolio = (await b.get("/portfolio")).text
        assert f'<a href="/address/ethereum/{eth}?env=live">' in portfolio
        r = await b.get(f"/address/ethereum/{eth}")
        assert r.status_code == 200, r.text
        page = r.text
        assert f'<span class="badge level-{new["risk_score"]}" id="detail-level">{new["risk_score"]}</span>' in page
        assert f'<strong id="detail-risk-value">{new["risk_value"]}</strong>' in page
        assert '<dd id="detail-balance">2 ETH</dd>' in page and '<dd id="detail-usd">$6,000.00</dd>' in page
        assert "exposed on chain" in page and "cold wallet" in page
        for factor, percent in WEIGHT_PERCENT.items():
            score = new[SCORE_COLUMN[factor]]
            row = rf'<th scope="row">{factor.value.replace("_", " ")}</th>\s*<td class="num">{percent}%</td>\s*'
            assert re.search(row + rf'<td class="num">{score}</td>', page), factor
        assert f'<a href="https://etherscan.io/tx/{txid}" rel="noopener noreferrer">' in page
        assert f'<a href="https://etherscan.io/address/{eth}" rel="noopener noreferrer">' in page
        _only_links_leave(page)
        history = re.search(r'<desc id="chart-history-desc">([^<]*)</desc>', page)
        assert history is not None
        assert history.group(1) == (
            f"risk value: {yesterday} {old['risk_value']} ({old['risk_score']}),"
            f" {today} {new['risk_value']} ({new['risk_score']})"
        )
        assert page.count('<circle class="point risk') == 2
        assert f'<th scope="row">{yesterday}</th><td><span class="badge level-{old["risk_score"]}">' in page

        bitcoin = (await b.get(f"/address/bitcoin/{BTC}")).text
        assert f'<a href="https://mempool.space/tx/{btc_txid}" rel="noopener noreferrer">' in bitcoin
        assert '<dd id="detail-balance">0.5 BTC</dd>' in bitcoin and "no-history" not in bitcoin
        _only_links_leave(bitcoin)

        never = evm_address(secrets.randbits(64))
        for path, status in (
            (f"/address/ethereum/{never}", 404),  # valid, never watched nor scanned
            (f"/address/ethereum/{eth}?env=test", 404),  # watched in live only
            (f"/address/dogecoin/{eth}", 400),
            ("/address/ethereum/0x1234", 400),
            (f"/address/bitcoin/{eth}", 400),
        ):
            r = await b.get(path)
            assert r.status_code == status and "That was not done" in r.text, path

    async with browser(app) as b:  # another tenant does not see it, nor learns it exists
        await logged_in(b, other.email, other.password)
        r = await b.get(f"/address/ethereum/{eth}")
        assert r.status_code == 404 and "cold wallet" not in r.text and "etherscan" not in r.text


async def test_the_portfolio_charts_the_exposure_per_level_per_day(app: Any, client: httpx.AsyncClient) -> None:
    tenant, other = await make_tenant(client), await make_tenant(client)
    today = app.ctx.clock.now().date()
    days = [today - timedelta(days=3), today - timedelta(days=2)]
    at = [datetime.combine(d, time(1), UTC) for d in days]
    quiet, busy, late = _eth(0, 1, at[0]), _eth(3, 5, at[0]), _eth(1, 2, at[1])
    await watched(app, tenant.account_id, [("ethereum", o.address, None) for o in (quiet, busy, late)])
    await watched(app, other.account_id, [("ethereum", quiet.address, None)])
    mine = await _entries(app, tenant.account_id)
    # day 1: two addresses scored; day 2: the third one too (watched since), all observed again
    landed = [
        await _land(app, days[0], [mine[quiet.address], mine[busy.address]], [quiet, busy]),
        await _land(
            app,
            days[1],
            list(mine.values()),
            [dataclasses.replace(o, observed_at=at[1]) for o in (quiet, busy)] + [late],
        ),
    ]
    expected = {
        (str(row["scan_date"]), row["risk_score"]): (row["len"], row["usd"])
        for row in pl.concat(landed)
        .group_by("scan_date", "risk_score")
        .agg(pl.len(), usd=pl.col("balance_usd").sum())
        .iter_rows(named=True)
    }
    assert sum(n for n, _ in expected.values()) == 5 and len({level for _, level in expected}) >= 2

    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        page = (await b.get("/portfolio")).text
        rows = re.findall(
            r'<tr><th scope="row">(\d{4}-\d\d-\d\d)</th><td><span class="badge level-(W\d)">W\d</span></td>\s*'
            r'<td class="num">(\d+)</td><td class="num">\$([\d,.]+)</td></tr>',
            page,
        )
        assert {(d, lv): (int(n), float(usd.replace(",", ""))) for d, lv, n, usd in rows} == expected
        desc = re.search(r'<desc id="chart-trend-desc">([^<]*)</desc>', page)
        assert desc is not None
        for (day, level), (n, _) in expected.items():
            assert re.search(rf"{level}: [^;]*{day} {n}\b", desc.group(1)), (day, level)
        assert '<svg id="chart-trend-usd"' in page and "Exposure over days" in page
        assert 'id="no-trend"' in (await b.get("/portfolio?chain=bitcoin")).text  # filtered as the portfolio is
        assert 'id="no-trend"' in (await b.get("/portfolio?env=test")).text

    async with browser(app) as b:  # watches one of them now, but did not on those days
        await logged_in(b, other.email, other.password)
        page = (await b.get("/portfolio")).text
        assert 'id="no-trend"' in page and 'id="chart-trend"' not in page


async def test_a_scanned_address_without_history_says_so(app: Any, client: httpx.AsyncClient) -> None:
    tenant = await make_tenant(client)
    now = app.ctx.clock.now()
    found = _eth(2, 1, now)
    asked = WatchedAddress("scan", tenant.account_id, LIVE, "ethereum", found.address, None, now)  # never stored
    watch, risk = _score(now.date(), [asked], [found])
    await SqlScanStore(app.ctx.database).save_results(records_for(risk, watch, load_readiness()))  # scanned only
    async with browser(app) as b:
        await logged_in(b, tenant.email, tenant.password)
        r = await b.get(f"/address/ethereum/{found.address}")
        assert r.status_code == 200 and "Scanned, not watched" in r.text
        assert 'id="no-history"' in r.text and "No history yet" in r.text and "chart-history" not in r.text
        assert f'id="detail-risk-value">{risk["risk_value"][0]}</strong>' in r.text
        assert 'id="no-trend"' in (await b.get("/portfolio")).text
