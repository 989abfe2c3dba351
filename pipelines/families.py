"""Key families in the pipelines: which addresses share a key, and the linkage of a day's
observations by family (Polars, no Dagster).

The API links one address at a time (``services.observer.ChainObserver.family``: the
address and its ``chains.keys.siblings``, merged by ``chains.evidence.with_family``). The
pipelines apply the same rule to every watched address of a day at once:

- A **family key** names the key an address belongs to, from the address alone:
  ``keccak:<hex20>`` for an EVM or Tron account (the same 20 bytes on the 15 EVM chains
  and Tron), ``hash160:<hex20>`` for a P2PKH, P2WPKH or Cosmos address (the same HASH160 as
  P2PKH, P2WPKH, P2SH-P2WPKH and Cosmos), and ``<chain>:<address>`` for an address with no
  sibling (P2SH, P2WSH, P2TR, Solana ...): its own family.
- The daily run observes, on each chain, its watched addresses and the siblings there of
  the addresses watched on every chain of its **family group** (``family_group``), each
  once; every observed member lands in ``key_exposure`` under the family it was observed
  for, with what revealed the key (``chains.evidence.evidence_of``).
- ``link_frame`` then gives each watched address what ``with_family`` gives it: its own
  evidence first, then its siblings' (P2TR never shares: a P2TR address has no sibling),
  the exposure raised to ``EXPOSED_AT_REST`` when a sibling revealed the key, and the
  coverage (the family's chains seen that day, the others unavailable; the Bitcoin-index
  limit of ``services.observer.limits_of``). ``with_index`` adds the chain-wide Bitcoin
  index's evidence for the hash160 families, as the API's scans do.

A P2SH address has no family of its own (its script is unknown), but the P2SH-P2WPKH of a
watched key hash is that hash's sibling: it is observed for the hash's family and shares
its evidence with it, while its own verdict only sees itself, as in the API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import polars as pl

from chains.environment import Environment
from chains.keys import HASH160_CHAINS, KECCAK_CHAINS, family_group
from chains.observation import Exposure
from chains.registry import CHAINS, Chain
from services.exposure_index import ExposureIndex, IndexAnswer
from storage.analytics import EVIDENCE_DTYPE

KECCAK: Final = "keccak"
HASH160: Final = "hash160"
"""The prefixes of ``chains.keys.family_key``."""

CHAIN_BIT: Final[dict[str, int]] = {chain.value: 1 << i for i, chain in enumerate(CHAINS)}
"""One bit per chain, in registry order: a set of chains as a ``UInt32`` mask."""
_BITCOIN_TYPE_RANK: Final = {"p2pkh": 0, "p2wpkh": 1, "p2sh": 2}
"""The order of a hash160 family's Bitcoin forms in ``chains.keys.hash160_family``."""
LINK_CHUNK: Final = 20_000
"""Watched addresses linked per pass over the family group's ``key_exposure`` files."""


def sibling_sources(chain: Chain) -> tuple[Chain, ...]:
    """The chains whose watched addresses can have siblings on ``chain``: its family group,
    without the chain itself unless it is Bitcoin (the only chain where one key hash has
    several addresses: P2PKH, P2WPKH and P2SH-P2WPKH)."""
    return tuple(c for c in family_group(chain) if c is not chain or chain is Chain.BITCOIN)


def _mask(chains: Iterable[Chain]) -> int:
    found = 0
    for chain in chains:
        found |= CHAIN_BIT[chain.value]
    return found


_KECCAK_MASK: Final = _mask(KECCAK_CHAINS)
_HASH160_MASK: Final = _mask(HASH160_CHAINS)
_INDEX_LIMITED: Final = tuple(c.value for c in HASH160_CHAINS)
"""Chains whose "not exposed" verdict has the Bitcoin-index limit (``services.observer.limits_of``)."""


def _chain_bit(column: str) -> pl.Expr:
    return pl.col(column).cast(pl.String()).replace_strict(CHAIN_BIT, return_dtype=pl.UInt32())


def _chains_of(mask: pl.Expr) -> pl.Expr:
    """The chains of a mask, in registry order."""
    return pl.concat_list(
        [
            pl.when((mask & bit) != 0).then(pl.lit(chain)).otherwise(pl.lit(None, pl.String()))
            for chain, bit in CHAIN_BIT.items()
        ]
    ).list.drop_nulls()


