-- +goose Up
-- The SQLite twin of postgres/00031_plan_steps_keyless.sql: the steps of a
-- plan that have an intent key are unique by it, and any number of
-- key-less (at-least-once) steps may be in one plan. SQLite cannot drop a
-- table's UNIQUE constraint, so plan_steps is rebuilt as plans was in 00025
-- (migrations run with foreign keys off).
CREATE TABLE plan_steps_new (
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
    CONSTRAINT plan_steps_decision_valid CHECK (decision IN ('approve', 'human', 'reject', 'none'))
);
INSERT INTO plan_steps_new (plan_id, n, tool, class, intent_key, payload, decision, rule, warnings, approval, action_id)
SELECT plan_id, n, tool, class, intent_key, payload, decision, rule, warnings, approval, action_id FROM plan_steps;
DROP TABLE plan_steps;
ALTER TABLE plan_steps_new RENAME TO plan_steps;
CREATE UNIQUE INDEX plan_steps_action ON plan_steps (action_id) WHERE action_id IS NOT NULL;
CREATE UNIQUE INDEX plan_steps_one_intent ON plan_steps (plan_id, intent_key) WHERE intent_key <> '';

-- +goose Down
CREATE TABLE plan_steps_new (
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
INSERT INTO plan_steps_new (plan_id, n, tool, class, intent_key, payload, decision, rule, warnings, approval, action_id)
SELECT plan_id, n, tool, class, intent_key, payload, decision, rule, warnings, approval, action_id FROM plan_steps;
DROP TABLE plan_steps;
ALTER TABLE plan_steps_new RENAME TO plan_steps;
CREATE UNIQUE INDEX plan_steps_action ON plan_steps (action_id) WHERE action_id IS NOT NULL;
