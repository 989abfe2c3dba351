-- PostgreSQL form of the SQLite migration of the same name (storage/migrations/).
-- The SQLite triggers are plpgsql functions named after their triggers here (row-level
-- AFTER triggers; INSERT OR IGNORE is INSERT ... ON CONFLICT DO NOTHING).
--
-- Cursor pagination and plan caps (issue 15).
--
-- Every list endpoint pages by keyset on (created_at, id) within one account and
-- environment: these indexes make each page one ordered index range (no sort of
-- the account's whole list, however long it is).
CREATE INDEX watchlist_by_account ON watchlist(account_id, environment, created_at, id);
CREATE INDEX pq_keys_by_account_page ON pq_keys(account_id, environment, created_at, id);
CREATE INDEX api_keys_by_account_page ON api_keys(account_id, created_at, id);

-- Watched addresses per account (both environments), kept by triggers so that the
-- plan cap is checked with one point lookup inside the adding transaction, from any
-- process (API, `qday watch import`) and after plain-SQL edits alike. An idempotent
-- add (ON CONFLICT DO NOTHING) inserts no row, fires no trigger and counts nothing.
CREATE TABLE watch_counts (
    account_id TEXT PRIMARY KEY REFERENCES accounts(id),
    n          BIGINT NOT NULL CHECK (n >= 0)
);

INSERT INTO watch_counts (account_id, n) SELECT account_id, COUNT(*) FROM watchlist GROUP BY account_id;

CREATE FUNCTION watch_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO watch_counts (account_id, n) VALUES (NEW.account_id, 0) ON CONFLICT DO NOTHING;
    UPDATE watch_counts SET n = n + 1 WHERE account_id = NEW.account_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER watch_counts_insert AFTER INSERT ON watchlist
FOR EACH ROW EXECUTE FUNCTION watch_counts_insert();

CREATE FUNCTION watch_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE watch_counts SET n = n - 1 WHERE account_id = OLD.account_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER watch_counts_delete AFTER DELETE ON watchlist
FOR EACH ROW EXECUTE FUNCTION watch_counts_delete();

CREATE FUNCTION watch_counts_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE watch_counts SET n = n - 1 WHERE account_id = OLD.account_id;
    INSERT INTO watch_counts (account_id, n) VALUES (NEW.account_id, 0) ON CONFLICT DO NOTHING;
    UPDATE watch_counts SET n = n + 1 WHERE account_id = NEW.account_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER watch_counts_move AFTER UPDATE OF account_id ON watchlist
FOR EACH ROW WHEN (OLD.account_id IS DISTINCT FROM NEW.account_id) EXECUTE FUNCTION watch_counts_move();
