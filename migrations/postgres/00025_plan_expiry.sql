-- +goose Up
-- A plan's expiry is stored by the sweep (maintenance.Sweeper, queue
-- PlanExpireDue), once, with a plan_expired event, so plans are listed by
-- state=expired with a query instead of being settled in Go. A pending
-- plan, or an approved one not done, whose expires_at has passed becomes
-- expired; done stays computed (every step's action finished).
ALTER TABLE plans DROP CONSTRAINT plans_state_valid;
ALTER TABLE plans ADD CONSTRAINT plans_state_valid
    CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested', 'cancelled', 'expired'));
-- What the sweep looks for: plans that may still expire, by their end.
CREATE INDEX plans_expiry_due ON plans (expires_at) WHERE state IN ('pending', 'approved');

-- +goose Down
-- The code before this migration settled expiry on every read: an expired
-- plan goes back to the state it expired from (decided_by 'system' marks
-- a pending one, as the sweep wrote it).
UPDATE plans SET state = CASE WHEN decided_by = 'system' THEN 'pending' ELSE 'approved' END,
    decided_by = CASE WHEN decided_by = 'system' THEN NULL ELSE decided_by END,
    decided_at = CASE WHEN decided_by = 'system' THEN NULL ELSE decided_at END
WHERE state = 'expired';
DROP INDEX plans_expiry_due;
ALTER TABLE plans DROP CONSTRAINT plans_state_valid;
ALTER TABLE plans ADD CONSTRAINT plans_state_valid
    CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested', 'cancelled'));
