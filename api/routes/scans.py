"""Routes for wallet scans, chain detection and the watch list."""

from __future__ import annotations

import msgspec
from sanic import HTTPResponse

from api.context import QdayRequest
from api.endpoints import Credential, EndpointGroup
from api.envelope import PAGED, no_content, ok, ok_page, requested_page
from api.models.scans import (
    DescriptorScanOut,
    DescriptorScanRequest,
    DetectOut,
    DetectRequest,
    KeyScanOut,
    KeyScanRequest,
    MigrationPlanOut,
    MigrationPlanRequest,
    ScanRequest,
    WalletScanOut,
    WalletSummaryOut,
    WatchDescriptorRequest,
    WatchedDescriptorOut,
    WatchedOut,
    WatchRequest,
)
from api.ratelimit import RateGroup
from api.validation import text_field
from core.clock import iso
from services.accounts import environment_of
from services.scans import candidate_chains, resolve_address
from storage.models import WatchedAddress, WatchedDescriptor

group = EndpointGroup("scans")
_SCAN_ERRORS = ("SCAN_001", "SCAN_002")


def _watched_descriptor_out(w: WatchedDescriptor) -> WatchedDescriptorOut:
    return WatchedDescriptorOut(
        id=w.id,
        descriptor=w.descriptor,
        label=w.label,
        gap_limit=w.gap_limit,
        derived_addresses=w.derived_addresses,
        summary=None if w.summary is None else msgspec.json.decode(w.summary, type=WalletSummaryOut),
        scanned_at=None if w.scanned_at is None else iso(w.scanned_at),
        created_at=iso(w.created_at),
    )


def _watched_out(w: WatchedAddress) -> WatchedOut:
    return WatchedOut(id=w.id, address=w.address, chain=w.chain, label=w.label, created_at=iso(w.created_at))


@group.route(
    "POST",
    "/scan/wallet",
    summary="Quantum-risk scan of an address",
    credential=Credential.ANY_KEY,
    rate_group=RateGroup.SCAN,
    body=ScanRequest,
    response=WalletScanOut,
    errors=("SCAN_001", "SCAN_002", "SCAN_003", "SCAN_004"),
    tag="scans",
    description="Serves the latest stored result when younger than the cache TTL (cached=true), otherwise "
    "fetches chain data, scores it and stores it. refresh=true forces a fetch. Test keys scan test "
    "networks. Without chain, an EVM address is scanned on ethereum (see POST /v1/scan/detect). "
    "Exposure is the key's: the address's family (the same account on every EVM chain and Tron; the "
    "same key hash as P2PKH, P2WPKH, P2SH-P2WPKH and Cosmos) is checked concurrently, and a key "
    "revealed anywhere exposes the address (exposureEvidence). A family chain that is down is listed "
    "in coverage.unavailable and makes exposureComplete false; it never fails the scan.",
)
async def scan_wallet(request: QdayRequest, body: ScanRequest) -> HTTPResponse:
    """One address's risk, from the cache or fresh."""
    outcome = await request.app.ctx.scans.scan(request.ctx.principal, body.address, body.chain, body.refresh)
    flag = b'{"cached":true,' if outcome.cached else b'{"cached":false,'
    return ok(request, msgspec.Raw(flag + outcome.record.result.encode()[1:]))


@group.route(
    "POST",
    "/scan/key",
    summary="Quantum-risk scan of a public key on every chain",
    credential=Credential.ANY_KEY,
    rate_group=RateGroup.SCAN,
    body=KeyScanRequest,
    response=KeyScanOut,
    errors=("PQC_002", "SCAN_002"),
    tag="scans",
    description="Derives every address and output the key controls (P2PK in both encodings by script, "
    "P2PKH of either encoding, P2WPKH, P2SH-P2WPKH, BIP-86 P2TR, the 15 EVM chains, Tron, Cosmos; an "
    "ed25519 key is a Solana address), observes them concurrently, and answers one verdict: exposed when "
    "any of them revealed the key. Each address carries its wallet scan, or its chain's error; a chain "
    "that fails never fails the scan. riskValue is the worst of the active addresses. A key that is not "
    "a point on its curve is PQC_002.",
)
async def scan_key(request: QdayRequest, body: KeyScanRequest) -> HTTPResponse:
    """One key's risk across every chain, from the store or fresh."""
    outcome = await request.app.ctx.key_scans.scan(request.ctx.principal, body.public_key, body.chains, body.refresh)
    flag = b'{"cached":true,' if outcome.cached else b'{"cached":false,'
    return ok(request, msgspec.Raw(flag + outcome.result.encode()[1:]))


