-- +goose Up
-- A claim cycle's writes, continued (issue 45). actions_intent_prefix held
-- every action's key for the search by prefix, beside actions_intent_attempt,
-- which holds the same key of every action but the at-least-once ones: the
-- claim and the completion each added an entry to both. The unique index of
-- attempts now keeps its keys in text_pattern_ops order, which serves
-- equality (the attempt lookups, the uniqueness) exactly as before and the
-- search by prefix as well; the at-least-once actions' keys, which it does
-- not hold, have an index of their own, and the list by key and the search
-- by prefix read both (postgres/action.go,
-- TestIntentPrefixSearchReadsTheAttempts). A claim
-- cycle writes two index entries fewer (17 instead of 19), a new
-- at-most-once or exactly-once submission one.
CREATE UNIQUE INDEX actions_intent_attempt_pattern ON actions (intent_key text_pattern_ops, attempt)
    WHERE class <> 'at-least-once';
DROP INDEX actions_intent_attempt;
ALTER INDEX actions_intent_attempt_pattern RENAME TO actions_intent_attempt;
CREATE INDEX actions_intent_prefix_recorded ON actions (intent_key text_pattern_ops)
    WHERE class = 'at-least-once';
DROP INDEX actions_intent_prefix;

-- +goose Down
CREATE INDEX actions_intent_prefix ON actions (intent_key text_pattern_ops);
DROP INDEX actions_intent_prefix_recorded;
CREATE UNIQUE INDEX actions_intent_attempt_default ON actions (intent_key, attempt)
    WHERE class <> 'at-least-once';
DROP INDEX actions_intent_attempt;
ALTER INDEX actions_intent_attempt_default RENAME TO actions_intent_attempt;
