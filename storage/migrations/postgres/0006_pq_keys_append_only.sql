-- PostgreSQL form of the SQLite migration of the same name (storage/migrations/).
-- The SQLite triggers are plpgsql functions named after their triggers here; they raise
-- SQLSTATE 23000 (integrity_constraint_violation, psycopg.IntegrityError) with SQLite's
-- messages, as SQLite's RAISE(ABORT, ...) is a constraint error (sqlite3.IntegrityError).
--
-- Registered post-quantum keys are evidence that attestations point at: a
-- registration is never changed or withdrawn in place. The API remembers keys it
-- has found (storage/attestations_sqlite.py), which is right only while this holds,
-- so the database enforces it for every connection.
CREATE FUNCTION pq_keys_no_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'pq_keys rows are append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER pq_keys_no_update BEFORE UPDATE ON pq_keys
FOR EACH ROW EXECUTE FUNCTION pq_keys_no_update();

CREATE FUNCTION pq_keys_no_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'pq_keys rows are append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER pq_keys_no_delete BEFORE DELETE ON pq_keys
FOR EACH ROW EXECUTE FUNCTION pq_keys_no_delete();

-- PostgreSQL only: TRUNCATE fires no row trigger (SQLite has no TRUNCATE; its DELETE fires them).
CREATE FUNCTION pq_keys_no_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'pq_keys rows are append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER pq_keys_no_truncate BEFORE TRUNCATE ON pq_keys
FOR EACH STATEMENT EXECUTE FUNCTION pq_keys_no_truncate();
