-- +goose Up
-- Two steps of a plan may not share an intent key, but an at-least-once
-- step may have none (its key is optional and only informational; it is
-- stored as ''): plan_steps_one_intent held a plan to one such step, and a
-- second failed its insert (a 500 to POST /api/v1/plans). The uniqueness
-- now holds for the steps that have a key (queue.Plans.Propose refuses
-- their duplicates with 400 first).
CREATE UNIQUE INDEX plan_steps_one_intent_keyed ON plan_steps (plan_id, intent_key) WHERE intent_key <> '';
ALTER TABLE plan_steps DROP CONSTRAINT plan_steps_one_intent;
ALTER INDEX plan_steps_one_intent_keyed RENAME TO plan_steps_one_intent;

-- +goose Down
DROP INDEX plan_steps_one_intent;
ALTER TABLE plan_steps ADD CONSTRAINT plan_steps_one_intent UNIQUE (plan_id, intent_key);
