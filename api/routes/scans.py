"""Routes for wallet scans, chain detection and the watch list."""

from __future__ import annotations

import msgspec
from sanic import HTTPResponse

from api.context import QdayRequest
from api.endpoints import Credential, EndpointGroup
from api.envelope import PAGED, no_content, ok, ok_page, requested_page
from api.models.scans import (
    DetectOut,
    DetectRequest,
    KeyScanOut,
    KeyScanRequest,
    ScanRequest,
    WalletScanOut,
    WatchedOut,
    WatchRequest,
)
from api.ratelimit import RateGroup
from api.validation import text_field
from core.clock import iso
from services.accounts import environment_of
from services.scans import candidate_chains, resolve_address
from storage.models import WatchedAddress

group = EndpointGroup("scans")
_SCAN_ERRORS = ("SCAN_001", "SCAN_002")


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
    page = request.app.ctx.scans.watchlist(request.ctx.principal, requested_page(request))
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
