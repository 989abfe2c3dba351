-- PostgreSQL form of the SQLite migration of the same name (storage/migrations/).
-- Accounts and API keys. Keys are stored only as a keyed hash (HMAC-SHA256).
CREATE TABLE accounts (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    name          TEXT,
    plan          TEXT NOT NULL CHECK (plan IN ('free', 'builder', 'pro', 'enterprise')),
    password_hash TEXT NOT NULL,
    created_at    TEXT NOT NULL
);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    name         TEXT NOT NULL,
    type         TEXT NOT NULL CHECK (type IN ('publishable', 'secret')),
    environment  TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    key_hash     BYTEA NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    expires_at   TEXT,
    deleted_at   TEXT,
    replaced_by  TEXT
);

CREATE INDEX api_keys_by_account ON api_keys(account_id, environment);
