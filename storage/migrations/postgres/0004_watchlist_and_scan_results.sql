-- PostgreSQL form of the SQLite migration of the same name (storage/migrations/).
-- Watched addresses (per tenant) and the latest wallet-scan result per tenant and
-- address, written by the scan endpoint and by the pipelines' publish step.
-- Results are kept per account: a shared cache would tell one customer which
-- addresses another customer watches or scanned.
CREATE TABLE watchlist (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    environment TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    chain       TEXT NOT NULL,
    address     TEXT NOT NULL,
    label       TEXT,
    created_at  TEXT NOT NULL,
    UNIQUE (account_id, environment, chain, address)
);

CREATE INDEX watchlist_by_created ON watchlist(created_at);

CREATE TABLE scan_results (
    account_id      TEXT NOT NULL REFERENCES accounts(id),
    environment     TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    chain           TEXT NOT NULL,
    address         TEXT NOT NULL,
    result          TEXT NOT NULL,
    risk_value      BIGINT NOT NULL,
    risk_score      TEXT NOT NULL,
    scoring_version TEXT NOT NULL,
    data_as_of      TEXT NOT NULL,
    scanned_at      TEXT NOT NULL,
    source          TEXT NOT NULL CHECK (source IN ('api', 'pipeline')),
    PRIMARY KEY (account_id, environment, chain, address)
);
