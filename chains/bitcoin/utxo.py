"""Unspent outputs of a wallet, as a chain source lists them. Pure values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Utxo:
    """One confirmed unspent output: the outpoint (``txid`` in display hex, ``vout``), its
    value in satoshi and the height of the block that confirmed it."""

    txid: str
    vout: int
    value: int
    height: int
