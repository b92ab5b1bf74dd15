-- +goose Up
-- An operator's resolution of a stale ticket moves the action to done or
-- failed and writes a ticket_resolved event: it notifies (action.done,
-- action.failed) like an agent's own report, so its kind joins the fan-out.
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE NOT fanned_out AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated', 'ticket_resolved');

-- +goose Down
DROP INDEX events_fan_out;
CREATE INDEX events_fan_out ON events (id) WHERE NOT fanned_out AND kind IN ('submitted', 'approved',
    'rejected', 'changes_requested', 'expired', 'cancelled', 'completed', 'failed', 'ticket_opened',
    'reminder', 'escalated');