@group.route(
    "POST",
    "/scan/descriptor",
    summary="Quantum-risk scan of a whole wallet from its descriptor or extended public key",
    credential=Credential.SECRET,
    rate_group=RateGroup.SCAN,
    body=DescriptorScanRequest,
    response=DescriptorScanOut,
    errors=("SCAN_002", "SCAN_004", "SCAN_005", "SCAN_006"),
    tag="scans",
    description="Derives the wallet's receive and change addresses until gapLimit unused ones in a row, "
    "looks them up in batched rounds, and answers each used address's verdict (its key family and the "
    "Bitcoin exposure index included), its unspent coins, the unused addresses whose key is already "
    "revealed, and the totals. A bare xpub is scanned as pkh, sh(wpkh), wpkh and tr (each reported); "
    "ypub/zpub as their SLIP-132 script. With an EVM chain, descriptor is an account-level xpub "
    "(m/44'/60'/0') whose 0/i children are scanned as accounts on every EVM chain and Tron. Private keys "
    "(xprv, tprv, WIF) are refused with SCAN_006 and never logged or stored. Each used address's result is "
    "stored as its wallet scan.",
)
async def scan_descriptor(request: QdayRequest, body: DescriptorScanRequest) -> HTTPResponse:
    """A wallet's risk, address by address and coin by coin."""
    ctx = request.app.ctx
    scans = ctx.evm_account_scans if ctx.evm_account_scans.covers(body.chain) else ctx.descriptor_scans
    answer = await scans.scan(request.ctx.principal, body.descriptor, body.chain, body.gap_limit)
    return ok(request, answer)


@group.route(
    "POST",
    "/plan/migration",
    summary="A plan to move a wallet's coins to a new wallet, as unsigned PSBTs",
    credential=Credential.SECRET,
    rate_group=RateGroup.SCAN,
    body=MigrationPlanRequest,
    response=MigrationPlanOut,
    errors=("REQ_001", "SCAN_002", "SCAN_004", "SCAN_005", "SCAN_006"),
    tag="scans",
    description="Scans the wallet as POST /v1/scan/descriptor does, then orders its coins: keys on chain by "
    "their output type first, then keys revealed by a spend, reuse or elsewhere, then the rest; the larger "
    "first. Each step is one transaction of coins of one exposure level paying fresh, unused addresses of "
    "the destination's receive branch (looked up first), at most maxPerAddressSat each, no change, no dust "
    "output; a coin worth less than its own input's fee is skipped with the reason. Each step's psbt (BIP-174, "
    "base64) carries the spent outputs, the whole previous transaction of every non-taproot input, the "
    "scripts and the BIP-32 derivations of every key (BIP-371 fields for tr), so a hardware wallet can "
    "check and sign it. The service never signs.",
)
async def plan_migration(request: QdayRequest, body: MigrationPlanRequest) -> HTTPResponse:
    """A migration plan for a wallet."""
    answer = await request.app.ctx.migration_plans.plan(
        request.ctx.principal,
        body.descriptor,
        body.destination,
        body.fee_rate,
        body.max_per_address_sat,
        body.gap_limit,
    )
    return ok(request, answer)


@group.route(
    "POST",
    "/scan/detect",
    summary="Chains an address may belong to",
    credential=Credential.ANY_KEY,
    rate_group=RateGroup.SCAN,
    body=DetectRequest,
    response=DetectOut,
    errors=_SCAN_ERRORS,
    tag="scans",
    description="An EVM address is valid on all 15 EVM chains; scan each one you care about by naming it.",
)
async def detect(request: QdayRequest, body: DetectRequest) -> HTTPResponse:
    """The candidate chains for an address, most likely first."""
    env = environment_of(request.ctx.principal)
    default = resolve_address(body.address, None, env)  # SCAN_001 when no chain takes it
    chains = candidate_chains(body.address, env)
    return ok(
        request, DetectOut(address=str(default), chains=[c.value for c in chains], default_chain=default.chain.value)
    )


