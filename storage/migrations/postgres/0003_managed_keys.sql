-- PostgreSQL form of the SQLite migration of the same name (storage/migrations/).
-- The SQLite triggers are plpgsql functions named after their triggers here; they raise
-- SQLSTATE 23000 (integrity_constraint_violation, psycopg.IntegrityError) with SQLite's
-- messages, as SQLite's RAISE(ABORT, ...) is a constraint error (sqlite3.IntegrityError).
--
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
    public_key            BYTEA NOT NULL,
    fingerprint           TEXT NOT NULL,
    backend               TEXT NOT NULL,
    wrapping_key          TEXT NOT NULL,
    key_ref               BYTEA,
    state                 TEXT NOT NULL CHECK (state IN ('active', 'pending_deletion', 'destroyed')),
    created_at            TEXT NOT NULL,
    deletion_requested_at TEXT,
    deletion_scheduled_at TEXT,
    destroyed_at          TEXT,
    CHECK ((state = 'destroyed') = (key_ref IS NULL AND destroyed_at IS NOT NULL)),
    CHECK ((state = 'pending_deletion') = (deletion_scheduled_at IS NOT NULL))
);

CREATE INDEX managed_keys_by_account ON managed_keys(account_id, environment, created_at);
CREATE INDEX managed_keys_due ON managed_keys(state, deletion_scheduled_at);

-- Append-only audit log of every state change, chained per account: hash =
-- SHA-256(prev_hash || canonical event), so a rewritten history shows.
-- (seq comes from an identity sequence: unlike SQLite's AUTOINCREMENT, a rolled-back
-- insert leaves a gap; the order of seq is what counts, never its density.)
CREATE TABLE managed_key_events (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
    prev_hash   BYTEA NOT NULL,
    hash        BYTEA NOT NULL
);

CREATE INDEX managed_key_events_by_key ON managed_key_events(key_id, seq);
CREATE INDEX managed_key_events_by_account ON managed_key_events(account_id, seq);

CREATE FUNCTION managed_key_events_no_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'managed_key_events is append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER managed_key_events_no_update BEFORE UPDATE ON managed_key_events
FOR EACH ROW EXECUTE FUNCTION managed_key_events_no_update();

CREATE FUNCTION managed_key_events_no_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'managed_key_events is append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER managed_key_events_no_delete BEFORE DELETE ON managed_key_events
FOR EACH ROW EXECUTE FUNCTION managed_key_events_no_delete();

-- PostgreSQL only: TRUNCATE fires no row trigger (SQLite has no TRUNCATE; its DELETE fires them).
CREATE FUNCTION managed_key_events_no_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'managed_key_events is append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER managed_key_events_no_truncate BEFORE TRUNCATE ON managed_key_events
FOR EACH STATEMENT EXECUTE FUNCTION managed_key_events_no_truncate();

-- Destruction is final: a destroyed key never changes again, and key rows are
-- never deleted (their public key and history stay).
CREATE FUNCTION managed_keys_destroyed_is_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a destroyed managed key cannot change' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER managed_keys_destroyed_is_final BEFORE UPDATE ON managed_keys
FOR EACH ROW WHEN (OLD.state = 'destroyed') EXECUTE FUNCTION managed_keys_destroyed_is_final();

CREATE FUNCTION managed_keys_no_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'managed key rows are never deleted' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER managed_keys_no_delete BEFORE DELETE ON managed_keys
FOR EACH ROW EXECUTE FUNCTION managed_keys_no_delete();

-- PostgreSQL only: TRUNCATE fires no row trigger (SQLite has no TRUNCATE; its DELETE fires them).
CREATE FUNCTION managed_keys_no_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'managed key rows are never deleted' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER managed_keys_no_truncate BEFORE TRUNCATE ON managed_keys
FOR EACH STATEMENT EXECUTE FUNCTION managed_keys_no_truncate();

-- Signing operations per key per calendar month (UTC, 'YYYY-MM').
CREATE TABLE managed_key_usage (
    key_id      TEXT NOT NULL REFERENCES managed_keys(id),
    month       TEXT NOT NULL,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    environment TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    signatures  BIGINT NOT NULL CHECK (signatures >= 0),
    PRIMARY KEY (key_id, month)
);

CREATE INDEX managed_key_usage_by_account ON managed_key_usage(account_id, environment, month);
