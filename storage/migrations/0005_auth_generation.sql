-- A counter bumped by every change that can alter what a credential may do (a plan,
-- a key's deletion, expiry or replacement), from any connection or process. The API
-- keeps found credentials in memory while this value stays the same, so unrelated
-- writes (attestations, scan results, usage counts) no longer make it look them up again.
CREATE TABLE auth_generation (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
) STRICT;

INSERT INTO auth_generation (id, value) VALUES (1, 0);

CREATE TRIGGER accounts_auth_changed AFTER UPDATE OF plan, email ON accounts
BEGIN
    UPDATE auth_generation SET value = value + 1 WHERE id = 1;
END;

CREATE TRIGGER api_keys_auth_changed AFTER UPDATE OF deleted_at, expires_at, replaced_by, key_hash, account_id ON api_keys
BEGIN
    UPDATE auth_generation SET value = value + 1 WHERE id = 1;
END;
