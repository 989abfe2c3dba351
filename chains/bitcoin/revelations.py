"""Every public key a Bitcoin block reveals: the rows of the chain-wide exposure index.

One ``Revelation`` is one public key shown by one transaction, either in an output script
(``kind`` ``output``: P2PK, every key of a bare multisig, the P2TR output key) or by a spend
(``kind`` ``input``: the P2PKH / P2WPKH / nested P2SH-P2WPKH key, the keys of a revealed
redeem or witness script, the x-only keys of a tapscript leaf and the taproot internal key).
Each row carries the HASH160 of the key's compressed encoding and, for SEC keys, of its
uncompressed encoding, so a lookup by either P2PKH/P2WPKH program finds the key whichever
encoding appeared on chain.

Policies (pure code, no I/O):

* **Invalid points are skipped.** A key-shaped push that is not a point on secp256k1 (or a
  32-byte x-only key with no point) cannot be anyone's public key: no signature can verify
  against it and no address hashes its other encoding, so ``key_hashes`` returns None and no
  row is produced. Hybrid SEC keys (prefix 0x06/0x07) are valid points; ``pubkey`` keeps the
  bytes as they appeared and both HASH160 columns use the standard 0x02/0x03 and 0x04 forms.
* **Duplicates within a transaction are dropped**: a key shown twice by the same transaction
  with the same kind (e.g. several inputs spending one reused address) is one row. The same
  key as output and as input of one transaction gives two rows.
* **Spends are classified without the prevout** (a block does not hold the outputs it spends),
  using ``chains.bitcoin.spend.analyze_input``'s inference from scriptSig and witness. The
  cases it cannot tell apart, and what happens to them:

  - P2PKH vs a P2SH spend whose last scriptSig push is key-shaped, and P2WPKH vs a P2WSH spend
    with a two-item witness whose witness script is key-shaped: read as P2PKH / P2WPKH, so the
    key-shaped item is listed (fail closed: a revealed key is listed rather than dropped; an
    item that is not a point is skipped by the rule above).
  - P2PK vs bare-multisig vs P2SH spends made only of signatures: read as P2PK / bare
    multisig, which reveal no new key (the keys sit in the spent output and were listed as
    ``output`` rows of the funding transaction).
  - Taproot key path vs a P2WSH spend whose only witness item is a 64/65-byte witness script:
    read as key path, which reveals nothing new (the output key was listed with the funding
    output). That rare P2WSH shape is the one case where a revealed script's keys are missed.
  - Spends of no recognised shape (``SpendType.UNKNOWN``): every key-shaped scriptSig push and
    witness item is listed (fail closed).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

from coincurve import PublicKey as Secp256k1Point

from chains.bitcoin.script import classify_script
from chains.bitcoin.spend import analyze_input
from chains.bitcoin.tx import Block, Transaction
from pqc.hashes import hash160

_X_ONLY_SIZE = 32
_SEC_SIZES = (33, 65)
_EVEN_Y = b"\x02"
_UNCOMPRESSED = 0x04


class RevelationKind(enum.StrEnum):
    """Where a key was revealed: in an output script, or by a spend (an input)."""

    OUTPUT = "output"
    INPUT = "input"


@dataclass(frozen=True, slots=True)
class Revelation:
    """One public key revealed by one transaction (a row of ``bitcoin_key_exposure``).

    ``pubkey`` is the key as it appeared (33/65-byte SEC or 32-byte x-only); ``hash160`` is the
    HASH160 of its compressed encoding (0x02 + x for x-only keys); ``hash160_uncompressed`` the
    HASH160 of its 65-byte encoding, None for x-only keys. ``txid`` is hex in display order;
    ``height`` is None when the source does not say.
    """

    pubkey: bytes
    hash160: bytes
    hash160_uncompressed: bytes | None
    txid: str
    height: int | None
    kind: RevelationKind


def key_hashes(pubkey: bytes) -> tuple[bytes, bytes | None] | None:
    """HASH160 of the compressed and of the uncompressed encoding of a key.

    A 33- or 65-byte SEC key gives both; a 32-byte x-only (taproot) key gives HASH160 of
    0x02 + x and None. Returns None, so that callers skip the key, when the bytes are not a
    point on secp256k1 or have no key size.
    """
    size = len(pubkey)
    if size == _X_ONLY_SIZE:
        candidate = _EVEN_Y + pubkey
    elif size in _SEC_SIZES:
        candidate = pubkey
    else:
        return None
    try:
        point = Secp256k1Point(candidate)
    except ValueError:
        return None
    if size == _X_ONLY_SIZE:
        return hash160(candidate), None
    # the parse checked the point: an encoding that is already standard is hashed as given
    if size == 33:
        return hash160(pubkey), hash160(point.format(compressed=False))
    if pubkey[0] == _UNCOMPRESSED:
        return hash160(point.format(compressed=True)), hash160(pubkey)
    return hash160(point.format(compressed=True)), hash160(point.format(compressed=False))  # hybrid 0x06/0x07


_FIELD_PRIME = 2**256 - 2**32 - 977
_NESTED_P2WPKH = b"\x00\x14"


def _x_only_twins(x_only: bytes) -> tuple[bytes, bytes, bytes]:
    """The HASH160s of 0x03 + x and of both uncompressed points with that x."""
    even = Secp256k1Point(_EVEN_Y + x_only).format(compressed=False)
    y = int.from_bytes(even[33:], "big")
    odd = even[:33] + (_FIELD_PRIME - y).to_bytes(32, "big")
    return hash160(b"\x03" + x_only), hash160(even), hash160(odd)


def address_hashes(revelation: Revelation) -> tuple[bytes, ...]:
    """Every HASH160 an address or output script of the revealed key commits to, so that one
    lookup by an address's hash finds the key: its compressed and uncompressed P2PKH/P2WPKH
    hash and the P2SH-P2WPKH script hash of its compressed form. A 32-byte x-only key reveals
    the private key of both points with that x (BIP-340 signers negate as needed), so both
    parities of each form are listed."""
    nested = [revelation.hash160]
    if revelation.hash160_uncompressed is not None:
        found: list[bytes] = [revelation.hash160, revelation.hash160_uncompressed]
    else:
        odd, even_full, odd_full = _x_only_twins(revelation.pubkey)
        found, nested = [revelation.hash160, odd, even_full, odd_full], [revelation.hash160, odd]
    return (*found, *(hash160(_NESTED_P2WPKH + h) for h in nested))


def _output_keys(tx: Transaction) -> Iterator[bytes]:
    for txout in tx.outputs:
        yield from classify_script(txout.script_pubkey).keys


def _input_keys(tx: Transaction) -> Iterator[bytes]:
    for txin in tx.inputs:
        if not txin.is_coinbase:
            yield from analyze_input(txin).revealed_keys


def transaction_revelations(tx: Transaction, height: int | None) -> Iterator[Revelation]:
    """The keys one transaction reveals: its output keys first, then its inputs' keys."""
    for kind, keys in ((RevelationKind.OUTPUT, _output_keys(tx)), (RevelationKind.INPUT, _input_keys(tx))):
        for key in dict.fromkeys(keys):
            hashes = key_hashes(key)
            if hashes is not None:
                yield Revelation(key, hashes[0], hashes[1], tx.txid, height, kind)


def block_revelations(block: Block, height: int | None) -> Iterator[Revelation]:
    """Every key the block's transactions reveal, in block order (coinbase inputs reveal none)."""
    for tx in block.transactions:
        yield from transaction_revelations(tx, height)
