-- +goose Up
-- The SQLite twin of postgres/00015_channels.sql. SQLite cannot alter a
-- CHECK constraint, so notifications is rebuilt as in 00003_routing.sql
-- (the ALTER TABLE page's twelve steps): create notifications_new, copy,
-- drop notifications, rename, make its indexes again. No table refers to
-- notifications.
CREATE TABLE notifications_new (
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
INSERT INTO notifications_new SELECT id, event_id, action_id, type, channel, kind, state, attempts,
    created_at, due_at, delivered_at, last_error FROM notifications;
DROP TABLE notifications;
ALTER TABLE notifications_new RENAME TO notifications;
CREATE UNIQUE INDEX notifications_event_channel ON notifications (event_id, channel);
CREATE INDEX notifications_due ON notifications (due_at) WHERE state = 'pending';
CREATE INDEX notifications_action ON notifications (action_id, created_at);

-- The messages a channel sent for an action and brings up to date once it
-- is decided; slack_messages becomes its Slack rows.
CREATE TABLE channel_messages (
    action_id TEXT NOT NULL REFERENCES actions (id),
    kind      TEXT NOT NULL,
    address   TEXT NOT NULL,
    ref       TEXT NOT NULL,
    sent_at   TEXT NOT NULL,
    PRIMARY KEY (action_id, kind, address, ref),
    CONSTRAINT channel_messages_kind_valid CHECK (kind IN ('slack', 'telegram', 'pagerduty'))
) STRICT;
INSERT INTO channel_messages (action_id, kind, address, ref, sent_at)
SELECT action_id, 'slack', channel, ts, posted_at FROM slack_messages;
DROP TABLE slack_messages;

DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved');

ALTER TABLE users ADD COLUMN telegram_id INTEGER;
CREATE UNIQUE INDEX users_telegram_id ON users (telegram_id) WHERE telegram_id IS NOT NULL;

-- +goose Down
DROP INDEX users_telegram_id;
ALTER TABLE users DROP COLUMN telegram_id;
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated');
CREATE TABLE slack_messages (
    action_id TEXT NOT NULL REFERENCES actions (id),
    channel   TEXT NOT NULL,
    ts        TEXT NOT NULL,
    posted_at TEXT NOT NULL,
    PRIMARY KEY (action_id, channel, ts)
) STRICT;
INSERT INTO slack_messages (action_id, channel, ts, posted_at)
SELECT action_id, address, ref, sent_at FROM channel_messages WHERE kind = 'slack';
DROP TABLE channel_messages;
DELETE FROM notifications WHERE kind IN ('teams', 'telegram', 'pagerduty');
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
    CONSTRAINT notifications_kind_valid CHECK (kind IN ('slack', 'email', 'webhook'))
) STRICT;
INSERT INTO notifications_old SELECT id, event_id, action_id, type, channel, kind, state, attempts,
    created_at, due_at, delivered_at, last_error FROM notifications;
DROP TABLE notifications;
ALTER TABLE notifications_old RENAME TO notifications;
CREATE UNIQUE INDEX notifications_event_channel ON notifications (event_id, channel);
CREATE INDEX notifications_due ON notifications (due_at) WHERE state = 'pending';
CREATE INDEX notifications_action ON notifications (action_id, created_at);
