-- PostgreSQL form of the SQLite migration of the same name (storage/migrations/).
-- Post-quantum public keys registered to an account (never private keys),
-- attestation challenges for strict mode, and attestations.
CREATE TABLE pq_keys (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    environment TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    algorithm   TEXT NOT NULL,
    chain       TEXT NOT NULL,
    public_key  BYTEA NOT NULL,
    fingerprint TEXT NOT NULL,
    origin      TEXT NOT NULL CHECK (origin IN ('generated', 'registered')),
    created_at  TEXT NOT NULL,
    UNIQUE (account_id, environment, algorithm, fingerprint)
);

CREATE TABLE attestation_challenges (
    id             TEXT PRIMARY KEY,
    account_id     TEXT NOT NULL REFERENCES accounts(id),
    environment    TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    statement_hash BYTEA NOT NULL UNIQUE,
    statement      TEXT NOT NULL,
    expires_at     TEXT NOT NULL,
    used_at        TEXT,
    created_at     TEXT NOT NULL
);

CREATE TABLE attestations (
    id                   TEXT PRIMARY KEY,
    account_id           TEXT NOT NULL REFERENCES accounts(id),
    environment          TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    pq_key_id            TEXT NOT NULL REFERENCES pq_keys(id),
    message              BYTEA NOT NULL,
    ecdsa_public_key     BYTEA NOT NULL,
    ecdsa_claim          TEXT NOT NULL,
    ecdsa_scheme         TEXT NOT NULL,
    ecdsa_signature      BYTEA NOT NULL,
    ecdsa_signature_hash BYTEA NOT NULL,
    pqc_public_key       BYTEA NOT NULL,
    algorithm            TEXT NOT NULL,
    context              BYTEA NOT NULL,
    pqc_signature        BYTEA NOT NULL,
    pqc_signature_hash   BYTEA NOT NULL,
    chain                TEXT NOT NULL,
    metadata             TEXT NOT NULL,
    challenge_id         TEXT REFERENCES attestation_challenges(id),
    created_at           TEXT NOT NULL
);

CREATE INDEX pq_keys_by_account ON pq_keys(account_id, environment, created_at);
CREATE INDEX attestations_by_account ON attestations(account_id, environment, created_at);
