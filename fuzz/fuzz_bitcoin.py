"""Fuzz the Bitcoin consensus parsers (``chains.bitcoin``): transactions, blocks, scripts,
spend analysis and the script → address mapping.

Passes: a parsed value with its properties (a txid/wtxid is the double SHA-256 of the bytes
it covers; an output script with an address form maps to an address whose script is the
same bytes, and whose text parses back), or ``MalformedChainData`` (SCAN_004) /
``InvalidAddress`` (SCAN_001, scripts with no address form). Input: byte 0 picks the parser
(transaction, block, script), the rest is the raw bytes.
"""

from __future__ import annotations

import atheris

from api.errors import code_of

with atheris.instrument_imports(include=["chains.bitcoin", "chains.codecs"]):
    from chains.bitcoin.exposure import script_exposure
    from chains.bitcoin.script import classify_script, iter_script
    from chains.bitcoin.spend import analyze_input
    from chains.bitcoin.tx import Transaction, merkle_root, parse_block, parse_transaction
    from chains.codecs.bitcoin import BitcoinAddress
    from chains.errors import InvalidAddress, MalformedChainData
    from pqc.hashes import sha256d

from fuzz.runner import run
from fuzz.seeds import files, hex_values


def _script(script: bytes) -> None:
    info = classify_script(script)
    script_exposure(script)
    try:
        list(iter_script(script))
    except MalformedChainData:
        pass
    try:
        address = BitcoinAddress.from_script_pubkey(script)
    except InvalidAddress:
        assert not info.program or info.witness_version is not None, info
        return
    assert address.script_pubkey == script, (script.hex(), str(address))
    assert BitcoinAddress.decode(str(address)) == address


def _transaction_parts(tx: Transaction) -> None:
    for txin in tx.inputs:
        analyze_input(txin)
    for txout in tx.outputs:
        assert txout.value >= 0
        _script(txout.script_pubkey)


def _transaction(raw: bytes) -> None:
    tx = parse_transaction(raw)
    whole = sha256d(raw)[::-1].hex()
    assert (tx.wtxid if tx.has_witness else tx.txid) == whole, raw.hex()
    _transaction_parts(tx)


def _block(raw: bytes) -> None:
    block = parse_block(raw)
    assert block.header.hash == sha256d(raw[:80])[::-1].hex()
    if block.transactions:
        merkle_root([tx.txid for tx in block.transactions])
    for tx in block.transactions:
        _transaction_parts(tx)


_PARSERS = (_transaction, _block, _script)


def test_one_input(data: bytes) -> None:
    """libFuzzer's entry point: one parser on one input."""
    if not data:
        return
    try:
        _PARSERS[data[0] % len(_PARSERS)](data[1:])
    except MalformedChainData as exc:
        assert code_of(exc) == "SCAN_004", exc


def seeds() -> list[bytes]:
    """The real transactions and the small real blocks of the vectors, and every script in them."""
    found = [b"\x00" + tx for tx in hex_values("bitcoin/transactions.json")]
    found += [b"\x02" + script for script in hex_values("bitcoin/key_io_valid.json", "bitcoin/exposure_vectors.json")]
    found += [b"\x01" + path.read_bytes() for path in files("bitcoin/blocks/*.raw") if path.stat().st_size < 10_000]
    return found


if __name__ == "__main__":
    run("bitcoin", test_one_input, seeds())
