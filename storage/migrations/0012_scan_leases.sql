-- Single-flight scans across workers and nodes: the first to scan an address for a tenant
-- takes a lease; another request for the same scan meanwhile waits for the result the
-- lease holder stores instead of asking the chain again. A lease expires on its own
-- (`expires_at`), so a node that dies while scanning holds nobody up for long.
-- `key` is the tenant, environment, chain and address (services.scans).
CREATE TABLE scan_leases (
    key        TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    taken_at   TEXT NOT NULL,
    expires_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;
