-- +goose Up
-- The sweep's reminder and escalation scans look only at pending actions
-- whose tool has such a rule; without these partial indexes each sweep read
-- every pending action and parsed its tool snapshot (170 ms a sweep with
-- 10,000 pending actions, none of them with a rule).
CREATE INDEX actions_remind_rule ON actions (created_at)
    WHERE state = 'pending' AND (spec->'approval'->>'remind_after') IS NOT NULL;
CREATE INDEX actions_escalate_rule ON actions (created_at)
    WHERE state = 'pending' AND escalated_at IS NULL AND (spec->'approval'->>'escalate_after') IS NOT NULL;

-- +goose Down
DROP INDEX actions_escalate_rule;
DROP INDEX actions_remind_rule;
