"""The chains page over HTTP, on both engines: the 19 chains with the grades, factors and
sources the scans grade with, charted one bar per chain; the Bitcoin supply exposure, first
on a node with no index (what builds it), then with an index of the real mainnet blocks of
../shared/conformance and a UTXO snapshot of the outputs those blocks created."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from decimal import Decimal
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest

from chains.bitcoin.tx import parse_block
from core.ids import new_id
from scoring import load_readiness
from scoring.model import CHAIN_GRADES, MAX_STATUS_POINTS, STATUS_POINTS
from services.bitcoin_ingest import ingest_block_files
from services.bitcoin_utxo import ingest_utxo_snapshot
from storage.bitcoin_index import BitcoinIndexStore
from storage.bitcoin_supply import supply_path
from tests.bitcoin_chain import write_conformance_block_file
from tests.bitcoin_snapshot import Coin, write_snapshot
from tests.dashboard.support import PASSWORD, browser

NOT_BUILT = "Not built yet on this node"


def section(page: str, element_id: str) -> str:
    """The HTML of the element with this id up to the end of its enclosing section or table."""
    start = page.index(f'id="{element_id}"')
    end = min(i for i in (page.find("</section>", start), page.find("</table>", start)) if i >= 0)
    return page[start:end]


def cells(row: str) -> list[str]:
    """The text of a table row's cells (a line break read as a space)."""
    found = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
    return [" ".join(unescape(re.sub(r"<[^>]+>", " ", c)).split()) for c in found]


def bar_titles(page: str, chart_id: str) -> dict[str, str]:
    """A chart's bars: the label and segment of each rect's title, to the value printed."""
    svg = page[page.index(f'<svg id="{chart_id}"') :]
    svg = svg[: svg.index("</svg>")]
    titles = re.findall(r'<rect class="bar [^"]*"[^>]*><title>(.*?)</title></rect>', svg)
    return dict(unescape(t).rsplit(": ", 1) for t in titles)


async def test_every_chain_with_its_grade_factors_and_sources(signed_in: tuple[httpx.AsyncClient, str]) -> None:
    b, _ = signed_in
    r = await b.get("/chains")
    assert r.status_code == 200, r.text
    page = r.text
    readiness = load_readiness()  # what the scans grade chains with
    assert len(readiness.chains) == 19
    grades = dict(re.findall(r'<tr id="grade-([a-z]+)">(.*?)</tr>', page, re.S))
    assert set(grades) == set(readiness.chains)
    bars = bar_titles(page, "chart-readiness")
    assert len(bars) == 19  # one bar per chain
    for chain, graded in readiness.chains.items():
        name, family, grade, points, share = cells(grades[chain])
        assert (name, family, grade) == (chain, graded.family.value, graded.grade.letter)
        earned, possible = sum(STATUS_POINTS[f.status] for f in graded.factors), MAX_STATUS_POINTS * len(graded.factors)
        assert points == f"{earned} of {possible}"
        percent = 100 * earned / possible
        assert share == f"{percent:.1f} %"
        better = [g for g in CHAIN_GRADES if g.min_percent > graded.grade.min_percent]
        assert percent >= graded.grade.min_percent and all(percent < g.min_percent for g in better)
        assert bars[f"{chain}, grade {graded.grade.letter}"] == f"{percent:.0f}"
        factors = section(page, f"chain-{chain}")
        rows = re.findall(r'<tr data-factor="(\w+)" data-status="(\w+)">(.*?)</tr>', factors, re.S)
        assert [(factor, status, *cells(row)) for factor, status, row in rows] == [
            (
                f.factor.value,
                f.status.value,
                f"{f.factor.value.replace('_', ' ')} {f.status.value}, {STATUS_POINTS[f.status]} of 4 points",
                f"{f.detail} Source: {f.source}",
            )
            for f in graded.factors
        ]
        links = re.findall(r'<a class="source" href="(https://[^"]+)" rel="noopener noreferrer">', factors)
        assert links and links == [f.source for f in graded.factors]


async def test_the_page_loads_nothing_from_elsewhere(signed_in: tuple[httpx.AsyncClient, str]) -> None:
    b, _ = signed_in
    page = (await b.get("/chains")).text
    external = re.findall(r'<(\w+)\s[^>]*?\b(?:src|href|action|data|srcset)="((?:https?:)?//[^"]*)"[^>]*>', page)
    assert len(external) >= 19 and {tag for tag, _ in external} == {"a"}  # only links to follow
    for tag in re.findall(r'<a\s[^>]*href="(?:https?:)?//[^>]*>', page):
        assert 'rel="noopener noreferrer"' in tag
    for element in ("<img", "<iframe", "<script", "<object", "<embed", "<audio", "<video", "style="):
        assert element not in page
    assert re.findall(r"<link\s[^>]*>", page) == ['<link rel="stylesheet" href="/static/qday.css">']


async def test_signed_out_goes_to_login_and_every_account_sees_the_same_public_page(
    app: Any, signed_in: tuple[httpx.AsyncClient, str]
) -> None:
    b, email = signed_in
    async with browser(app) as anonymous:
        assert (await anonymous.get("/chains")).headers["location"] == "/"
    async with browser(app) as other:
        r = await other.post("/register", data={"email": f"{new_id('other')}@example.com", "password": PASSWORD})
        assert r.status_code == 303
        mine, theirs = [(await c.get("/chains")).text for c in (b, other)]
    main = [p[p.index('<main id="main">') :] for p in (mine, theirs)]
    assert main[0] == main[1] and email not in theirs


