-- +goose Up
-- Plans: one human decision for a piece of work (docs/plans.md).
--
-- A plan's row is its decision (state, approvals, who decided); version
-- makes every change of it one conditional update (queue.PlanUpdate), and
-- a step's submission bumps it too, so a cancel or a decision racing a
-- step's claim waits for it and then sees it.
CREATE TABLE plans (
    id                 uuid PRIMARY KEY,
    title              text        NOT NULL,
    agent              text        NOT NULL,
    ordered            boolean     NOT NULL,
    state              text        NOT NULL,
    created_at         timestamptz NOT NULL,
    expires_at         timestamptz NOT NULL,
    approvals_required integer     NOT NULL DEFAULT 1,
    approvals          json        NOT NULL DEFAULT '[]',
    decided_by         text,
    decided_at         timestamptz,
    decision_note      text,
    version            integer     NOT NULL DEFAULT 0,
    CONSTRAINT plans_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested', 'cancelled')),
    CONSTRAINT plans_required_positive CHECK (approvals_required >= 1)
);
CREATE INDEX plans_state_created ON plans (state, created_at, id);

-- One row per step. action_id is the action that used the step: set once,
-- by the conditional update that claims it in the submission's own
-- transaction, and unique, so an action uses at most one step.
CREATE TABLE plan_steps (
    plan_id    uuid    NOT NULL REFERENCES plans (id),
    n          integer NOT NULL,
    tool       text    NOT NULL,
    class      text    NOT NULL,
    intent_key text    NOT NULL,
    payload    json    NOT NULL,
    decision   text    NOT NULL,
    rule       text    NOT NULL DEFAULT '',
    warnings   json    NOT NULL DEFAULT '[]',
    approval   json,
    action_id  uuid REFERENCES actions (id),
    PRIMARY KEY (plan_id, n),
    CONSTRAINT plan_steps_n_positive CHECK (n >= 1),
    CONSTRAINT plan_steps_decision_valid CHECK (decision IN ('approve', 'human', 'reject', 'none')),
    CONSTRAINT plan_steps_one_intent UNIQUE (plan_id, intent_key)
);
CREATE UNIQUE INDEX plan_steps_action ON plan_steps (action_id) WHERE action_id IS NOT NULL;

-- +goose Down
DROP TABLE plan_steps;
DROP TABLE plans;
