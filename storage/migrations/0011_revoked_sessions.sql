-- Sessions ended before their expiry (POST /v1/auth/logout). A session token is signed
-- and carries its own expiry; one listed here is refused by every worker and node. A row
-- is needed only until the token would have expired anyway (`expires_at`), so the table
-- stays small. Adding one bumps `auth_generation`, so cached credentials are rechecked.
CREATE TABLE revoked_sessions (
    session_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    revoked_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX revoked_sessions_by_expiry ON revoked_sessions(expires_at);

CREATE TRIGGER revoked_sessions_auth_changed AFTER INSERT ON revoked_sessions
BEGIN
    UPDATE auth_generation SET value = value + 1 WHERE id = 1;
END;
