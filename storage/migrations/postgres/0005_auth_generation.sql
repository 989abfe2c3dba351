-- PostgreSQL form of the SQLite migration of the same name (storage/migrations/).
-- The SQLite triggers are plpgsql functions named after their triggers here: row-level
-- AFTER triggers, so one UPDATE of n rows bumps the counter n times, as in SQLite.
--
-- A counter bumped by every change that can alter what a credential may do (a plan,
-- a key's deletion, expiry or replacement), from any connection or process. The API
-- keeps found credentials in memory while this value stays the same, so unrelated
-- writes (attestations, scan results, usage counts) no longer make it look them up again.
CREATE TABLE auth_generation (
    id    BIGINT PRIMARY KEY CHECK (id = 1),
    value BIGINT NOT NULL
);

INSERT INTO auth_generation (id, value) VALUES (1, 0);

CREATE FUNCTION accounts_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE auth_generation SET value = value + 1 WHERE id = 1;
    RETURN NULL;
END;
$$;

CREATE TRIGGER accounts_auth_changed AFTER UPDATE OF plan, email ON accounts
FOR EACH ROW EXECUTE FUNCTION accounts_auth_changed();

CREATE FUNCTION api_keys_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE auth_generation SET value = value + 1 WHERE id = 1;
    RETURN NULL;
END;
$$;

CREATE TRIGGER api_keys_auth_changed
AFTER UPDATE OF deleted_at, expires_at, replaced_by, key_hash, account_id ON api_keys
FOR EACH ROW EXECUTE FUNCTION api_keys_auth_changed();