async def test_without_an_index_the_page_says_what_builds_it(signed_in: tuple[httpx.AsyncClient, str]) -> None:
    b, _ = signed_in
    for env, networks in (("live", "mainnet"), ("test", "testnet3, testnet4, signet, regtest")):
        r = await b.get(f"/chains?env={env}")
        assert r.status_code == 200
        missing = section(r.text, "supply-missing")
        assert NOT_BUILT in missing and f"for {networks}." in missing
        assert "qday bitcoin ingest-blocks" in r.text and "qday bitcoin ingest-utxo-snapshot utxo.dat" in r.text
        assert "chart-supply" not in r.text


@pytest.fixture
def analytics(app: Any) -> Iterator[Path]:
    """The session app's analytics folder, left as it was found: what a test adds (an index
    that other tests' scans would read) is removed after it."""
    root: Path = app.ctx.settings.analytics_dir
    root.mkdir(parents=True, exist_ok=True)
    before = set(root.iterdir())
    yield root
    for added in set(root.iterdir()) - before:
        if added.is_dir():
            shutil.rmtree(added)
        else:
            added.unlink()


def created_outputs(blocks: dict[int, bytes]) -> tuple[list[Coin], str]:
    """Every spendable output the blocks created, as snapshot coins, and the last block's hash."""
    coins: list[Coin] = []
    for height, raw in blocks.items():
        for position, tx in enumerate(parse_block(raw).transactions):
            for vout, out in enumerate(tx.outputs):
                if not out.script_pubkey.startswith(b"\x6a"):  # OP_RETURN: never in a UTXO set
                    coins.append((bytes.fromhex(tx.txid), vout, height, position == 0, out.value, out.script_pubkey))
    return coins, parse_block(blocks[max(blocks)]).header.hash


async def test_the_supply_of_real_blocks_is_charted_and_tabled(
    signed_in: tuple[httpx.AsyncClient, str], analytics: Path, conformance_dir: Path, tmp_path: Path
) -> None:
    b, _ = signed_in
    (tmp_path / "blocks").mkdir()
    blocks = write_conformance_block_file(conformance_dir, tmp_path / "blocks" / "blk00000.dat")
    ingest_block_files([tmp_path / "blocks"], BitcoinIndexStore(analytics), workers=1)
    page = (await b.get("/chains")).text  # the index, but no UTXO snapshot yet
    missing = section(page, "supply-missing")
    assert "The exposure index is built (not from the genesis block); the UTXO snapshot is missing." in missing
    assert "qday bitcoin ingest-blocks" not in page and "qday bitcoin ingest-utxo-snapshot utxo.dat" in page

    coins, tip = created_outputs(blocks)
    with (tmp_path / "utxo.dat").open("wb") as f:
        write_snapshot(f, network="mainnet", base_block_hash=tip, coins=coins)
    report = ingest_utxo_snapshot(tmp_path / "utxo.dat", analytics)
    assert (report.height, report.height_source) == (702_861, "index")
    table = pl.read_parquet(supply_path(analytics, "mainnet"))
    expected = {(r["script_type"], r["cause"]): (r["outputs"], r["value_sat"]) for r in table.iter_rows(named=True)}
    assert ("p2pkh", "revealed_key") in expected and ("p2pk", "type") in expected  # real reuse, block 170's P2PK

    page = (await b.get("/chains")).text
    assert NOT_BUILT not in page and "mainnet at height 702,861" in page
    rows = re.findall(
        r'<tr data-type="(\w+)" data-cause="(\w+)">(.*?)</tr>', section(page, "supply-table-mainnet"), re.S
    )
    shown = {}
    for script_type, cause, row in rows:
        _, _, level, outputs, btc, _ = cells(row)
        assert level == ("EXPOSED_AT_REST" if cause != "none" else "EXPOSED_ON_SPEND")  # no undetermined type here
        shown[(script_type, cause)] = (int(outputs.replace(",", "")), int(Decimal(btc.removesuffix(" BTC")) * 10**8))
    assert shown == expected
    total = sum(sat for _, sat in expected.values())
    exposed = sum(sat for (_, cause), (_, sat) in expected.items() if cause != "none")
    headline = re.search(r"<strong>([\d.]+) BTC</strong> of ([\d.]+) BTC\s+\(<strong>([\d.]+) %</strong>\)", page)
    assert headline is not None
    assert [Decimal(n) * 10**8 for n in headline.groups()[:2]] == [exposed, total]
    assert headline[3] == f"{100 * exposed / total:.2f}"
    btc_bars, output_bars = (bar_titles(page, f"chart-supply-{kind}-mainnet") for kind in ("btc", "outputs"))
    assert len(btc_bars) == len(output_bars) == len(expected)  # one segment per type and cause
    assert output_bars["P2PKH, key revealed elsewhere"] == "{:,}".format(expected[("p2pkh", "revealed_key")][0])
    p2pk_btc = Decimal(expected[("p2pk", "type")][1]).scaleb(-8).normalize()  # to the satoshi, no trailing zeros
    assert btc_bars["P2PK, key in the script"] == f"{p2pk_btc:f} BTC"

    test_env = (await b.get("/chains?env=test")).text  # mainnet's table is not the test networks'
    assert NOT_BUILT in test_env and "chart-supply" not in test_env


async def test_an_unreadable_supply_file_is_named_not_an_error(
    signed_in: tuple[httpx.AsyncClient, str], analytics: Path
) -> None:
    b, _ = signed_in
    path = supply_path(analytics, "signet")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not parquet")
    r = await b.get("/chains?env=test")
    assert r.status_code == 200
    assert "The supply table of signet could not be read" in section(r.text, "supply-unreadable")
    assert NOT_BUILT not in r.text and "signet" not in (await b.get("/chains")).text.split('id="supply"')[1]
