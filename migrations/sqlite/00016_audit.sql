-- +goose Up
-- The SQLite twin of postgres/00016_audit.sql: staff events with a subject
-- and no action, and the chain's tables. SQLite orders events by id alone:
-- its writes are serialised, so ids are in commit order, and no txid is
-- needed.
--
-- 00014 made action_id nullable (staff events); the subject is one more
-- column, whose CHECK keeps it to staff events. ADD COLUMN rewrites no row
-- and keeps every index the migrations before it made.
ALTER TABLE events ADD COLUMN subject TEXT
    CONSTRAINT events_subject_staff_only CHECK (action_id IS NULL OR subject IS NULL);

-- One row per sealed event (see the PostgreSQL twin for why a table of
-- its own and no foreign key).
CREATE TABLE audit_chain (
    seq       INTEGER PRIMARY KEY NOT NULL,
    event_id  INTEGER NOT NULL,
    prev_hash BLOB    NOT NULL,
    hash      BLOB    NOT NULL,
    CONSTRAINT audit_chain_seq_positive CHECK (seq >= 1),
    CONSTRAINT audit_chain_hash_size CHECK (length(prev_hash) = 32 AND length(hash) = 32)
) STRICT;
CREATE UNIQUE INDEX audit_chain_event ON audit_chain (event_id);

CREATE TABLE audit_head (
    id              INTEGER PRIMARY KEY NOT NULL,
    seq             INTEGER NOT NULL,
    hash            BLOB    NOT NULL,
    cursor_id       INTEGER NOT NULL,
    sealed_at       TEXT,
    holder          TEXT,
    lease_until     TEXT,
    verified_at     TEXT,
    verified_seq    INTEGER,
    verified_ok     INTEGER,
    verified_detail TEXT,
    CONSTRAINT audit_head_one_row CHECK (id = 1),
    CONSTRAINT audit_head_hash_size CHECK (length(hash) = 32),
    CONSTRAINT audit_head_verified_bool CHECK (verified_ok IS NULL OR verified_ok IN (0, 1))
) STRICT;
INSERT INTO audit_head (id, seq, hash, cursor_id) VALUES (1, 0, zeroblob(32), 0);

-- +goose Down
DROP TABLE audit_head;
DROP TABLE audit_chain;
ALTER TABLE events DROP COLUMN subject;
