-- +goose Up
-- An at-least-once tool executed through an upstream MCP server ends done
-- or failed with the upstream's answer (CONTRACT section 11), so that class
-- may now be recorded, done or failed; recorded stays that class's alone.
-- The old CHECK tied the class to recorded both ways; these two say each
-- direction on its own.
--
-- An at-least-once action holds no intent in any state, so the partial
-- unique index that guards intents leaves the class out: an at-least-once
-- done would otherwise hold its key. Every statement that looks for the
-- holder of a key repeats this predicate (queue.HeldStates and the class),
-- or the planner could not use the index for it.
--
-- Existing rows stay as they are: at-least-once upstream calls made before
-- this migration stay recorded, with their result and error.
ALTER TABLE actions DROP CONSTRAINT actions_recorded_iff_at_least_once,
    ADD CONSTRAINT actions_recorded_only_at_least_once CHECK (state <> 'recorded' OR class = 'at-least-once'),
    ADD CONSTRAINT actions_at_least_once_states CHECK (class <> 'at-least-once' OR state IN ('recorded', 'done', 'failed'));
-- The ALTER TABLE above holds the table's ACCESS EXCLUSIVE lock until the
-- migration commits, so no submission runs between the drop and the create.
DROP INDEX actions_held_intent;
CREATE UNIQUE INDEX actions_held_intent ON actions (intent_key)
    WHERE state IN ('pending', 'approved', 'rejected', 'in_progress', 'done') AND class <> 'at-least-once';

-- +goose Down
-- The old CHECK admits an at-least-once action only as recorded, which is
-- how the code before this migration kept an upstream call's outcome (the
-- result, and the error when it failed): those that ended done or failed
-- go back to recorded, keeping both.
UPDATE actions SET state = 'recorded' WHERE class = 'at-least-once' AND state IN ('done', 'failed');
ALTER TABLE actions DROP CONSTRAINT actions_at_least_once_states,
    DROP CONSTRAINT actions_recorded_only_at_least_once,
    ADD CONSTRAINT actions_recorded_iff_at_least_once CHECK ((class = 'at-least-once') = (state = 'recorded'));
DROP INDEX actions_held_intent;
CREATE UNIQUE INDEX actions_held_intent ON actions (intent_key)
    WHERE state IN ('pending', 'approved', 'rejected', 'in_progress', 'done');
