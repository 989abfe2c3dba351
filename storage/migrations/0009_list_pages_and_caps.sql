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
    n          INTEGER NOT NULL CHECK (n >= 0)
) STRICT, WITHOUT ROWID;

INSERT INTO watch_counts (account_id, n) SELECT account_id, COUNT(*) FROM watchlist GROUP BY account_id;

CREATE TRIGGER watch_counts_insert AFTER INSERT ON watchlist
BEGIN
    INSERT OR IGNORE INTO watch_counts (account_id, n) VALUES (NEW.account_id, 0);
    UPDATE watch_counts SET n = n + 1 WHERE account_id = NEW.account_id;
END;

CREATE TRIGGER watch_counts_delete AFTER DELETE ON watchlist
BEGIN
    UPDATE watch_counts SET n = n - 1 WHERE account_id = OLD.account_id;
END;

CREATE TRIGGER watch_counts_move AFTER UPDATE OF account_id ON watchlist
WHEN OLD.account_id IS NOT NEW.account_id
BEGIN
    UPDATE watch_counts SET n = n - 1 WHERE account_id = OLD.account_id;
    INSERT OR IGNORE INTO watch_counts (account_id, n) VALUES (NEW.account_id, 0);
    UPDATE watch_counts SET n = n + 1 WHERE account_id = NEW.account_id;
END;
