-- Watched wallets (issue 17): a descriptor or extended public key rescored daily.
--
-- A wallet counts against the plan's watch cap by the addresses its latest scan derived
-- (`derived_addresses`), added to the same per-account count as watched addresses, so
-- one cap covers both and is checked with one point lookup in the adding transaction.
-- `descriptor` is the canonical descriptor with its checksum, or the bare extended key.
CREATE TABLE watched_descriptors (
    id                TEXT PRIMARY KEY,
    account_id        TEXT NOT NULL REFERENCES accounts(id),
    environment       TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    descriptor        TEXT NOT NULL,
    label             TEXT,
    gap_limit         INTEGER NOT NULL CHECK (gap_limit BETWEEN 1 AND 1000),
    derived_addresses INTEGER NOT NULL CHECK (derived_addresses >= 0),
    summary           TEXT,
    scanned_at        TEXT,
    created_at        TEXT NOT NULL,
    UNIQUE (account_id, environment, descriptor)
) STRICT;

CREATE INDEX watched_descriptors_by_account ON watched_descriptors(account_id, environment, created_at, id);

CREATE TRIGGER watch_counts_descriptor_insert AFTER INSERT ON watched_descriptors
BEGIN
    INSERT OR IGNORE INTO watch_counts (account_id, n) VALUES (NEW.account_id, 0);
    UPDATE watch_counts SET n = n + NEW.derived_addresses WHERE account_id = NEW.account_id;
END;

CREATE TRIGGER watch_counts_descriptor_delete AFTER DELETE ON watched_descriptors
BEGIN
    UPDATE watch_counts SET n = n - OLD.derived_addresses WHERE account_id = OLD.account_id;
END;

CREATE TRIGGER watch_counts_descriptor_rescan AFTER UPDATE OF derived_addresses ON watched_descriptors
BEGIN
    UPDATE watch_counts SET n = n - OLD.derived_addresses + NEW.derived_addresses WHERE account_id = NEW.account_id;
END;
