-- +goose Up
-- The sweep's reminder and escalation scans look only at pending actions
-- whose tool has such a rule (the WHERE of sqlite routeDue, term for
-- term, so SQLite can use these partial indexes).
CREATE INDEX actions_remind_rule ON actions (created_at)
    WHERE state = 'pending' AND json_extract(spec, '$.approval.remind_after') > 0;
CREATE INDEX actions_escalate_rule ON actions (created_at)
    WHERE state = 'pending' AND json_extract(spec, '$.approval.escalate_after') > 0 AND escalated_at IS NULL;

-- +goose Down
DROP INDEX actions_escalate_rule;
DROP INDEX actions_remind_rule;