def member_rank() -> pl.Expr:
    """The order of a family member as ``chains.keys.siblings`` lists it: chains in
    registry order (the EVM chains, then Tron; Bitcoin before Cosmos), and on Bitcoin
    P2PKH, P2WPKH, then P2SH-P2WPKH."""
    chain_index = (
        pl.col("chain")
        .cast(pl.String())
        .replace_strict({c.value: i for i, c in enumerate(CHAINS)}, return_dtype=pl.Int64())
    )
    form = (
        pl.col("address_type").cast(pl.String()).replace_strict(_BITCOIN_TYPE_RANK, default=3, return_dtype=pl.Int64())
    )
    return chain_index * 4 + form


# --- linkage ----------------------------------------------------------------------------

EVIDENCE_FIELDS: Final = ("chain", "address", "kind", "txid", "block_height")


_EVIDENCE_SCHEMA: Final = pl.Schema(
    {"environment": pl.String(), "family": pl.String(), **EVIDENCE_DTYPE.to_schema(), "rank": pl.Int64()}
)


@dataclass(frozen=True, slots=True)
class FamilyLinks:
    """What a day's members say about each family: the chains that observed a member
    (``coverage``: environment, family, ``observed`` mask of ``CHAIN_BIT``) and every
    evidence row (``evidence``: environment, family, the evidence fields, ``rank`` =
    member order, then the order the rows were written)."""

    coverage: pl.DataFrame
    evidence: pl.DataFrame


def family_links(
    members: Mapping[str, pl.LazyFrame], families: pl.LazyFrame | pl.DataFrame | None = None
) -> FamilyLinks:
    """The coverage and evidence of the families of ``families`` (environment, family
    pairs; default: every family in ``members``) from ``members``: each chain's
    ``key_exposure`` rows, in the order written. Each chain's rows are read for the wanted
    families only (their keys, then their evidence rows), so memory holds the wanted
    families and their evidence rows (``address_risk`` asks for at most ``LINK_CHUNK``
    families at a time), never all the members."""
    keys = ["environment", "family"]
    if families is None:
        families = pl.concat([rows.select(keys) for rows in members.values()])
    wanted = families.lazy().select(keys).unique().collect(engine="streaming")
    coverage = wanted.with_columns(observed=pl.lit(0, pl.UInt32()))
    evidence = []
    for chain, rows in members.items():
        seen = (
            rows.select(keys).join(wanted.lazy(), on=keys, how="semi").unique().collect(engine="streaming")
        ).with_columns(_seen=pl.lit(True))
        coverage = coverage.join(seen, on=keys, how="left").select(
            *keys,
            observed=pl.when(pl.col("_seen").fill_null(False))
            .then(pl.col("observed") | pl.lit(CHAIN_BIT[chain], pl.UInt32()))
            .otherwise(pl.col("observed")),
        )
        evidence.append(
            rows.with_row_index("_ord")
            .filter(pl.col("kind").is_not_null())
            .join(wanted.lazy(), on=keys, how="semi")
            .select(*keys, *EVIDENCE_FIELDS, rank=member_rank() * (1 << 40) + pl.col("_ord").cast(pl.Int64()))
            .collect(engine="streaming")
        )
    found = pl.concat(evidence) if evidence else _EVIDENCE_SCHEMA.to_frame()
    return FamilyLinks(coverage, found.cast(_EVIDENCE_SCHEMA))


INDEX_RANK: Final = 1 << 48
"""Rank of the first index evidence row of a family: after every member's rows."""


def index_evidence(families: pl.DataFrame, index: ExposureIndex) -> pl.DataFrame:
    """``FamilyLinks.evidence`` rows of the chain-wide Bitcoin index for the ``hash160``
    families of ``families`` (environment, family): what ``ChainObserver.family`` adds for
    one address, for a whole window of them (one index query per environment)."""
    rows: list[tuple[object, ...]] = []
    hashed = families.filter(pl.col("family").str.starts_with(f"{HASH160}:")).unique()
    for (environment,), group in hashed.group_by("environment"):
        by_hash = {bytes.fromhex(f.removeprefix(f"{HASH160}:")): f for f in group["family"].to_list()}
        for key_hash, found in index.evidence_by_hash(Environment(environment), list(by_hash)).items():
            family = by_hash[key_hash]
            rows += (
                (environment, family, e.chain, e.address, e.kind.value, e.txid, e.block_height, INDEX_RANK + i)
                for i, e in enumerate(found)
            )
    return pl.DataFrame(rows, schema=_EVIDENCE_SCHEMA, orient="row")


def with_index(links: FamilyLinks, families: pl.DataFrame, index: ExposureIndex | None) -> FamilyLinks:
    """``links`` with the index's evidence for ``families`` added (unchanged without an index)."""
    if index is None:
        return links
    return FamilyLinks(links.coverage, pl.concat([links.evidence, index_evidence(families, index)]))


