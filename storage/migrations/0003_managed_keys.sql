-- Managed custody: ML-DSA keys whose private half the service holds.
-- key_ref is what the custody backend gave back (embedded backend: the seed
-- wrapped by the token's AES key, bound to this row); it is erased (NULL) when
-- the key is destroyed. No private key or seed is ever stored in plain form.
CREATE TABLE managed_keys (
    id                    TEXT PRIMARY KEY,
    account_id            TEXT NOT NULL REFERENCES accounts(id),
    environment           TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    algorithm             TEXT NOT NULL CHECK (algorithm IN ('ml-dsa-44', 'ml-dsa-65', 'ml-dsa-87')),
    chain                 TEXT NOT NULL,
    public_key            BLOB NOT NULL,
    fingerprint           TEXT NOT NULL,
    backend               TEXT NOT NULL,
    wrapping_key          TEXT NOT NULL,
    key_ref               BLOB,
    state                 TEXT NOT NULL CHECK (state IN ('active', 'pending_deletion', 'destroyed')),
    created_at            TEXT NOT NULL,
    deletion_requested_at TEXT,
    deletion_scheduled_at TEXT,
    destroyed_at          TEXT,
    CHECK ((state = 'destroyed') = (key_ref IS NULL AND destroyed_at IS NOT NULL)),
    CHECK ((state = 'pending_deletion') = (deletion_scheduled_at IS NOT NULL))
) STRICT;

CREATE INDEX managed_keys_by_account ON managed_keys(account_id, environment, created_at);
CREATE INDEX managed_keys_due ON managed_keys(state, deletion_scheduled_at);

-- Append-only audit log of every state change, chained per account: hash =
-- SHA-256(prev_hash || canonical event), so a rewritten history shows.
CREATE TABLE managed_key_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    key_id      TEXT NOT NULL REFERENCES managed_keys(id),
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    environment TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    type        TEXT NOT NULL CHECK (type IN ('created', 'deletion_scheduled', 'deletion_cancelled', 'destroyed')),
    state       TEXT NOT NULL CHECK (state IN ('active', 'pending_deletion', 'destroyed')),
    actor       TEXT NOT NULL,
    request_id  TEXT,
    at          TEXT NOT NULL,
    details     TEXT NOT NULL,
    prev_hash   BLOB NOT NULL,
    hash        BLOB NOT NULL
) STRICT;

CREATE INDEX managed_key_events_by_key ON managed_key_events(key_id, seq);
CREATE INDEX managed_key_events_by_account ON managed_key_events(account_id, seq);

CREATE TRIGGER managed_key_events_no_update BEFORE UPDATE ON managed_key_events
BEGIN
    SELECT RAISE(ABORT, 'managed_key_events is append-only');
END;

CREATE TRIGGER managed_key_events_no_delete BEFORE DELETE ON managed_key_events
BEGIN
    SELECT RAISE(ABORT, 'managed_key_events is append-only');
END;

-- Destruction is final: a destroyed key never changes again, and key rows are
-- never deleted (their public key and history stay).
CREATE TRIGGER managed_keys_destroyed_is_final BEFORE UPDATE ON managed_keys
WHEN OLD.state = 'destroyed'
BEGIN
    SELECT RAISE(ABORT, 'a destroyed managed key cannot change');
END;

CREATE TRIGGER managed_keys_no_delete BEFORE DELETE ON managed_keys
BEGIN
    SELECT RAISE(ABORT, 'managed key rows are never deleted');
END;

-- Signing operations per key per calendar month (UTC, 'YYYY-MM').
CREATE TABLE managed_key_usage (
    key_id      TEXT NOT NULL REFERENCES managed_keys(id),
    month       TEXT NOT NULL,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    environment TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    signatures  INTEGER NOT NULL CHECK (signatures >= 0),
    PRIMARY KEY (key_id, month)
) STRICT, WITHOUT ROWID;

CREATE INDEX managed_key_usage_by_account ON managed_key_usage(account_id, environment, month);
