-- +goose Up
-- The SQLite twin of postgres/00025_plan_expiry.sql: the sweep stores a
-- plan's expiry. SQLite cannot alter a CHECK constraint, so plans is
-- rebuilt as in 00012 (create plans_new, copy, drop, rename); migrations
-- run with foreign keys off, so plan_steps' REFERENCES names the new
-- table. The drop takes plans_state_created with it: it is made again.
-- reminded_at and escalated_at (00024) are kept.
CREATE TABLE plans_new (
    id                 TEXT PRIMARY KEY,
    title              TEXT    NOT NULL,
    agent              TEXT    NOT NULL,
    ordered            INTEGER NOT NULL,
    state              TEXT    NOT NULL,
    created_at         TEXT    NOT NULL,
    expires_at         TEXT    NOT NULL,
    approvals_required INTEGER NOT NULL DEFAULT 1,
    approvals          TEXT    NOT NULL DEFAULT '[]',
    decided_by         TEXT,
    decided_at         TEXT,
    decision_note      TEXT,
    version            INTEGER NOT NULL DEFAULT 0,
    reminded_at        TEXT,
    escalated_at       TEXT,
    CONSTRAINT plans_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested', 'cancelled', 'expired')),
    CONSTRAINT plans_required_positive CHECK (approvals_required >= 1)
);
INSERT INTO plans_new (id, title, agent, ordered, state, created_at, expires_at, approvals_required, approvals,
    decided_by, decided_at, decision_note, version, reminded_at, escalated_at)
SELECT id, title, agent, ordered, state, created_at, expires_at, approvals_required, approvals,
    decided_by, decided_at, decision_note, version, reminded_at, escalated_at FROM plans;
DROP TABLE plans;
ALTER TABLE plans_new RENAME TO plans;
CREATE INDEX plans_state_created ON plans (state, created_at, id);
CREATE INDEX plans_expiry_due ON plans (expires_at) WHERE state IN ('pending', 'approved');

-- +goose Down
UPDATE plans SET state = CASE WHEN decided_by = 'system' THEN 'pending' ELSE 'approved' END,
    decided_by = CASE WHEN decided_by = 'system' THEN NULL ELSE decided_by END,
    decided_at = CASE WHEN decided_by = 'system' THEN NULL ELSE decided_at END
WHERE state = 'expired';
CREATE TABLE plans_new (
    id                 TEXT PRIMARY KEY,
    title              TEXT    NOT NULL,
    agent              TEXT    NOT NULL,
    ordered            INTEGER NOT NULL,
    state              TEXT    NOT NULL,
    created_at         TEXT    NOT NULL,
    expires_at         TEXT    NOT NULL,
    approvals_required INTEGER NOT NULL DEFAULT 1,
    approvals          TEXT    NOT NULL DEFAULT '[]',
    decided_by         TEXT,
    decided_at         TEXT,
    decision_note      TEXT,
    version            INTEGER NOT NULL DEFAULT 0,
    reminded_at        TEXT,
    escalated_at       TEXT,
    CONSTRAINT plans_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested', 'cancelled')),
    CONSTRAINT plans_required_positive CHECK (approvals_required >= 1)
);
INSERT INTO plans_new (id, title, agent, ordered, state, created_at, expires_at, approvals_required, approvals,
    decided_by, decided_at, decision_note, version, reminded_at, escalated_at)
SELECT id, title, agent, ordered, state, created_at, expires_at, approvals_required, approvals,
    decided_by, decided_at, decision_note, version, reminded_at, escalated_at FROM plans;
DROP TABLE plans;
ALTER TABLE plans_new RENAME TO plans;
CREATE INDEX plans_state_created ON plans (state, created_at, id);
