"""Typed results of every endpoint, decoded from the ``data`` member of the answer.

Field names are snake_case in Python and camelCase on the wire (as in
docs/api.md). Unknown fields are ignored, so a newer server with more fields
does not break an older client.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

T = TypeVar("T")


class Result(msgspec.Struct, rename="camel", kw_only=True):
    """Base of every result: camelCase on the wire."""


class Health(Result):
    """GET /v1/health."""

    status: str
    version: str
    api_version: str


class Ready(Result):
    """GET /v1/ready: the node's store answers a read and commits a write."""

    status: str
    engine: str
    read_ms: float
    write_ms: float


class Account(Result):
    """POST /v1/auth/register."""

    id: str
    email: str
    name: str | None
    plan: str
    created_at: str


class SessionUser(Result):
    """The account a session token belongs to."""

    id: str
    email: str
    plan: str


class Login(Result):
    """POST /v1/auth/login: a session token for the API-key endpoints."""

    token: str
    expires_at: str
    user: SessionUser

    def __repr__(self) -> str:
        return f"Login(user={self.user.email!r}, expires_at={self.expires_at!r})"


class ApiKey(Result):
    """An API key as listed (prefix only)."""

    id: str
    name: str
    type: str
    environment: str
    prefix: str
    created_at: str
    last_used_at: str | None = None
    expires_at: str | None = None


class CreatedApiKey(Result):
    """POST /v1/auth/api-keys: the full key, shown only this once."""

    id: str
    name: str
    type: str
    environment: str
    key: str
    prefix: str
    created_at: str

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, prefix={self.prefix!r})"


class RotatedApiKey(CreatedApiKey):
    """POST /v1/auth/api-keys/{id}/rotate: the replacement key."""

    rotated_from: str
    previous_key_expires_at: str


class GeneratedKey(Result, tag_field="custody", tag="self"):
    """POST /v1/keys/generate (self custody): the key pair, returned once."""

    id: str
    algorithm: str
    chain: str
    public_key: str
    private_key: str
    seed: str
    fingerprint: str
    format: str
    created_at: str

    def __repr__(self) -> str:
        return f"GeneratedKey(id={self.id!r}, algorithm={self.algorithm!r}, fingerprint={self.fingerprint!r})"


class ManagedKey(Result, tag_field="custody", tag="managed"):
    """A key held in the service's custody (no private key)."""

    id: str
    algorithm: str
    chain: str
    public_key: str
    fingerprint: str
    format: str
    state: str
    environment: str
    created_at: str
    deletion_requested_at: str | None = None
    deletion_scheduled_at: str | None = None
    destroyed_at: str | None = None


class RegistrationChallenge(Result):
    """POST /v1/keys/register/challenge: text to sign with ``context`` (hex)."""

    challenge: str
    context: str
    expires_at: str


class PqKey(Result):
    """A post-quantum public key registered to the account."""

    id: str
    algorithm: str
    chain: str
    public_key: str
    fingerprint: str
    origin: str
    created_at: str


class Statement(Result):
    """POST /v1/attestations/challenge: a single-use statement for strict mode."""

    id: str
    statement: str
    message: str
    expires_at: str


class Attestation(Result):
    """POST /v1/sign/hybrid: the stored attestation."""

    id: str
    status: str
    message: str
    ecdsa_public_key: str
    pqc_public_key: str
    algorithm: str
    chain: str
    metadata: dict[str, Any]
    ecdsa_scheme: str
    context: str
    strict: bool
    created_at: str


class Verification(Result):
    """POST /v1/verify: ``valid`` only when every check passed."""

    valid: bool
    ecdsa_valid: bool | None
    pqc_valid: bool
    attestation_id: str | None
    algorithm: str
    chain: str | None
    verified_at: str


class ManagedSignature(Result):
    """POST /v1/sign/managed."""

    key_id: str
    algorithm: str
    signature: str
    public_key: str
    context: str
    message_sha256: str
    signed_at: str


