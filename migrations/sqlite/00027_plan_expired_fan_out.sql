-- +goose Up
-- The SQLite twin of postgres/00027_plan_expired_fan_out.sql: a pending
-- plan's expiry (plan_expired) joins the kinds the outbox fans out.
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved', 'plan_submitted', 'plan_approved', 'plan_rejected',
    'plan_changes_requested', 'plan_cancelled', 'plan_reminder', 'plan_escalated', 'plan_expired');

-- +goose Down
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE fanned_out = 0 AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved', 'plan_submitted', 'plan_approved', 'plan_rejected',
    'plan_changes_requested', 'plan_cancelled', 'plan_reminder', 'plan_escalated');