def _index_covered(index: Mapping[str, IndexAnswer] | None) -> pl.Expr:
    """True for a Bitcoin row whose height the environment's index is complete to (where
    ``IndexAnswer.limit`` says nothing is missed); every other row keeps the index limit."""
    complete = {env: a.complete_to for env, a in (index or {}).items() if a.indexed and a.complete_to is not None}
    if not complete:
        return pl.lit(False)
    to = pl.col("environment").replace_strict(complete, default=None, return_dtype=pl.Int64())
    return ((pl.col("chain").cast(pl.String()) == Chain.BITCOIN.value) & (pl.col("height") <= to)).fill_null(False)


def link_frame(
    observations: pl.DataFrame, links: FamilyLinks, index: Mapping[str, IndexAnswer] | None = None
) -> pl.DataFrame:
    """``observations`` (``address_observations`` rows, with their ``family``) linked to
    their key family, with the ``storage.analytics.LINK_COLUMNS`` added: what
    ``chains.evidence.with_family`` and ``ChainObserver.family`` give each address
    (``index``: each environment's Bitcoin index state, for the verdict's limits).

    Own evidence is the evidence rows of the address itself (in order), shared evidence
    the family's other rows (member order, then row order) without repeats or rows equal
    to an own one; shared evidence raises the exposure to ``EXPOSED_AT_REST``. Coverage:
    the family's chains with an observed member, plus the address's own chain, are
    checked; the family's other chains are unavailable."""
    rows = observations.with_row_index("_row")
    targets = rows.select(
        "_row",
        "environment",
        "family",
        pl.col("chain").cast(pl.String()).alias("_chain"),
        pl.col("address").alias("_address"),
    )
    pairs = targets.join(links.evidence, on=["environment", "family"], how="inner")
    is_own = (pl.col("chain") == pl.col("_chain")) & (pl.col("address") == pl.col("_address"))
    own = pairs.filter(is_own).with_columns(_shared=pl.lit(False))
    shared = (
        pairs.filter(~is_own)
        .join(own.select("_row", *EVIDENCE_FIELDS), on=["_row", *EVIDENCE_FIELDS], how="anti", nulls_equal=True)
        .sort("_row", "rank")
        .unique(subset=["_row", *EVIDENCE_FIELDS], keep="first", maintain_order=True)
        .with_columns(_shared=pl.lit(True))
    )
    lists = (
        pl.concat([own, shared])
        .sort("_row", "_shared", "rank")
        .group_by("_row", maintain_order=True)
        .agg(exposure_evidence=pl.struct(*EVIDENCE_FIELDS), _by_family=pl.col("_shared").any())
    )
    own_bit = _chain_bit("chain")
    family = pl.col("family")
    expected = (
        pl.when(family.str.starts_with(f"{KECCAK}:"))
        .then(pl.lit(_KECCAK_MASK, pl.UInt32()))
        .when(family.str.starts_with(f"{HASH160}:"))
        .then(pl.lit(_HASH160_MASK, pl.UInt32()))
        .otherwise(own_bit)
    )
    checked = pl.col("observed").fill_null(0).cast(pl.UInt32()) | own_bit
    unavailable = expected & ~checked
    exposure = (
        pl.when(pl.col("_by_family").fill_null(False))
        .then(pl.lit(Exposure.EXPOSED_AT_REST.value))
        .otherwise(pl.col("exposure").cast(pl.String()))
    )
    limited = (
        pl.col("chain").cast(pl.String()).is_in(_INDEX_LIMITED)
        & (pl.col("exposure") != Exposure.EXPOSED_AT_REST.value)
        & ~_index_covered(index)
    )
    empty = pl.lit(pl.Series([[]], dtype=pl.List(EVIDENCE_DTYPE)))
    linked = (
        rows.join(lists, on="_row", how="left")
        .join(links.coverage, on=["environment", "family"], how="left")
        .with_columns(
            observed_exposure=pl.col("exposure").cast(pl.String()),
            exposure=exposure,
            exposure_evidence=pl.col("exposure_evidence").fill_null(empty),
            coverage_checked=_chains_of(checked),
            coverage_unavailable=_chains_of(unavailable),
            _unavailable=unavailable,
        )
        .with_columns(exposure_complete=(pl.col("_unavailable") == 0) & ~limited)
        .sort("_row")
        .drop("_row", "_by_family", "observed", "_unavailable")
    )
    return linked