class KeyEvent(Result):
    """One entry of a managed key's audit log."""

    id: str
    key_id: str
    type: str
    state: str
    actor: str
    request_id: str | None
    at: str
    details: dict[str, str]
    hash: str


class KeyUsage(Result):
    """Signatures made by one managed key in a month."""

    key_id: str
    algorithm: str
    state: str
    signatures: int


class Usage(Result):
    """GET /v1/usage."""

    month: str
    environment: str
    active_keys: int
    key_months: int
    signatures: int
    signature_blocks: int
    billable_units: int
    keys: list[KeyUsage]


class RiskFactor(Result):
    """One address-level risk factor."""

    factor: str
    weight: float
    score: float
    detail: str


class ChainFactor(Result):
    """One chain-level readiness factor."""

    factor: str
    status: str
    detail: str
    source: str | None = None


class ExposureEvidence(Result):
    """One place a key was revealed (``address`` is an output script in hex when it has none)."""

    chain: str
    address: str
    kind: str
    txid: str | None
    block_height: int | None


class Coverage(Result):
    """What a verdict saw: chains checked, family chains unavailable, and blind spots."""

    checked: list[str]
    unavailable: list[str]
    limits: list[str]


class WalletScanResult(Result):
    """A wallet scan result, as embedded in a key scan."""

    address: str
    chain: str
    risk_score: str
    risk_label: str
    risk_value: int
    chain_grade: str
    chain_grade_label: str
    public_key_exposed: bool
    balance_at_risk: str
    balance_at_risk_usd: float | None
    risk_factors: list[RiskFactor]
    chain_factors: list[ChainFactor]
    scanned_at: str
    data_as_of: str
    scoring_version: str
    price_as_of: str | None
    data_source: str
    block_height: int | None
    exposure_evidence: list[ExposureEvidence]
    coverage: Coverage
    exposure_complete: bool


class WalletScan(WalletScanResult):
    """POST /v1/scan/wallet."""

    cached: bool


class ScanError(Result):
    """Why one chain of a key scan gave no answer."""

    code: str
    message: str


class KeyAddress(Result):
    """One address or output of a scanned key (``scan`` null when inactive or failed)."""

    chain: str
    address: str
    form: str
    active: bool
    scan: WalletScanResult | None
    error: ScanError | None


class KeyScan(Result):
    """POST /v1/scan/key."""

    public_key: str
    key_type: str
    public_key_exposed: bool
    exposure_evidence: list[ExposureEvidence]
    risk_score: str
    risk_label: str
    risk_value: int
    balance_at_risk_usd: float | None
    addresses: list[KeyAddress]
    coverage: Coverage
    exposure_complete: bool
    scanned_at: str
    scoring_version: str
    cached: bool


class WalletAddress(Result):
    """One used address of a scanned wallet and its verdict (EVM accounts: one per active
    chain). ``balance_sat`` is in the chain's smallest unit, ``balance`` in its coin."""

    address: str
    chain: str
    branch: str
    index: int
    script_type: str
    balance_sat: int
    balance: str
    tx_count: int
    public_key_exposed: bool
    exposure: str
    risk_score: str
    risk_value: int
    balance_at_risk_usd: float | None
    exposure_evidence: list[ExposureEvidence]
    exposure_complete: bool


class Coin(Result):
    """One confirmed unspent output of a scanned wallet (``value`` in satoshi)."""

    txid: str
    vout: int
    value: int
    address: str
    height: int
    public_key_exposed: bool
    exposure: str


class ExposedUnused(Result):
    """An address derived but never used whose key is already revealed."""

    address: str
    branch: str
    index: int
    script_type: str
    exposure_evidence: list[ExposureEvidence]


class DescriptorSummary(Result):
    """One descriptor a wallet scan walked (a bare xpub stands for four)."""

    descriptor: str
    used_addresses: int
    derived_addresses: int
    balance_sat: int | None


class ExposureTotal(Result):
    """Used addresses and their balance at one exposure level."""

    addresses: int
    balance_sat: int | None


