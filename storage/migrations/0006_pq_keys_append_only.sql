-- Registered post-quantum keys are evidence that attestations point at: a
-- registration is never changed or withdrawn in place. The API remembers keys it
-- has found (storage/attestations_sqlite.py), which is right only while this holds,
-- so the database enforces it for every connection.
CREATE TRIGGER pq_keys_no_update BEFORE UPDATE ON pq_keys
BEGIN
    SELECT RAISE(ABORT, 'pq_keys rows are append-only');
END;

CREATE TRIGGER pq_keys_no_delete BEFORE DELETE ON pq_keys
BEGIN
    SELECT RAISE(ABORT, 'pq_keys rows are append-only');
END;
