-- +goose Up
-- Approval routing (CONTRACT section 9) and the third decision (section 10).

-- changes_requested: final for the attempt and not held, so the partial
-- unique index actions_held_intent (which does not list it) releases the key.
ALTER TABLE actions DROP CONSTRAINT actions_state_valid,
    ADD CONSTRAINT actions_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested',
        'expired', 'cancelled', 'in_progress', 'done', 'failed', 'recorded')),
    DROP CONSTRAINT actions_approval_states,
    ADD CONSTRAINT actions_approval_states CHECK (class = 'at-most-once'
        OR state NOT IN ('pending', 'approved', 'rejected', 'changes_requested'));

-- approvals are the approvals given so far ([{by, at, note}]), written under
-- the action's row lock by the deciding transaction, which reads them to
-- refuse a second approval by the same user (queue.PlanDecision).
-- reminded_at and escalated_at are the sweep's conditional-update guards.
ALTER TABLE actions ADD COLUMN approvals json NOT NULL DEFAULT '[]',
    ADD COLUMN reminded_at timestamptz,
    ADD COLUMN escalated_at timestamptz;

-- The outbox: an event of a kind that notifies is waiting for the fan-out
-- until fanned_out. Existing events were never meant to be sent, so the
-- column is added as true (no table rewrite) and new rows default to false.
-- The partial index holds only the unprocessed events of those kinds, so
-- the events that notify nobody (replays, claims) never enter it.
ALTER TABLE events ADD COLUMN fanned_out boolean NOT NULL DEFAULT true;
ALTER TABLE events ALTER COLUMN fanned_out SET DEFAULT false;
CREATE INDEX events_fan_out ON events (id) WHERE NOT fanned_out AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated');

-- One row per event and channel. due_at is when a sender may next take it:
-- a claim moves it one lease ahead, so a sender that dies mid-send leaves
-- the row due again once the lease has passed.
CREATE TABLE notifications (
    id           uuid PRIMARY KEY,
    event_id     bigint      NOT NULL REFERENCES events (id),
    action_id    uuid        NOT NULL REFERENCES actions (id),
    type         text        NOT NULL,
    channel      text        NOT NULL,
    kind         text        NOT NULL,
    state        text        NOT NULL DEFAULT 'pending',
    attempts     integer     NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,
    due_at       timestamptz NOT NULL,
    delivered_at timestamptz,
    last_error   text,
    CONSTRAINT notifications_state_valid CHECK (state IN ('pending', 'delivered', 'failed')),
    CONSTRAINT notifications_kind_valid CHECK (kind IN ('slack', 'email', 'webhook'))
);
CREATE UNIQUE INDEX notifications_event_channel ON notifications (event_id, channel);
CREATE INDEX notifications_due ON notifications (due_at) WHERE state = 'pending';
CREATE INDEX notifications_action ON notifications (action_id, created_at);

CREATE TABLE slack_messages (
    action_id uuid        NOT NULL REFERENCES actions (id),
    channel   text        NOT NULL,
    ts        text        NOT NULL,
    posted_at timestamptz NOT NULL,
    PRIMARY KEY (action_id, channel, ts)
);

ALTER TABLE users ADD COLUMN slack_id text;
CREATE UNIQUE INDEX users_slack_id ON users (slack_id) WHERE slack_id IS NOT NULL;

-- +goose Down
DROP INDEX users_slack_id;
ALTER TABLE users DROP COLUMN slack_id;
DROP TABLE slack_messages, notifications;
DROP INDEX events_fan_out;
ALTER TABLE events DROP COLUMN fanned_out;
ALTER TABLE actions DROP COLUMN approvals, DROP COLUMN reminded_at, DROP COLUMN escalated_at;
ALTER TABLE actions DROP CONSTRAINT actions_state_valid,
    ADD CONSTRAINT actions_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'expired', 'cancelled',
        'in_progress', 'done', 'failed', 'recorded')),
    DROP CONSTRAINT actions_approval_states,
    ADD CONSTRAINT actions_approval_states CHECK (class = 'at-most-once' OR state NOT IN ('pending', 'approved', 'rejected'));
