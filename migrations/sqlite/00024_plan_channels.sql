-- +goose Up
-- The SQLite twin of postgres/00024_plan_channels.sql. SQLite cannot make
-- a column nullable, so notifications is rebuilt as in 00015_channels.sql.
CREATE TABLE notifications_new (
    id           TEXT    PRIMARY KEY NOT NULL,
    event_id     INTEGER NOT NULL REFERENCES events (id),
    action_id    TEXT    REFERENCES actions (id),
    type         TEXT    NOT NULL,
    channel      TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending',
    attempts     INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT    NOT NULL,
    due_at       TEXT    NOT NULL,
    delivered_at TEXT,
    last_error   TEXT,
    plan_id      TEXT    REFERENCES plans (id),
    CONSTRAINT notifications_state_valid CHECK (state IN ('pending', 'delivered', 'failed')),
    CONSTRAINT notifications_kind_valid CHECK (kind IN ('slack', 'email', 'webhook', 'teams', 'telegram', 'pagerduty')),
    CONSTRAINT notifications_one_subject CHECK ((action_id IS NULL) <> (plan_id IS NULL))
) STRICT;
INSERT INTO notifications_new (id, event_id, action_id, type, channel, kind, state, attempts, created_at,
    due_at, delivered_at, last_error)
SELECT id, event_id, action_id, type, channel, kind, state, attempts, created_at, due_at, delivered_at,
    last_error FROM notifications;
DROP TABLE notifications;
ALTER TABLE notifications_new RENAME TO notifications;
CREATE UNIQUE INDEX notifications_event_channel ON notifications (event_id, channel);
CREATE INDEX notifications_due ON notifications (due_at) WHERE state = 'pending';
CREATE INDEX notifications_action ON notifications (action_id, created_at);
CREATE INDEX notifications_plan ON notifications (plan_id, created_at) WHERE plan_id IS NOT NULL;

CREATE TABLE plan_messages (
    plan_id TEXT NOT NULL REFERENCES plans (id),
    kind    TEXT NOT NULL,
    address TEXT NOT NULL,
    ref     TEXT NOT NULL,
    sent_at TEXT NOT NULL,
    PRIMARY KEY (plan_id, kind, address, ref),
    CONSTRAINT plan_messages_kind_valid CHECK (kind IN ('slack', 'telegram', 'pagerduty'))
) STRICT;

ALTER TABLE plans ADD COLUMN reminded_at TEXT;
ALTER TABLE plans ADD COLUMN escalated_at TEXT;

DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved', 'plan_submitted', 'plan_approved', 'plan_rejected',
    'plan_changes_requested', 'plan_cancelled', 'plan_reminder', 'plan_escalated');

-- +goose Down
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved');
ALTER TABLE plans DROP COLUMN escalated_at;
ALTER TABLE plans DROP COLUMN reminded_at;
DROP TABLE plan_messages;
CREATE TABLE notifications_old (
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
    CONSTRAINT notifications_kind_valid CHECK (kind IN ('slack', 'email', 'webhook', 'teams', 'telegram', 'pagerduty'))
) STRICT;
INSERT INTO notifications_old SELECT id, event_id, action_id, type, channel, kind, state, attempts,
    created_at, due_at, delivered_at, last_error FROM notifications WHERE plan_id IS NULL;
DROP TABLE notifications;
ALTER TABLE notifications_old RENAME TO notifications;
CREATE UNIQUE INDEX notifications_event_channel ON notifications (event_id, channel);
CREATE INDEX notifications_due ON notifications (due_at) WHERE state = 'pending';
CREATE INDEX notifications_action ON notifications (action_id, created_at);
