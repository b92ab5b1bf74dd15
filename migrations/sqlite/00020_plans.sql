-- +goose Up
-- Plans: the SQLite twin of postgres/00020_plans.sql. Times are RFC 3339
-- text as everywhere in this store.
CREATE TABLE plans (
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
    CONSTRAINT plans_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested', 'cancelled')),
    CONSTRAINT plans_required_positive CHECK (approvals_required >= 1)
);
CREATE INDEX plans_state_created ON plans (state, created_at, id);

CREATE TABLE plan_steps (
    plan_id    TEXT    NOT NULL REFERENCES plans (id),
    n          INTEGER NOT NULL,
    tool       TEXT    NOT NULL,
    class      TEXT    NOT NULL,
    intent_key TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    decision   TEXT    NOT NULL,
    rule       TEXT    NOT NULL DEFAULT '',
    warnings   TEXT    NOT NULL DEFAULT '[]',
    approval   TEXT,
    action_id  TEXT REFERENCES actions (id),
    PRIMARY KEY (plan_id, n),
    CONSTRAINT plan_steps_n_positive CHECK (n >= 1),
    CONSTRAINT plan_steps_decision_valid CHECK (decision IN ('approve', 'human', 'reject', 'none')),
    CONSTRAINT plan_steps_one_intent UNIQUE (plan_id, intent_key)
);
CREATE UNIQUE INDEX plan_steps_action ON plan_steps (action_id) WHERE action_id IS NOT NULL;

-- +goose Down
DROP TABLE plan_steps;
DROP TABLE plans;
