-- +goose Up
-- The SQLite twin of postgres/00003_routing.sql. SQLite cannot alter a CHECK
-- constraint, so actions is rebuilt as the ALTER TABLE page's twelve steps
-- say: create actions_new, copy, drop actions, rename actions_new. The store
-- runs migrations with foreign keys off, so the drop leaves the REFERENCES
-- clauses of events and tickets naming "actions", the new table.
CREATE TABLE actions_new (
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
    -- The approvals given so far, written under the deciding transaction.
    approvals        TEXT    NOT NULL DEFAULT '[]',
    reminded_at      TEXT,
    escalated_at     TEXT,
    CONSTRAINT actions_class_valid CHECK (class IN ('exactly-once', 'at-least-once', 'at-most-once')),
    CONSTRAINT actions_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested',
                                                    'expired', 'cancelled', 'in_progress', 'done', 'failed', 'recorded')),
    CONSTRAINT actions_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT actions_recorded_iff_at_least_once CHECK ((class = 'at-least-once') = (state = 'recorded')),
    CONSTRAINT actions_key_required CHECK (class = 'at-least-once' OR length(intent_key) BETWEEN 1 AND 255),
    CONSTRAINT actions_claim_complete CHECK (state <> 'in_progress' OR (claimed_at IS NOT NULL AND claim_deadline IS NOT NULL)),
    CONSTRAINT actions_approval_states CHECK (class = 'at-most-once'
                                              OR state NOT IN ('pending', 'approved', 'rejected', 'changes_requested')),
    CONSTRAINT actions_payload_object CHECK (json_valid(payload) AND json_type(payload) = 'object'),
    CONSTRAINT actions_json_valid CHECK ((approved_payload IS NULL OR json_valid(approved_payload))
                                         AND (result IS NULL OR json_valid(result))
                                         AND json_valid(spec) AND json_valid(warnings) AND json_valid(approvals)),
    CONSTRAINT actions_has_webhook_bool CHECK (has_webhook IN (0, 1))
) STRICT;
INSERT INTO actions_new (id, tool, class, intent_key, attempt, state, payload, approved_payload, result, error,
    requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
    claim_deadline, finished_at, expires_at, has_webhook, spec, warnings)
SELECT id, tool, class, intent_key, attempt, state, payload, approved_payload, result, error,
    requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
    claim_deadline, finished_at, expires_at, has_webhook, spec, warnings FROM actions;
DROP TABLE actions;
ALTER TABLE actions_new RENAME TO actions;
CREATE UNIQUE INDEX actions_held_intent ON actions (intent_key)
    WHERE state IN ('pending', 'approved', 'rejected', 'in_progress', 'done');
CREATE UNIQUE INDEX actions_intent_attempt ON actions (intent_key, attempt)
    WHERE class <> 'at-least-once';
CREATE INDEX actions_created ON actions (created_at, id);
CREATE INDEX actions_state_created ON actions (state, created_at, id);
CREATE INDEX actions_tool_created ON actions (tool, created_at, id);
CREATE INDEX actions_intent_prefix ON actions (intent_key);
CREATE INDEX actions_due ON actions (expires_at) WHERE state IN ('pending', 'approved');
CREATE INDEX actions_claim_due ON actions (claim_deadline) WHERE state = 'in_progress';
CREATE INDEX actions_webhook_ready ON actions (created_at, id) WHERE state = 'approved' AND has_webhook = 1;

-- Existing events were never meant to be sent: mark them fanned out.
ALTER TABLE events ADD COLUMN fanned_out INTEGER NOT NULL DEFAULT 0 CHECK (fanned_out IN (0, 1));
UPDATE events SET fanned_out = 1;
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated');

CREATE TABLE notifications (
    id           TEXT    PRIMARY KEY NOT NULL,
    event_id     INTEGER NOT NULL REFERENCES events (id),
    action_id    TEXT    NOT NULL REFERENCES actions (id),
    type         TEXT    NOT NULL,
    channel      TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending',
    attempts     INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT    NOT NULL,
    due_at       TEXT    NOT NULL,
    delivered_at TEXT,
    last_error   TEXT,
    CONSTRAINT notifications_state_valid CHECK (state IN ('pending', 'delivered', 'failed')),
    CONSTRAINT notifications_kind_valid CHECK (kind IN ('slack', 'email', 'webhook'))
) STRICT;
CREATE UNIQUE INDEX notifications_event_channel ON notifications (event_id, channel);
CREATE INDEX notifications_due ON notifications (due_at) WHERE state = 'pending';
CREATE INDEX notifications_action ON notifications (action_id, created_at);

CREATE TABLE slack_messages (
    action_id TEXT NOT NULL REFERENCES actions (id),
    channel   TEXT NOT NULL,
    ts        TEXT NOT NULL,
    posted_at TEXT NOT NULL,
    PRIMARY KEY (action_id, channel, ts)
) STRICT;

ALTER TABLE users ADD COLUMN slack_id TEXT;
CREATE UNIQUE INDEX users_slack_id ON users (slack_id) WHERE slack_id IS NOT NULL;

-- +goose Down
DROP INDEX users_slack_id;
ALTER TABLE users DROP COLUMN slack_id;
DROP TABLE slack_messages;
DROP TABLE notifications;
DROP INDEX events_fan_out;
ALTER TABLE events DROP COLUMN fanned_out;
