"""A loopback Esplora serving a Bitcoin chain built by the test.

Transactions are real: serialised by ``chains.bitcoin.tx.serialize_transaction`` and parsed
back, so txids are hashed from their bytes; each is served in Esplora's JSON layout (electrs:
``vin`` with ``prevout``, ``scriptsig``, ``witness``, ``sequence``; ``vout``; ``status``).
Routes: ``/blocks/tip/height``, ``/address/:a`` (``chain_stats``), ``/address/:a/txs`` and
``/txs/chain/:last`` (pages of 25, newest first), ``/address/:a/utxo``, ``/scripthash/:h``
likewise, ``/tx/:txid``, ``/fee-estimates``. An address the chain never saw has zero stats,
as on a real server.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chains.bitcoin.tx import Transaction, TxIn, TxOut, parse_transaction, serialize_transaction
from chains.codecs.bitcoin import BitcoinAddress
from chains.registry import Network
from pqc.hashes import sha256
from tests.chain_clients.loopback import Answer, Loopback

PAGE = 25
BLOCK_TIME = 1_700_000_000
#: A DER-shaped ECDSA signature with SIGHASH_ALL (71 bytes): what a spend's witness shows.
SIGNATURE = bytes.fromhex("3044" + "0220" + "11" * 32 + "0220" + "22" * 32 + "01")
#: The key of the coins that fund the wallet (an unrelated, valid point).
FUNDER_KEY = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")


@dataclass
class Output:
    """An output of the built chain and the transaction that spent it, if any."""

    txid: str
    vout: int
    value: int
    script: bytes
    height: int
    spent_by: str | None = None


class EsploraChain:
    """The chain and the loopback routes that serve it."""

    def __init__(
        self,
        loopback: Loopback,
        network: Network = Network.MAINNET,
        tip: int = 900_000,
        fee_estimates: Mapping[str, float] | None = None,
    ) -> None:
        self.loopback = loopback
        self.network = network
        self.tip = tip
        self.fee_estimates = dict(fee_estimates or {"1": 30.5, "3": 20.0, "6": 12.25, "144": 2.0})
        self.txs: dict[str, dict[str, Any]] = {}
        self.raw: dict[str, bytes] = {}
        self.outputs: dict[tuple[str, int], Output] = {}
        self.history: dict[bytes, list[str]] = {}  # script -> txids, oldest first
        self._serial = itertools.count(1)
        loopback.fallback = self._answer

    def _record(self, tx: Transaction, raw: bytes, height: int, prevouts: Sequence[Output | None]) -> None:
        vin = []
        for txin, prevout in zip(tx.inputs, prevouts, strict=True):
            item: dict[str, Any] = {
                "txid": txin.prev_txid,
                "vout": txin.vout,
                "prevout": None if prevout is None else {"scriptpubkey": prevout.script.hex(), "value": prevout.value},
                "scriptsig": txin.script_sig.hex(),
                "is_coinbase": False,
                "sequence": txin.sequence,
            }
            if txin.witness:
                item["witness"] = [w.hex() for w in txin.witness]
            vin.append(item)
        self.txs[tx.txid] = {
            "txid": tx.txid,
            "version": tx.version,
            "locktime": tx.locktime,
            "vin": vin,
            "vout": [{"scriptpubkey": o.script_pubkey.hex(), "value": o.value} for o in tx.outputs],
            "status": {"confirmed": True, "block_height": height, "block_time": BLOCK_TIME + height},
        }
        self.raw[tx.txid] = raw
        touched = {o.script_pubkey for o in tx.outputs} | {p.script for p in prevouts if p is not None}
        for script in touched:
            self.history.setdefault(script, []).append(tx.txid)
        for vout, txout in enumerate(tx.outputs):
            self.outputs[(tx.txid, vout)] = Output(tx.txid, vout, txout.value, txout.script_pubkey, height)
        for prevout in prevouts:
            if prevout is not None:
                prevout.spent_by = tx.txid

    def _build(self, inputs: Sequence[TxIn], outputs: Sequence[TxOut]) -> tuple[Transaction, bytes]:
        draft = Transaction(2, tuple(inputs), tuple(outputs), 0, "", "")
        raw = serialize_transaction(draft)
        return parse_transaction(raw), raw

    def pay(self, script: bytes, value: int, height: int, outputs: int = 1) -> list[tuple[str, int]]:
        """A transaction paying ``script`` ``outputs`` times ``value`` from an outside coin;
        the outpoints it made."""
        funding = sha256(next(self._serial).to_bytes(8, "big"))[::-1].hex()
        txin = TxIn(funding, 0, b"", 0xFFFFFFFD, (SIGNATURE, FUNDER_KEY))
        tx, raw = self._build([txin], [TxOut(value, script)] * outputs)
        self._record(tx, raw, height, [None])
        return [(tx.txid, vout) for vout in range(outputs)]

    def spend(
        self, outpoint: tuple[str, int], key: bytes, to_script: bytes, height: int, *, legacy: bool = False
    ) -> str:
        """A transaction spending ``outpoint`` with a signature and ``key`` (in the witness, or
        in the scriptSig for a legacy P2PKH input), which reveals the key; its txid."""
        prevout = self.outputs[outpoint]
        if legacy:
            txin = TxIn(
                outpoint[0], outpoint[1], bytes([len(SIGNATURE)]) + SIGNATURE + bytes([len(key)]) + key, 0xFFFFFFFD, ()
            )
        else:
            txin = TxIn(outpoint[0], outpoint[1], b"", 0xFFFFFFFD, (SIGNATURE, key))
        tx, raw = self._build([txin], [TxOut(prevout.value - 1_000, to_script)])
        self._record(tx, raw, height, [prevout])
        return tx.txid

    # --- the server -----------------------------------------------------------------------

    def _stats(self, script: bytes) -> dict[str, Any]:
        funded = [o for o in self.outputs.values() if o.script == script]
        spent = [o for o in funded if o.spent_by is not None]
        chain = {
            "funded_txo_count": len(funded),
            "funded_txo_sum": sum(o.value for o in funded),
            "spent_txo_count": len(spent),
            "spent_txo_sum": sum(o.value for o in spent),
            "tx_count": len(self.history.get(script, ())),
        }
        zero = dict.fromkeys(chain, 0)
        return {"chain_stats": chain, "mempool_stats": zero}

    def _page(self, script: bytes, after: str | None) -> list[dict[str, Any]]:
        newest_first = list(reversed(self.history.get(script, [])))
        start = 0 if after is None else newest_first.index(after) + 1
        return [self.txs[txid] for txid in newest_first[start : start + PAGE]]

    def _utxo(self, script: bytes) -> list[dict[str, Any]]:
        return [
            {
                "txid": o.txid,
                "vout": o.vout,
                "value": o.value,
                "status": {"confirmed": True, "block_height": o.height, "block_time": BLOCK_TIME + o.height},
            }
            for o in self.outputs.values()
            if o.script == script and o.spent_by is None
        ]

    def _script(self, kind: str, subject: str) -> bytes | None:
        if kind == "address":
            return BitcoinAddress.decode(subject, network=self.network).script_pubkey
        for script in self.history:
            if sha256(script).hex() == subject:
                return script
        return b"\x6a"  # an unseen script hash: zero stats, like any unseen output

    def _answer(self, method: str, path: str, query: Mapping[str, str]) -> Answer:
        parts = path.strip("/").split("/")
        if method != "GET":
            return 405, {"error": "method"}
        if parts == ["blocks", "tip", "height"]:
            return 200, self.tip
        if parts == ["fee-estimates"]:
            return 200, self.fee_estimates
        if len(parts) == 2 and parts[0] == "tx" and parts[1] in self.txs:
            return 200, self.txs[parts[1]]
        if len(parts) >= 2 and parts[0] in ("address", "scripthash"):
            script = self._script(parts[0], parts[1])
            assert script is not None
            rest = parts[2:]
            if not rest:
                return 200, self._stats(script)
            if rest == ["txs"]:
                return 200, self._page(script, None)
            if len(rest) == 3 and rest[:2] == ["txs", "chain"]:
                return 200, self._page(script, rest[2])
            if rest == ["utxo"]:
                return 200, self._utxo(script)
        return 404, {"error": f"no route {path}"}
