"""The ECDSA half of a hybrid attestation: which message scheme a chain uses and
how a client names the expected signer (public key, EVM address or Bitcoin
address). Free of HTTP."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pqc
from chains.codecs.bitcoin import P2PKHAddress, P2WPKHAddress
from chains.codecs.detect import parse_address
from chains.errors import ChainError
from chains.registry import CHAINS, Chain, Family, parse_chain
from services.errors import InvalidRequest

#: Default message scheme per chain family; families absent here must say one.
DEFAULT_SCHEMES: dict[Family, pqc.MessageScheme] = {
    Family.EVM: pqc.MessageScheme.EIP191,
    Family.BITCOIN: pqc.MessageScheme.BIP137,
}


def chain_of(name: str) -> Chain:
    """The chain named in a request (any of the 19), as a REQ_001 error otherwise."""
    try:
        return parse_chain(name)
    except ChainError as exc:
        raise InvalidRequest(f"invalid request: {exc} (field 'chain')", field="chain") from None


def scheme_for(chain: Chain, requested: str | None) -> pqc.MessageScheme:
    """The ECDSA message scheme: the requested one, or the chain's default."""
    if requested is not None:
        return pqc.parse_scheme(requested)
    default = DEFAULT_SCHEMES.get(CHAINS[chain].family)
    if default is None:
        raise InvalidRequest(
            f"chain {chain.value} has no default ECDSA message scheme; set ecdsaScheme to eip191, bip137 or digest",
            field="ecdsaScheme",
        )
    return default


@dataclass(frozen=True, slots=True)
class ClaimedSigner:
    """Who the client says made the ECDSA signature."""

    kind: pqc.ClaimedSigner
    value: bytes
    text: str  # as the client wrote it, echoed back in the attestation


_HEX_SIGNER = re.compile(r"(0[xX])?([0-9a-fA-F]{40}|[0-9a-fA-F]{66}|[0-9a-fA-F]{128}|[0-9a-fA-F]{130})")


def parse_claimed_signer(text: str, field: str = "ecdsaPublicKey") -> ClaimedSigner:
    """A secp256k1 public key in hex (33, 65 or 64 bytes), a 20-byte EVM address
    (``0x`` + 40 hex), or a Bitcoin P2PKH / P2WPKH address."""
    if _HEX_SIGNER.fullmatch(text):
        raw = pqc.decode_hex(text, field=field)
        if len(raw) == 20:
            return ClaimedSigner(pqc.ClaimedSigner.EVM_ADDRESS, raw, text)
        pqc.parse_public_key(raw)
        return ClaimedSigner(pqc.ClaimedSigner.PUBLIC_KEY, raw, text)
    try:
        address = parse_address(text, Chain.BITCOIN)
    except ChainError:
        raise pqc.InvalidKeyFormat(
            f"invalid key format (field '{field}'): expected a secp256k1 public key in hex (33, 64 or 65 bytes), "
            "an EVM address, or a Bitcoin P2PKH/P2WPKH address",
            field=field,
        ) from None
    if not isinstance(address, P2PKHAddress | P2WPKHAddress):
        raise pqc.InvalidKeyFormat(
            f"only P2PKH and P2WPKH addresses name a single key; give the public key (field '{field}')",
            field=field,
        )
    return ClaimedSigner(pqc.ClaimedSigner.HASH160, address.payload, text)


def layout_for(scheme: pqc.MessageScheme) -> pqc.SignatureLayout:
    """BIP-137 signatures put the header byte first; the others are r‖s‖v."""
    return pqc.SignatureLayout.BIP137 if scheme is pqc.MessageScheme.BIP137 else pqc.SignatureLayout.RSV


def ecdsa_signer(message: bytes, signature: bytes, scheme: pqc.MessageScheme, claimed: ClaimedSigner) -> bytes:
    """The compressed public key that signed ``message``, checked against the
    claim; raises ``pqc.InvalidSignature`` when it is not the claimed signer."""
    digest = pqc.message_digest(scheme, message)
    recovered = pqc.recover_public_key(digest, signature, layout_for(scheme))
    pqc.require_signer(recovered, claimed.value, claimed.kind)
    return bytes((2 + (recovered[-1] & 1),)) + recovered[1:33]
