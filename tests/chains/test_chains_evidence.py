"""Exposure as a property of the key: evidence from observations, the family merge and coverage."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chains.codecs.base58 import b58encode
from chains.evidence import Coverage, evidence_of, shared_evidence, with_family
from chains.observation import AccountType, EvidenceKind, Exposure, ExposureEvidence, Observation
from tests.observations import observation

NOW = datetime(2026, 11, 25, tzinfo=UTC)


def seen(chain: str, address: str, **changes: object) -> Observation:
    """A funded account observation on ``chain`` (``tests.observations``), with ``changes``."""
    return observation(chain, **{"address": address, "balance": 10**18, **changes})


ACCOUNT = "0x" + "ab" * 20


def test_an_account_that_signed_is_nonce_evidence_one_that_did_not_is_none():
    assert evidence_of(seen("base", ACCOUNT, tx_count=3, outbound_tx_count=2)) == (
        ExposureEvidence("base", ACCOUNT, EvidenceKind.NONCE),
    )
    assert evidence_of(seen("ethereum", ACCOUNT)) == ()


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        ({"chain": "cosmos", "symbol": "ATOM", "public_key": b"\x02" * 33, "tx_count": 1}, EvidenceKind.SIGNATURE),
        ({"chain": "solana", "symbol": "SOL", "address_type": "ed25519"}, EvidenceKind.OUTPUT),
        ({"chain": "tron", "symbol": "TRX", "tx_count": 1, "outbound_tx_count": 1}, EvidenceKind.NONCE),
        (
            {"chain": "bitcoin", "address_type": "p2pkh", "account_type": AccountType.UTXO_SCRIPT,
             "exposure": Exposure.EXPOSED_AT_REST, "tx_count": 2},
            EvidenceKind.SPEND,
        ),
        (
            {"chain": "bitcoin", "address_type": "p2pk", "account_type": AccountType.UTXO_SCRIPT,
             "exposure": Exposure.EXPOSED_AT_REST, "tx_count": 1},
            EvidenceKind.OUTPUT,
        ),
    ],
)  # fmt: skip
def test_evidence_implied_by_each_family(changes, kind):
    changes = dict(changes)
    chain = str(changes.pop("chain"))
    (evidence,) = evidence_of(seen(chain, ACCOUNT, **changes))
    assert evidence.kind is kind and evidence.txid is None


def test_undetermined_contracts_and_silent_addresses_are_not_evidence():
    assert (
        evidence_of(seen("bitcoin", "1x", account_type=AccountType.UTXO_SCRIPT, exposure=Exposure.UNDETERMINED)) == ()
    )
    assert evidence_of(seen("base", ACCOUNT, account_type=AccountType.CONTRACT, outbound_tx_count=5, tx_count=5)) == ()
    assert evidence_of(seen("base", ACCOUNT, balance=0, outbound_tx_count=0)) == ()


def test_a_client_s_own_evidence_is_kept_as_given():
    given = (ExposureEvidence("bitcoin", "bc1q", EvidenceKind.SPEND, "ab" * 32, 700_000),)
    assert evidence_of(seen("bitcoin", "bc1q", evidence=given, exposure=Exposure.EXPOSED_AT_REST)) == given


def test_a_sibling_that_signed_exposes_the_address_at_rest():
    target = seen("ethereum", ACCOUNT, tx_count=1)
    merged = with_family(target, [seen("base", ACCOUNT, tx_count=4, outbound_tx_count=4), seen("polygon", ACCOUNT)])
    assert merged.exposure is Exposure.EXPOSED_AT_REST and merged.public_key_exposed
    assert merged.evidence == (ExposureEvidence("base", ACCOUNT, EvidenceKind.NONCE),)


def test_no_sibling_evidence_leaves_the_level_alone_and_never_lowers_it():
    target = seen("bitcoin", "1x", account_type=AccountType.UTXO_SCRIPT, exposure=Exposure.UNDETERMINED)
    assert with_family(target, [seen("cosmos", "cosmos1x", symbol="ATOM")]).exposure is Exposure.UNDETERMINED
    safe = seen("ethereum", ACCOUNT, tx_count=1)
    assert with_family(safe, []) == safe


def test_a_taproot_output_key_is_not_the_family_key():
    taproot = seen(
        "bitcoin",
        "bc1p",
        address_type="p2tr",
        account_type=AccountType.UTXO_SCRIPT,
        exposure=Exposure.EXPOSED_AT_REST,
        tx_count=1,
    )
    assert evidence_of(taproot)[0].kind is EvidenceKind.OUTPUT  # its own coins are exposed
    target = seen("bitcoin", "1x", address_type="p2pkh", account_type=AccountType.UTXO_SCRIPT, tx_count=1)
    assert shared_evidence([taproot]) == ()
    assert with_family(target, [taproot]).exposure is Exposure.EXPOSED_ON_SPEND


def test_shared_evidence_has_no_repeats():
    signer = seen("base", ACCOUNT, tx_count=1, outbound_tx_count=1)
    assert len(shared_evidence([signer, signer])) == 1


def test_coverage_is_complete_only_without_gaps_and_limits():
    assert Coverage(("ethereum", "base")).complete
    assert not Coverage(("ethereum",), unavailable=("base",)).complete
    assert not Coverage(("bitcoin",), limits=("bitcoin-index: ...",)).complete
    assert Coverage(("bitcoin",), ("cosmos",), ("x",)).to_dict() == {
        "checked": ["bitcoin"],
        "unavailable": ["cosmos"],
        "limits": ["x"],
    }


def test_a_solana_token_account_s_evidence_is_its_owner_s_key():
    owner = bytes(range(1, 33))
    account = b58encode(bytes(range(100, 132)))
    token = seen("solana", account, symbol="SOL", address_type="token_account", public_key=owner, tx_count=1)
    (evidence,) = evidence_of(token)
    assert (evidence.address, evidence.kind) == (b58encode(owner), EvidenceKind.OUTPUT)