@group.route(
    "POST",
    "/watchlist",
    summary="Watch an address (rescored daily)",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    body=WatchRequest,
    response=WatchedOut,
    status=201,
    errors=(*_SCAN_ERRORS, "LIM_001"),
    tag="watchlist",
    description="Idempotent: an address already watched returns its entry and never counts against the cap. "
    "Watched addresses per account (both environments) are capped by plan: free 100, builder 10,000, pro "
    "1,000,000, enterprise configured (QDAY_ENTERPRISE_WATCH_CAP, default 10,000,000); a new address beyond "
    "it is LIM_001 with details {cap: watchlist, limit, plan}.",
)
async def watch(request: QdayRequest, body: WatchRequest) -> HTTPResponse:
    """Add an address to the caller's watch list (idempotent)."""
    label = text_field(body.label, "label")  # NFC; control and bidi characters: REQ_001
    ctx = request.app.ctx
    cap = ctx.settings.enterprise_watch_cap
    entry = await ctx.scans.watch(request.ctx.principal, body.address, body.chain, label, cap)
    return ok(request, _watched_out(entry), status=201)


@group.route(
    "GET",
    "/watchlist",
    summary="List watched addresses",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=list[WatchedOut],
    errors=("REQ_001",),
    tag="watchlist",
    description=PAGED,
)
async def watchlist(request: QdayRequest) -> HTTPResponse:
    """A page of the caller's watched addresses in its environment, oldest first."""
    page = await request.app.ctx.scans.watchlist(request.ctx.principal, requested_page(request))
    return ok_page(request, [_watched_out(w) for w in page.items], page.next_cursor)


@group.route(
    "DELETE",
    "/watchlist/{entry_id}",
    summary="Stop watching an address",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    status=204,
    errors=("REQ_005",),
    tag="watchlist",
)
async def unwatch(request: QdayRequest, entry_id: str) -> HTTPResponse:
    """Remove an entry from the caller's watch list."""
    await request.app.ctx.scans.unwatch(request.ctx.principal, entry_id)
    return no_content()


@group.route(
    "POST",
    "/watchlist/descriptors",
    summary="Watch a wallet by its descriptor or extended public key (rescored daily)",
    credential=Credential.SECRET,
    rate_group=RateGroup.SCAN,
    body=WatchDescriptorRequest,
    response=WatchedDescriptorOut,
    status=201,
    errors=("LIM_001", "SCAN_004", "SCAN_005", "SCAN_006"),
    tag="watchlist",
    description="Scans the wallet now (as POST /v1/scan/descriptor) and watches it: the daily rescoring derives, "
    "scans and summarises it again. A wallet counts against the plan's watch cap (LIM_001) by the addresses "
    "its latest scan derived, with the account's watched addresses; a rescan derives at most what the cap "
    "leaves it and says so in its limits. Idempotent: a wallet already watched returns its entry.",
)
async def watch_descriptor(request: QdayRequest, body: WatchDescriptorRequest) -> HTTPResponse:
    """Watch a wallet (idempotent)."""
    label = text_field(body.label, "label")
    entry = await request.app.ctx.descriptor_watch.watch(request.ctx.principal, body.descriptor, label, body.gap_limit)
    return ok(request, _watched_descriptor_out(entry), status=201)


@group.route(
    "GET",
    "/watchlist/descriptors",
    summary="List watched wallets",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    response=list[WatchedDescriptorOut],
    errors=("REQ_001",),
    tag="watchlist",
    description=PAGED,
)
async def watched_descriptors(request: QdayRequest) -> HTTPResponse:
    """A page of the caller's watched wallets with their latest summaries, oldest first."""
    page = await request.app.ctx.descriptor_watch.watched(request.ctx.principal, requested_page(request))
    return ok_page(request, [_watched_descriptor_out(w) for w in page.items], page.next_cursor)


@group.route(
    "DELETE",
    "/watchlist/descriptors/{entry_id}",
    summary="Stop watching a wallet",
    credential=Credential.SECRET,
    rate_group=RateGroup.ACCOUNT,
    status=204,
    errors=("REQ_005",),
    tag="watchlist",
)
async def unwatch_descriptor(request: QdayRequest, entry_id: str) -> HTTPResponse:
    """Remove a wallet from the caller's watch list (its cap share is freed)."""
    await request.app.ctx.descriptor_watch.unwatch(request.ctx.principal, entry_id)
    return no_content()
