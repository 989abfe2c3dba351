-- PostgreSQL form of the SQLite migration of the same name (storage/migrations/).
-- The daily export of one chain's watch list (pipelines.rescore.export_watchlist) reads
-- WHERE chain = ? ORDER BY environment, address, account_id. Without this index each of
-- the 19 chains' runs scanned the whole table and sorted its chain's rows in a temporary
-- b-tree; with it the export is one ordered index range (EXPLAIN QUERY PLAN is tested).
-- The export is in byte order (the pipelines merge it with Polars' sorted frames), so the
-- index is kept in the "C" collation, whatever the database's own.
CREATE INDEX watchlist_by_chain
    ON watchlist(chain, environment COLLATE "C", address COLLATE "C", account_id COLLATE "C");
