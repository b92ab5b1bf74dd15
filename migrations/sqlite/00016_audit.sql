-- +goose Up
-- The SQLite twin of postgres/00016_audit.sql: staff events with a subject
-- and no action, and the chain's tables. SQLite orders events by id alone:
-- its writes are serialised, so ids are in commit order, and no txid is
-- needed.
--
-- SQLite cannot drop a NOT NULL, so events is rebuilt as actions was in
-- 00012 (the ALTER TABLE page's twelve steps): create events_new, copy
-- every column, drop events, rename events_new. The rebuild must leave
-- every column and index of events as the migrations before it left them
-- (TestMigrationAudit compares them). Migrations run with
-- foreign keys off, so notifications' REFERENCES events names the new
-- table after the rename, and the store checks them after
-- (PRAGMA foreign_key_check). The drop takes the indexes of 00001 and
-- 00003 with it; they are made again unchanged. events has no triggers.
CREATE TABLE events_new (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id  TEXT    REFERENCES actions (id),
    subject    TEXT,
    kind       TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    channel    TEXT    NOT NULL DEFAULT '',
    at         TEXT    NOT NULL,
    data       TEXT,
    fanned_out INTEGER NOT NULL DEFAULT 0 CHECK (fanned_out IN (0, 1)),
    CONSTRAINT events_data_json CHECK (data IS NULL OR json_valid(data)),
    CONSTRAINT events_subject_staff_only CHECK (action_id IS NULL OR subject IS NULL)
) STRICT;
INSERT INTO events_new (id, action_id, kind, actor, channel, at, data, fanned_out)
SELECT id, action_id, kind, actor, channel, at, data, fanned_out FROM events;
-- AUTOINCREMENT never reuses an id: keep its high-water mark.
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM sqlite_sequence WHERE name = 'events'))
WHERE name = 'events_new' AND EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events');
INSERT INTO sqlite_sequence (name, seq)
SELECT 'events_new', seq FROM sqlite_sequence WHERE name = 'events'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events_new');
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_action ON events (action_id, id);
CREATE INDEX events_kind ON events (kind, id);
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated');

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
DELETE FROM events WHERE action_id IS NULL;
CREATE TABLE events_old (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id  TEXT    NOT NULL REFERENCES actions (id),
    kind       TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    channel    TEXT    NOT NULL DEFAULT '',
    at         TEXT    NOT NULL,
    data       TEXT,
    fanned_out INTEGER NOT NULL DEFAULT 0 CHECK (fanned_out IN (0, 1)),
    CONSTRAINT events_data_json CHECK (data IS NULL OR json_valid(data))
) STRICT;
INSERT INTO events_old (id, action_id, kind, actor, channel, at, data, fanned_out)
SELECT id, action_id, kind, actor, channel, at, data, fanned_out FROM events;
DROP TABLE events;
ALTER TABLE events_old RENAME TO events;
CREATE INDEX events_action ON events (action_id, id);
CREATE INDEX events_kind ON events (kind, id);
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated');
