-- +goose Up
-- The SQLite twin of postgres/00001_init.sql: the same tables, columns, named
-- CHECK constraints and partial unique indexes. STRICT tables refuse values of
-- the wrong type, which PostgreSQL's column types do for free. Timestamps are
-- TEXT in one fixed-width UTC layout (2006-01-02T15:04:05.000000000Z), so that
-- comparing the text compares the instants. JSON is TEXT checked by json_valid,
-- as jsonb would be.
CREATE TABLE actions (
    id               TEXT    PRIMARY KEY NOT NULL,
    tool             TEXT    NOT NULL,
    class            TEXT    NOT NULL,
    intent_key       TEXT    NOT NULL,
    attempt          INTEGER NOT NULL,
    state            TEXT    NOT NULL,
    payload          TEXT    NOT NULL,
    approved_payload TEXT,
    result           TEXT,
    error            TEXT,
    requested_by     TEXT    NOT NULL,
    channel          TEXT    NOT NULL DEFAULT 'api',
    decided_by       TEXT,
    decision_note    TEXT,
    created_at       TEXT    NOT NULL,
    decided_at       TEXT,
    claimed_at       TEXT,
    claimed_by       TEXT,
    claim_deadline   TEXT,
    finished_at      TEXT,
    expires_at       TEXT,
    has_webhook      INTEGER NOT NULL DEFAULT 0,
    spec             TEXT    NOT NULL,
    warnings         TEXT    NOT NULL DEFAULT '[]',
    CONSTRAINT actions_class_valid CHECK (class IN ('exactly-once', 'at-least-once', 'at-most-once')),
    CONSTRAINT actions_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'expired', 'cancelled',
                                                    'in_progress', 'done', 'failed', 'recorded')),
    CONSTRAINT actions_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT actions_recorded_iff_at_least_once CHECK ((class = 'at-least-once') = (state = 'recorded')),
    CONSTRAINT actions_key_required CHECK (class = 'at-least-once' OR length(intent_key) BETWEEN 1 AND 255),
    CONSTRAINT actions_claim_complete CHECK (state <> 'in_progress' OR (claimed_at IS NOT NULL AND claim_deadline IS NOT NULL)),
    CONSTRAINT actions_approval_states CHECK (class = 'at-most-once' OR state NOT IN ('pending', 'approved', 'rejected')),
    CONSTRAINT actions_payload_object CHECK (json_valid(payload) AND json_type(payload) = 'object'),
    CONSTRAINT actions_json_valid CHECK ((approved_payload IS NULL OR json_valid(approved_payload))
                                         AND (result IS NULL OR json_valid(result))
                                         AND json_valid(spec) AND json_valid(warnings)),
    CONSTRAINT actions_has_webhook_bool CHECK (has_webhook IN (0, 1))
) STRICT;

CREATE UNIQUE INDEX actions_held_intent ON actions (intent_key)
    WHERE state IN ('pending', 'approved', 'rejected', 'in_progress', 'done');
CREATE UNIQUE INDEX actions_intent_attempt ON actions (intent_key, attempt)
    WHERE class <> 'at-least-once';
CREATE INDEX actions_created ON actions (created_at, id);
CREATE INDEX actions_state_created ON actions (state, created_at, id);
CREATE INDEX actions_tool_created ON actions (tool, created_at, id);
-- Serves intent_key equality and the GLOB prefix search (BINARY collation).
CREATE INDEX actions_intent_prefix ON actions (intent_key);
CREATE INDEX actions_due ON actions (expires_at) WHERE state IN ('pending', 'approved');
CREATE INDEX actions_claim_due ON actions (claim_deadline) WHERE state = 'in_progress';
CREATE INDEX actions_webhook_ready ON actions (decided_at) WHERE state = 'approved' AND has_webhook;

CREATE TABLE events (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id TEXT    NOT NULL REFERENCES actions (id),
    kind      TEXT    NOT NULL,
    actor     TEXT    NOT NULL,
    channel   TEXT    NOT NULL DEFAULT '',
    at        TEXT    NOT NULL,
    data      TEXT,
    CONSTRAINT events_data_json CHECK (data IS NULL OR json_valid(data))
) STRICT;
CREATE INDEX events_action ON events (action_id, id);
CREATE INDEX events_kind ON events (kind, id);

CREATE TABLE tickets (
    id          TEXT PRIMARY KEY NOT NULL,
    action_id   TEXT NOT NULL REFERENCES actions (id),
    kind        TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'open',
    opened_at   TEXT NOT NULL,
    resolved_at TEXT,
    resolved_by TEXT,
    outcome     TEXT,
    note        TEXT,
    CONSTRAINT tickets_kind_valid CHECK (kind IN ('stale', 'conflict')),
    CONSTRAINT tickets_state_valid CHECK (state IN ('open', 'resolved')),
    CONSTRAINT tickets_resolution_complete CHECK ((state = 'open') = (resolved_at IS NULL)),
    CONSTRAINT tickets_outcome_valid CHECK (outcome IS NULL OR outcome IN ('done', 'failed'))
) STRICT;
-- One open ticket of a kind per action, however often the sweep runs.
CREATE UNIQUE INDEX tickets_one_open ON tickets (action_id, kind) WHERE state = 'open';
CREATE INDEX tickets_open_opened ON tickets (opened_at) WHERE state = 'open';
CREATE INDEX tickets_action ON tickets (action_id, opened_at);

CREATE TABLE users (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    email               TEXT NOT NULL,
    password_hash       TEXT NOT NULL,
    role                TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    password_changed_at TEXT NOT NULL,
    CONSTRAINT users_role_valid CHECK (role IN ('admin', 'approver', 'ops', 'viewer'))
) STRICT;
CREATE UNIQUE INDEX users_email ON users (lower(email));

CREATE TABLE agent_tokens (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT
) STRICT;
-- A name is reusable once its token is revoked.
CREATE UNIQUE INDEX agent_tokens_active_name ON agent_tokens (name) WHERE revoked_at IS NULL;

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY NOT NULL,
    user_id    INTEGER REFERENCES users (id) ON DELETE CASCADE,
    data       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
) STRICT;
CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_expires ON sessions (expires_at);

CREATE TABLE login_failures (
    subject TEXT NOT NULL,
    at      TEXT NOT NULL
) STRICT;
CREATE INDEX login_failures_subject ON login_failures (subject, at);

CREATE TABLE settings (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE settings;
DROP TABLE login_failures;
DROP TABLE sessions;
DROP TABLE agent_tokens;
DROP TABLE users;
DROP TABLE tickets;
DROP TABLE events;
DROP TABLE actions;
