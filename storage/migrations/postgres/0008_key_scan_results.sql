-- PostgreSQL form of the SQLite migration of the same name (storage/migrations/).
-- Latest result of POST /v1/scan/key per tenant and environment. `subject` is the scoring
-- version, ":", the key's compressed encoding in hex, "/" and the chains asked for ("*"
-- for all): a scan of some chains never answers for a scan of all, nor older rules for new.
CREATE TABLE key_scan_results (
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    environment  TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    subject      TEXT NOT NULL,
    result       TEXT NOT NULL,
    data_as_of   TEXT NOT NULL,
    scanned_at   TEXT NOT NULL,
    PRIMARY KEY (account_id, environment, subject)
);
