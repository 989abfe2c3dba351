"""Observations as a Polars frame: the one input schema of the vectorised scorer.

One column per ``chains.observation.Observation`` field, plus the USD price of the
native token (``price_usd``, null when unknown) and when that price was taken
(``price_as_of``). The API builds a one-row frame with ``observations_to_frame``; a
pipeline builds the same columns straight from storage and never creates ``Observation``
objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Final, Protocol

import polars as pl

from chains.observation import AccountType, Exposure, Observation
from scoring.model import SUPPORTED_CHAINS


class UsdPrice(Protocol):
    """What the scorer needs of a price: USD per whole coin, and when it held.

    ``chains.clients.prices.Price`` fits as it is, and so does ``PriceQuote``.
    """

    @property
    def usd(self) -> Decimal | float:
        """USD per whole coin (one ETH, one BTC ...)."""
        ...

    @property
    def as_of(self) -> datetime:
        """When the price held."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class PriceQuote:
    """A plain ``UsdPrice``: USD per whole native coin and when it was taken."""

    usd: Decimal | float
    as_of: datetime


CHAIN_DTYPE: Final = pl.Enum(SUPPORTED_CHAINS)
EXPOSURE_DTYPE: Final = pl.Enum([level.value for level in Exposure])
ACCOUNT_TYPE_DTYPE: Final = pl.Enum([kind.value for kind in AccountType])
TIMESTAMP_DTYPE: Final = pl.Datetime("us", "UTC")

OBSERVATION_SCHEMA: Final = pl.Schema(
    {
        "chain": CHAIN_DTYPE,
        "address": pl.String(),
        "address_type": pl.Categorical(),  # few distinct values: compared as codes, not strings
        "account_type": ACCOUNT_TYPE_DTYPE,
        "balance": pl.Int128(),  # base units; wei overflow Int64 at ~9.2 ETH
        "decimals": pl.UInt8(),
        "symbol": pl.String(),
        "tx_count": pl.Int64(),
        "outbound_tx_count": pl.Int64(),
        "exposure": EXPOSURE_DTYPE,
        "public_key": pl.Binary(),
        "address_reuse_count": pl.Int64(),
        "first_activity": TIMESTAMP_DTYPE,
        "last_activity": TIMESTAMP_DTYPE,
        "source": pl.String(),
        "height": pl.Int64(),
        "observed_at": TIMESTAMP_DTYPE,
        "price_usd": pl.Float64(),
        "price_as_of": TIMESTAMP_DTYPE,
    }
)
"""Column names and types the scorer reads; the first 17 are ``Observation``'s scored fields."""

OBSERVATION_FIELDS: Final[tuple[str, ...]] = tuple(
    f.name for f in dataclasses.fields(Observation) if f.name != "evidence"
)
"""``Observation``'s fields that are scorer columns: all but ``evidence``, whose effect on the
score is already in ``exposure`` (it is stored in the ``key_exposure`` table instead)."""

_NON_NEGATIVE: Final = ("balance", "tx_count", "outbound_tx_count", "address_reuse_count", "price_usd")


def observations_to_frame(
    observations: Iterable[Observation], prices: Mapping[str, UsdPrice] | None = None
) -> pl.DataFrame:
    """Build the scorer's input frame from observations, pricing each by its ``symbol``.

    ``prices`` maps a native-token symbol (``"ETH"``, ``"BTC"`` ...) to its quote; a symbol
    without a quote gets a null ``price_usd``, which the scorer reports as an unknown price
    rather than $0. Keyed by symbol because one price serves every chain using that token.
    """
    rows = list(observations)
    quotes = [(prices or {}).get(row.symbol) for row in rows]
    columns: dict[str, list[object]] = {name: [getattr(row, name) for row in rows] for name in OBSERVATION_FIELDS}
    columns["price_usd"] = [None if quote is None else float(quote.usd) for quote in quotes]
    columns["price_as_of"] = [None if quote is None else quote.as_of for quote in quotes]
    return pl.DataFrame(columns, schema=OBSERVATION_SCHEMA)


def conform_observations(observations: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Check a frame against ``OBSERVATION_SCHEMA`` and cast it to those types.

    Fails loudly, because a silently wrong input gives a silently wrong score: a missing
    column or a negative balance, count or price, or a NaN or infinite price, raises ``ValueError``; a chain, exposure
    or account type outside its enum makes the strict cast raise Polars'
    ``InvalidOperationError``. Columns beyond the schema are kept. A frame that already
    has the schema's types is returned as is (no copy).
    """
    frame = observations.collect() if isinstance(observations, pl.LazyFrame) else observations
    schema = frame.schema
    missing = [name for name in OBSERVATION_SCHEMA if name not in schema]
    if missing:
        raise ValueError(f"observation frame lacks columns: {', '.join(missing)}")
    casts = [pl.col(name).cast(dtype) for name, dtype in OBSERVATION_SCHEMA.items() if schema[name] != dtype]
    if casts:
        frame = frame.with_columns(casts)
    counts = frame.select(
        *((pl.col(name) < 0).sum().alias(name) for name in _NON_NEGATIVE),
        nan_price=pl.col("price_usd").is_nan().sum(),
        infinite_price=pl.col("price_usd").is_infinite().sum(),
    ).row(0, named=True)
    bad = [f"{name} ({count} rows)" for name, count in counts.items() if name in _NON_NEGATIVE and count]
    bad += ["price_usd is NaN"] if counts["nan_price"] else []
    # an infinite price makes a balance's USD value NaN (0 coins) or infinite: no score holds
    bad += ["price_usd is infinite"] if counts["infinite_price"] else []
    if bad:
        raise ValueError(f"observation frame has negative, NaN or infinite values: {', '.join(bad)}")
    return frame
