-- +goose Up
-- Plans reach people as actions do (CONTRACT section 19): their events go
-- through the outbox, their chat messages are kept to be brought up to
-- date, and pending plans are reminded of and escalated.

-- A notification is about an action or about a plan, never both. NOT
-- VALID: every existing row names an action, and checking that would read
-- the whole table under this statement's lock; new rows are checked.
ALTER TABLE notifications ALTER COLUMN action_id DROP NOT NULL,
    ADD COLUMN plan_id uuid REFERENCES plans (id),
    ADD CONSTRAINT notifications_one_subject CHECK ((action_id IS NULL) <> (plan_id IS NULL)) NOT VALID;
CREATE INDEX notifications_plan ON notifications (plan_id, created_at) WHERE plan_id IS NOT NULL;

-- The messages a channel sent for a plan, as channel_messages for actions.
CREATE TABLE plan_messages (
    plan_id uuid        NOT NULL REFERENCES plans (id),
    kind    text        NOT NULL,
    address text        NOT NULL,
    ref     text        NOT NULL,
    sent_at timestamptz NOT NULL,
    PRIMARY KEY (plan_id, kind, address, ref),
    CONSTRAINT plan_messages_kind_valid CHECK (kind IN ('slack', 'telegram', 'pagerduty'))
);

-- A pending plan's reminder and escalation clocks, as actions' columns.
ALTER TABLE plans ADD COLUMN reminded_at timestamptz, ADD COLUMN escalated_at timestamptz;

-- Plan events that tell channels join the kinds the outbox fans out.
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE NOT fanned_out AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved', 'plan_submitted', 'plan_approved', 'plan_rejected',
    'plan_changes_requested', 'plan_cancelled', 'plan_reminder', 'plan_escalated');

-- +goose Down
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE NOT fanned_out AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved');
ALTER TABLE plans DROP COLUMN reminded_at, DROP COLUMN escalated_at;
DROP TABLE plan_messages;
DELETE FROM notifications WHERE plan_id IS NOT NULL;
DROP INDEX notifications_plan;
ALTER TABLE notifications DROP CONSTRAINT notifications_one_subject, DROP COLUMN plan_id,
    ALTER COLUMN action_id SET NOT NULL;
