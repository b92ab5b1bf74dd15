-- +goose Up
-- The SQLite twin of postgres/00014_sso.sql: the users' single sign-on
-- columns, the used states, and events whose action_id may be NULL (staff
-- events belong to no action).
ALTER TABLE users ADD COLUMN sso_subject TEXT;
ALTER TABLE users ADD COLUMN idp_groups TEXT NOT NULL DEFAULT '[]'
    CONSTRAINT users_idp_groups_array CHECK (json_valid(idp_groups) AND json_type(idp_groups) = 'array');
ALTER TABLE users ADD COLUMN idp_synced_at TEXT
    CONSTRAINT users_idp_synced_with_subject CHECK (idp_synced_at IS NULL OR sso_subject IS NOT NULL);
ALTER TABLE users ADD COLUMN sso_denied_at TEXT;

CREATE TABLE sso_states (
    state_hash TEXT PRIMARY KEY NOT NULL,
    expires_at TEXT NOT NULL
) STRICT;
CREATE INDEX sso_states_expires ON sso_states (expires_at);

-- SQLite cannot drop a NOT NULL, so events is rebuilt as 00012 rebuilds
-- actions: create events_new, copy every row, drop events, rename. The
-- store migrates with foreign keys off, so notifications' REFERENCES
-- events (id) names the new table after the rename. The drop takes the
-- indexes with it; they are made again, unchanged. The AUTOINCREMENT
-- counter carries over, so no id is ever handed out twice.
CREATE TABLE events_new (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id  TEXT    REFERENCES actions (id),
    kind       TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    channel    TEXT    NOT NULL DEFAULT '',
    at         TEXT    NOT NULL,
    data       TEXT,
    fanned_out INTEGER NOT NULL DEFAULT 0 CHECK (fanned_out IN (0, 1)),
    CONSTRAINT events_data_json CHECK (data IS NULL OR json_valid(data))
) STRICT;
INSERT INTO events_new (id, action_id, kind, actor, channel, at, data, fanned_out)
SELECT id, action_id, kind, actor, channel, at, data, fanned_out FROM events;
INSERT INTO sqlite_sequence (name, seq) SELECT 'events_new', seq FROM sqlite_sequence WHERE name = 'events'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events_new');
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM sqlite_sequence WHERE name = 'events'))
    WHERE name = 'events_new' AND EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events');
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_action ON events (action_id, id);
CREATE INDEX events_kind ON events (kind, id);
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated');
-- 00013's index of policy decisions (the tools page's hit counts).
CREATE INDEX events_policy ON events (at, actor) WHERE channel = 'policy';

-- +goose Down
-- Staff events go (they have no action to belong to), then the same
-- rebuild back, to the table as 00001 and 00003 left it.
DELETE FROM events WHERE action_id IS NULL;
CREATE TABLE events_new (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id TEXT    NOT NULL REFERENCES actions (id),
    kind      TEXT    NOT NULL,
    actor     TEXT    NOT NULL,
    channel   TEXT    NOT NULL DEFAULT '',
    at        TEXT    NOT NULL,
    data      TEXT, fanned_out INTEGER NOT NULL DEFAULT 0 CHECK (fanned_out IN (0, 1)),
    CONSTRAINT events_data_json CHECK (data IS NULL OR json_valid(data))
) STRICT;
INSERT INTO events_new (id, action_id, kind, actor, channel, at, data, fanned_out)
SELECT id, action_id, kind, actor, channel, at, data, fanned_out FROM events;
INSERT INTO sqlite_sequence (name, seq) SELECT 'events_new', seq FROM sqlite_sequence WHERE name = 'events'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events_new');
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM sqlite_sequence WHERE name = 'events'))
    WHERE name = 'events_new' AND EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events');
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_action ON events (action_id, id);
CREATE INDEX events_kind ON events (kind, id);
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated');
-- 00013's index of policy decisions (the tools page's hit counts).
CREATE INDEX events_policy ON events (at, actor) WHERE channel = 'policy';
DROP TABLE sso_states;
ALTER TABLE users DROP COLUMN sso_denied_at;
ALTER TABLE users DROP COLUMN idp_synced_at;
ALTER TABLE users DROP COLUMN idp_groups;
ALTER TABLE users DROP COLUMN sso_subject;
