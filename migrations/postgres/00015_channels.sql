-- +goose Up
-- More places to be told (CONTRACT section 17): Microsoft Teams, Telegram
-- and PagerDuty channels beside Slack, email and webhooks.

ALTER TABLE notifications DROP CONSTRAINT notifications_kind_valid,
    ADD CONSTRAINT notifications_kind_valid CHECK (kind IN ('slack', 'email', 'webhook', 'teams', 'telegram', 'pagerduty'));

-- The messages a channel sent for an action and brings up to date once it
-- is decided, of every kind that does: Slack's posts (ref: the ts),
-- Telegram's messages (the message_id), PagerDuty's incidents (the dedup
-- key). address is where it went, as the kind names it (the Slack channel
-- id, the Telegram chat id; the channel's name where that is a credential).
-- slack_messages becomes its Slack rows.
CREATE TABLE channel_messages (
    action_id uuid        NOT NULL REFERENCES actions (id),
    kind      text        NOT NULL,
    address   text        NOT NULL,
    ref       text        NOT NULL,
    sent_at   timestamptz NOT NULL,
    PRIMARY KEY (action_id, kind, address, ref),
    CONSTRAINT channel_messages_kind_valid CHECK (kind IN ('slack', 'telegram', 'pagerduty'))
);
INSERT INTO channel_messages (action_id, kind, address, ref, sent_at)
SELECT action_id, 'slack', channel, ts, posted_at FROM slack_messages;
DROP TABLE slack_messages;

-- A ticket's resolution resolves the PagerDuty incident its opening
-- triggered, so ticket_resolved joins the kinds the outbox fans out. The
-- events of that kind written before this migration are fanned out too,
-- and find no incident to resolve.
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE NOT fanned_out AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved');

-- The Telegram user id of a staff member, who decides in Telegram.
ALTER TABLE users ADD COLUMN telegram_id bigint;
CREATE UNIQUE INDEX users_telegram_id ON users (telegram_id) WHERE telegram_id IS NOT NULL;

-- +goose Down
DROP INDEX users_telegram_id;
ALTER TABLE users DROP COLUMN telegram_id;
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE NOT fanned_out AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated');
CREATE TABLE slack_messages (
    action_id uuid        NOT NULL REFERENCES actions (id),
    channel   text        NOT NULL,
    ts        text        NOT NULL,
    posted_at timestamptz NOT NULL,
    PRIMARY KEY (action_id, channel, ts)
);
INSERT INTO slack_messages (action_id, channel, ts, posted_at)
SELECT action_id, address, ref, sent_at FROM channel_messages WHERE kind = 'slack';
DROP TABLE channel_messages;
DELETE FROM notifications WHERE kind IN ('teams', 'telegram', 'pagerduty');
ALTER TABLE notifications DROP CONSTRAINT notifications_kind_valid,
    ADD CONSTRAINT notifications_kind_valid CHECK (kind IN ('slack', 'email', 'webhook'));
