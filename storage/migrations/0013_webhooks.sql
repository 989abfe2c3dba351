-- Webhooks (issue 19): endpoints tenants register, a durable outbox of events, and one
-- delivery per event and endpoint with every attempt kept.
--
-- An event is written to `webhook_events`, with a `webhook_deliveries` row for each
-- endpoint subscribed to it, in the same transaction as the change it reports, so an
-- acknowledged change is never without its alert (at-least-once). Delivery workers on any
-- node claim due deliveries by lease (`claimed_until`): a worker killed mid-delivery holds
-- its claims until they expire, and then another delivers them.
--
-- `secret` and `previous_secret` are sealed (AES-256-GCM under a key derived from the
-- service's master secret, bound to the endpoint): the HMAC needs the secret itself, so a
-- keyed hash cannot be kept instead. After a rotation the previous secret signs too until
-- `previous_secret_expires_at`.
CREATE TABLE webhooks (
    id                         TEXT PRIMARY KEY,
    account_id                 TEXT NOT NULL REFERENCES accounts(id),
    environment                TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    url                        TEXT NOT NULL,
    events                     TEXT NOT NULL,
    description                TEXT,
    secret                     BLOB NOT NULL,
    previous_secret            BLOB,
    previous_secret_expires_at TEXT,
    created_at                 TEXT NOT NULL,
    failing_since              TEXT,
    disabled_at                TEXT,
    disabled_reason            TEXT
) STRICT;

CREATE INDEX webhooks_by_account ON webhooks(account_id, environment, created_at, id);

CREATE TABLE webhook_events (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    environment TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    type        TEXT NOT NULL,
    body        BLOB NOT NULL,
    created_at  TEXT NOT NULL
) STRICT;

CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    webhook_id      TEXT NOT NULL REFERENCES webhooks(id),
    event_id        TEXT NOT NULL REFERENCES webhook_events(id),
    state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL CHECK (attempts >= 0),
    next_attempt_at TEXT,
    claimed_until   TEXT,
    created_at      TEXT NOT NULL,
    finished_at     TEXT,
    UNIQUE (webhook_id, event_id)
) STRICT;

CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries(webhook_id, created_at, id);

CREATE TABLE webhook_attempts (
    delivery_id  TEXT NOT NULL REFERENCES webhook_deliveries(id),
    attempt      INTEGER NOT NULL CHECK (attempt >= 1),
    attempted_at TEXT NOT NULL,
    status       INTEGER,
    latency_ms   REAL NOT NULL,
    error        TEXT,
    PRIMARY KEY (delivery_id, attempt)
) STRICT, WITHOUT ROWID;

-- Keys the service itself signs with (the webhook signing key): the public key and the
-- custody backend's reference, never private material.
CREATE TABLE service_keys (
    name         TEXT PRIMARY KEY,
    algorithm    TEXT NOT NULL,
    public_key   BLOB NOT NULL,
    key_ref      BLOB NOT NULL,
    backend      TEXT NOT NULL,
    wrapping_key TEXT NOT NULL,
    created_at   TEXT NOT NULL
) STRICT, WITHOUT ROWID;

-- What the chain-head follower last saw of each watched address, per tenant watching it
-- (services.exposure_follow): whether its key is on chain (on any chain of its key family)
-- and its balance in base units (decimal text: wei exceed 64 bits). A change it finds is
-- written here with its events in one transaction.
CREATE TABLE alert_state (
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    environment  TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    chain        TEXT NOT NULL,
    address      TEXT NOT NULL,
    exposed      INTEGER NOT NULL CHECK (exposed IN (0, 1)),
    balance      TEXT NOT NULL,
    evidence     TEXT,
    block_height INTEGER NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (account_id, environment, chain, address)
) STRICT, WITHOUT ROWID;
