-- PostgreSQL form of the SQLite migration of the same name (storage/migrations/).
-- The SQLite triggers are plpgsql functions named after their triggers here (row-level
-- AFTER triggers; INSERT OR IGNORE is INSERT ... ON CONFLICT DO NOTHING).
--
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
    gap_limit         BIGINT NOT NULL CHECK (gap_limit BETWEEN 1 AND 1000),
    derived_addresses BIGINT NOT NULL CHECK (derived_addresses >= 0),
    summary           TEXT,
    scanned_at        TEXT,
    created_at        TEXT NOT NULL,
    UNIQUE (account_id, environment, descriptor)
);

CREATE INDEX watched_descriptors_by_account ON watched_descriptors(account_id, environment, created_at, id);

CREATE FUNCTION watch_counts_descriptor_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO watch_counts (account_id, n) VALUES (NEW.account_id, 0) ON CONFLICT DO NOTHING;
    UPDATE watch_counts SET n = n + NEW.derived_addresses WHERE account_id = NEW.account_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER watch_counts_descriptor_insert AFTER INSERT ON watched_descriptors
FOR EACH ROW EXECUTE FUNCTION watch_counts_descriptor_insert();

CREATE FUNCTION watch_counts_descriptor_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE watch_counts SET n = n - OLD.derived_addresses WHERE account_id = OLD.account_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER watch_counts_descriptor_delete AFTER DELETE ON watched_descriptors
FOR EACH ROW EXECUTE FUNCTION watch_counts_descriptor_delete();

CREATE FUNCTION watch_counts_descriptor_rescan() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE watch_counts SET n = n - OLD.derived_addresses + NEW.derived_addresses WHERE account_id = NEW.account_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER watch_counts_descriptor_rescan AFTER UPDATE OF derived_addresses ON watched_descriptors
FOR EACH ROW EXECUTE FUNCTION watch_counts_descriptor_rescan();
