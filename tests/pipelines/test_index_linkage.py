"""The pipelines' linkage with the chain-wide Bitcoin index: the same evidence and limits as
a scan (``ChainObserver.family`` with ``services.exposure_index``) for a whole batch."""

from __future__ import annotations

import dataclasses
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from chains.codecs.detect import parse_address
from chains.environment import Environment
from chains.keys import family_key
from chains.observation import Exposure
from pipelines.families import CHAIN_BIT, FamilyLinks, family_links, link_frame, with_index
from pipelines.rescore import DAILY, Batch, coverage_from_row, observation_from_row, observation_rows
from services.bitcoin_ingest import ingest_block_files
from services.exposure_index import ExposureIndex, IndexAnswer
from services.exposure_index import with_index as scan_with_index
from services.observer import limits_of
from storage.bitcoin_index import BitcoinIndexStore
from tests.bitcoin_chain import write_conformance_block_file
from tests.pipelines.support import btc_observation

BLOCK9_P2PKH = "12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S"
BLOCK9_KEY = (
    "0411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5c"
    "b2e0eaddfb84ccf9744464f82e160bfa9b8b64f9d4c03f999b8643f656b412a3"
)
BLOCK170_SPEND = "f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16"
QUIET = "1BgGZ9tcN4rm9KBzDn7KprQz87SZ26SAMH"  # the P2PKH of the key 1 * G: not in these blocks
BATCH = Batch(date(2026, 11, 25), DAILY, "r")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, conformance_dir: Path) -> ExposureIndex:
    folder = tmp_path_factory.mktemp("blocks")
    write_conformance_block_file(conformance_dir, folder / "blk00000.dat")
    store = BitcoinIndexStore(tmp_path_factory.mktemp("analytics"))
    ingest_block_files([folder], store)
    return ExposureIndex(store)


def test_a_batch_gets_the_index_evidence_a_scan_gets(index: ExposureIndex) -> None:
    watched = [btc_observation(BLOCK9_P2PKH, 5_000)[1], btc_observation(QUIET, 5_000)[1]]
    families = [family_key(parse_address(o.address, "bitcoin")) for o in watched]
    rows = observation_rows(watched, Environment.LIVE, BATCH, families)
    states = {env.value: index.state(env) for env in Environment}
    links = with_index(family_links({}, rows.select("environment", "family")), rows, index)
    linked = link_frame(rows, links, states).to_dicts()
    for observation, row in zip(watched, linked, strict=True):
        key_hash = parse_address(observation.address, "bitcoin").payload
        found = index.evidence_by_hash(Environment.LIVE, [key_hash]).get(key_hash, ())
        answer = dataclasses.replace(states["live"], evidence=found)
        expected = scan_with_index(observation, answer)
        assert Exposure(row["exposure"]) is expected.exposure
        rebuilt = observation_from_row(row)
        assert rebuilt.evidence == expected.evidence
        coverage = coverage_from_row(row, rebuilt, states["live"])
        assert coverage.limits == limits_of(expected, answer, observation.height)
        assert row["exposure_complete"] is False  # cosmos was not observed here
    block9, quiet = linked
    assert block9["exposure"] == "EXPOSED_AT_REST"
    assert block9["exposure_evidence"] == [
        {"chain": "bitcoin", "address": BLOCK9_KEY, "kind": "index", "txid": BLOCK170_SPEND, "block_height": None}
    ]
    assert quiet["exposure"] == "EXPOSED_ON_SPEND" and quiet["exposure_evidence"] == []


@pytest.mark.parametrize(
    ("state", "height", "limited"),
    [
        (IndexAnswer((), indexed=False, complete_to=None), 100, True),
        (IndexAnswer((), indexed=True, complete_to=None), 100, True),
        (IndexAnswer((), indexed=True, complete_to=99), 100, True),
        (IndexAnswer((), indexed=True, complete_to=100), 100, False),
        (IndexAnswer((), indexed=True, complete_to=100), None, True),
    ],
)
def test_the_vectorised_index_limit_is_the_scans(state: IndexAnswer, height: int | None, limited: bool) -> None:
    observation = dataclasses.replace(btc_observation(QUIET, 5_000)[1], height=height)
    family = family_key(parse_address(QUIET, "bitcoin"))
    rows = observation_rows([observation], Environment.LIVE, BATCH, [family])
    seen = CHAIN_BIT["bitcoin"] | CHAIN_BIT["cosmos"]  # the whole family observed: only the index can limit
    coverage = pl.DataFrame({"environment": ["live"], "family": [family], "observed": [seen]})
    links = FamilyLinks(coverage.cast({"observed": pl.UInt32()}), family_links({}, rows).evidence)
    (row,) = link_frame(rows, links, {"live": state}).to_dicts()
    assert bool(limits_of(observation, state, height)) is limited
    assert row["coverage_unavailable"] == [] and row["exposure_complete"] is not limited
