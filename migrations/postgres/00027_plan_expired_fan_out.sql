-- +goose Up
-- A pending plan's expiry (plan_expired, written by the sweep) tells the
-- channels as its decisions do: it joins the kinds the outbox fans out.
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE NOT fanned_out AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved', 'plan_submitted', 'plan_approved', 'plan_rejected',
    'plan_changes_requested', 'plan_cancelled', 'plan_reminder', 'plan_escalated', 'plan_expired');

-- +goose Down
-- plan_expired events written while up are left as they are: outside the
-- index, the fan-out no longer reads them.
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE NOT fanned_out AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved', 'plan_submitted', 'plan_approved', 'plan_rejected',
    'plan_changes_requested', 'plan_cancelled', 'plan_reminder', 'plan_escalated');