class WalletSummary(Result):
    """A scanned wallet's totals."""

    balance_sat: int | None
    exposed_balance_sat: int | None
    balance_at_risk_usd: float | None
    risk_score: str
    risk_value: int
    used_addresses: int
    derived_addresses: int
    by_exposure: dict[str, ExposureTotal]
    gap_limit: int
    lookup_rounds: int


class DescriptorScan(Result):
    """POST /v1/scan/descriptor: a wallet's used addresses, coins and totals."""

    descriptor: str | None
    descriptors: list[DescriptorSummary]
    addresses: list[WalletAddress]
    coins: list[Coin]
    exposed_unused: list[ExposedUnused]
    summary: WalletSummary
    coverage: Coverage
    exposure_complete: bool
    scanned_at: str
    scoring_version: str


class PlanInput(Result):
    """A coin a migration step spends."""

    txid: str
    vout: int
    value_sat: int
    address: str
    exposure: str


class PlanOutput(Result):
    """A payment of a migration step to a fresh address (child ``index`` of the destination's receive branch)."""

    address: str
    value_sat: int
    index: int


class PlanStep(Result):
    """One transaction of a migration plan; ``psbt`` is the unsigned BIP-174 PSBT in base64."""

    order: int
    inputs: list[PlanInput]
    outputs: list[PlanOutput]
    vsize: int
    fee_sat: int
    psbt: str


class PlanSkipped(Result):
    """A coin left out of a migration plan, and why."""

    txid: str
    vout: int
    value_sat: int
    exposure: str
    reason: str


class PlanTotals(Result):
    """What a migration plan spends, pays and leaves in fees (satoshi)."""

    in_sat: int
    out_sat: int
    fee_sat: int


class MigrationPlan(Result):
    """POST /v1/plan/migration: the steps moving a wallet to a new one, exposed coins first."""

    descriptors: list[str]
    destination: str
    fee_rate: float
    max_per_address_sat: int
    steps: list[PlanStep]
    skipped: list[PlanSkipped]
    totals: PlanTotals
    coverage: Coverage
    exposure_complete: bool


class Detection(Result):
    """POST /v1/scan/detect."""

    address: str
    chains: list[str]
    default_chain: str


class Watched(Result):
    """A watched address."""

    id: str
    address: str
    chain: str
    label: str | None
    created_at: str


class WatchedDescriptor(Result):
    """A watched wallet (descriptor or extended public key) with its latest scan's summary."""

    id: str
    descriptor: str
    label: str | None
    gap_limit: int
    derived_addresses: int
    summary: WalletSummary | None
    scanned_at: str | None
    created_at: str


class Webhook(Result):
    """A webhook endpoint (GET /v1/webhooks); ``status`` is ``enabled`` or ``disabled``."""

    id: str
    url: str
    events: list[str]
    description: str | None
    status: str
    created_at: str
    failing_since: str | None
    disabled_at: str | None
    disabled_reason: str | None
    previous_secret_expires_at: str | None


class WebhookWithSecret(Webhook):
    """An endpoint just made or rotated: ``secret`` (``whsec_…``) is shown this once."""

    secret: str


class DeliveryAttempt(Result):
    """One POST of a delivery: its HTTP status (None: no answer), latency and error."""

    attempt: int
    attempted_at: str
    status: int | None
    latency_ms: float
    error: str | None


class Delivery(Result):
    """One event to one endpoint, with every attempt."""

    id: str
    event_id: str
    event_type: str
    state: str
    attempts: list[DeliveryAttempt]
    next_attempt_at: str | None
    created_at: str
    finished_at: str | None


class WebhookPing(Result):
    """POST /v1/webhooks/{id}/test: the ping's event id and its first attempt."""

    event_id: str
    delivered: bool
    attempt: DeliveryAttempt | None


class SigningKey(Result):
    """GET /v1/webhooks/signing-key: what every delivery's ML-DSA signature verifies under."""

    algorithm: str
    public_key: str


class Page(msgspec.Struct, Generic[T]):
    """One page of a list endpoint: its items and the cursor of the next page (``None``
    after the last page), from ``meta.nextCursor``. Not a server model: the envelope's."""

    items: list[T]
    next_cursor: str | None
